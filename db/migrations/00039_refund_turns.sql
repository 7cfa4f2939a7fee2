-- +goose Up
-- WeChat Pay takes the refunds of one payment at least a minute apart:
-- sent_at is when a refund was first sent (its turn), so that the next
-- refund of the payment waits for it; last_error is WeChat's last
-- refusal, for the operator when it needs one.
ALTER TABLE refunds ADD COLUMN sent_at timestamptz;
ALTER TABLE refunds ADD COLUMN last_error text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE refunds DROP COLUMN last_error;
ALTER TABLE refunds DROP COLUMN sent_at;
