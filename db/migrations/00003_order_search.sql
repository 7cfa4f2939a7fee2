-- +goose Up
-- Admin search by merchant or status, newest first.
CREATE INDEX orders_merchant_id_idx ON orders (merchant_id, id DESC);
CREATE INDEX orders_status_id_idx ON orders (status, id DESC);
-- Jobs look orders up by status and deadline.
CREATE INDEX stock_reservations_unreleased_idx ON stock_reservations (order_id) WHERE released_at IS NULL;

-- +goose Down
DROP INDEX stock_reservations_unreleased_idx;
DROP INDEX orders_status_id_idx;
DROP INDEX orders_merchant_id_idx;
