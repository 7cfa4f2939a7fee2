-- +goose Up
-- An order's transitions (paid, accepted, dispatched, completed,
-- cancelled) change its status, version and updated_at. While any index
-- of orders names status, in its columns or its predicate, each such
-- update writes the row anew and an entry in every one of the table's
-- indexes (seven). Without one, and with room left on the row's page
-- (fillfactor), it is a heap-only (HOT) update: the new version goes on
-- the same page and no index is touched (docs/performance.md).
--
-- The two indexes that named status:
-- * orders_status_id_idx (status, id DESC) served the admin search by
--   status alone; that search now reads the newest orders first by the
--   primary key and filters them, as it does for its other filters.
-- * orders_pending_pay_deadline_idx (pay_deadline, pending orders only)
--   served the payment-timeout sweep. The sweep now reads the deadlines
--   that came due since it last ran (order_timeout_sweep.swept_to) on an
--   index of every order's deadline, which no transition changes.
ALTER TABLE orders SET (fillfactor = 85);

CREATE TABLE order_timeout_sweep (
    singleton boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    swept_to  timestamptz NOT NULL
);
-- Every order still waiting for payment has its deadline after this (and
-- every order placed from now on has one later than its placement).
INSERT INTO order_timeout_sweep (swept_to)
SELECT coalesce(min(pay_deadline) - interval '1 second', now() - interval '1 hour')
FROM orders WHERE status = 'PENDING_PAYMENT';

CREATE INDEX orders_pay_deadline_idx ON orders (pay_deadline);
DROP INDEX orders_pending_pay_deadline_idx;
DROP INDEX orders_status_id_idx;

-- +goose Down
CREATE INDEX orders_status_id_idx ON orders (status, id DESC);
CREATE INDEX orders_pending_pay_deadline_idx ON orders (pay_deadline) WHERE status = 'PENDING_PAYMENT';
DROP INDEX orders_pay_deadline_idx;
DROP TABLE order_timeout_sweep;
ALTER TABLE orders RESET (fillfactor);
