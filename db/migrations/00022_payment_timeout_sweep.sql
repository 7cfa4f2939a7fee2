-- +goose Up
-- An order no longer writes its payment-timeout job when it is placed: a
-- sweep (order.payment_timeout_sweep, every
-- TAKEOUT_ORDER_TIMEOUT_SWEEP_INTERVAL) queues the job of each order still
-- waiting for payment past its deadline that has none. Most orders are
-- paid first, so most never get one: the placement writes one row and
-- seven index entries (two of them GIN) fewer, and no job runs at each
-- paid order's deadline only to find it paid (docs/performance.md).
--
-- The sweep finds due orders through this partial index, which holds only
-- the orders waiting for payment.
CREATE INDEX orders_pending_pay_deadline_idx ON orders (pay_deadline) WHERE status = 'PENDING_PAYMENT';

-- order_place lost the job's two arguments: db/functions/order_place.sql.

-- +goose Down
DROP INDEX orders_pending_pay_deadline_idx;
