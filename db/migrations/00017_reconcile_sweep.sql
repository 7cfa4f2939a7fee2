-- +goose Up
-- The reconciliation sweep takes late payments and refunds least recently
-- checked first, so that a backlog of attempts nobody paid (they stay open
-- until their order's pay deadline) cannot keep it from the ones whose
-- callback was lost. checked_at is when a sweep last took the row.
ALTER TABLE payments ADD COLUMN checked_at timestamptz;
ALTER TABLE refunds ADD COLUMN checked_at timestamptz;
-- Open attempts with a prepay are few of all payments: the sweep reads
-- them through this index instead of scanning the table every minute.
CREATE INDEX payments_to_reconcile_idx ON payments (checked_at NULLS FIRST, id)
    WHERE status = 'CREATED' AND prepay_id IS NOT NULL;
DROP INDEX refunds_processing_idx;
CREATE INDEX refunds_processing_idx ON refunds (checked_at NULLS FIRST, id) WHERE status = 'PROCESSING';

-- +goose Down
DROP INDEX refunds_processing_idx;
CREATE INDEX refunds_processing_idx ON refunds (id) WHERE status = 'PROCESSING';
DROP INDEX payments_to_reconcile_idx;
ALTER TABLE refunds DROP COLUMN checked_at;
ALTER TABLE payments DROP COLUMN checked_at;
