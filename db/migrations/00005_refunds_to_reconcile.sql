-- +goose Up
-- The reconciliation job looks for refunds still waiting for their result.
CREATE INDEX refunds_processing_idx ON refunds (id) WHERE status = 'PROCESSING';

-- +goose Down
DROP INDEX refunds_processing_idx;
