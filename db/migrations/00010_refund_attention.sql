-- +goose Up
-- Refunds that end ABNORMAL or CLOSED at the platform are FAILED: money
-- owed to a customer, which an operator retries (a new refund, the old one
-- RETRIED) or settles outside WeChat with a note (SETTLED). A refund of a
-- transaction the platform reported that we did not expect (a second
-- payment of one out_trade_no) names that transaction.
ALTER TABLE refunds DROP CONSTRAINT refunds_status_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_status_check
    CHECK (status IN ('PENDING', 'PROCESSING', 'SUCCESS', 'FAILED', 'RETRIED', 'SETTLED'));
ALTER TABLE refunds ADD COLUMN transaction_id text;
ALTER TABLE refunds ADD COLUMN note text NOT NULL DEFAULT '';
CREATE INDEX refunds_attention_idx ON refunds (id) WHERE status = 'FAILED';

-- +goose Down
DROP INDEX refunds_attention_idx;
ALTER TABLE refunds DROP COLUMN note;
ALTER TABLE refunds DROP COLUMN transaction_id;
ALTER TABLE refunds DROP CONSTRAINT refunds_status_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_status_check CHECK (status IN ('PENDING', 'PROCESSING', 'SUCCESS', 'FAILED'));
