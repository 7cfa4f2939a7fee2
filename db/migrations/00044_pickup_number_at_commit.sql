-- +goose Up
-- A pickup order's number is taken at the end of its placement, just
-- before the commit, not first: the counter's row is the one every pickup
-- placement of the merchant's day waits for, and a placement that took it
-- first held it while it waited for stock, budgets and vouchers, so that
-- under load the merchant's pickup orders were placed one at a time (the
-- HA soak found a dozen queued behind one). The order is inserted without
-- its number and given it in the same transaction; the deferred trigger
-- orders_pickup_numbered (db/functions) holds a committed pickup order to
-- its number, as this check did at the insert.
ALTER TABLE orders
    DROP CONSTRAINT orders_pickup_check,
    ADD CONSTRAINT orders_pickup_check CHECK ((fulfilment = 'pickup') = (pickup_day IS NOT NULL)
        AND (pickup_no IS NULL OR pickup_day IS NOT NULL)) NOT VALID;
ALTER TABLE orders VALIDATE CONSTRAINT orders_pickup_check;

-- +goose Down
ALTER TABLE orders
    DROP CONSTRAINT orders_pickup_check,
    ADD CONSTRAINT orders_pickup_check CHECK ((fulfilment = 'pickup') = (pickup_no IS NOT NULL)
        AND (pickup_no IS NULL) = (pickup_day IS NULL)) NOT VALID;
ALTER TABLE orders VALIDATE CONSTRAINT orders_pickup_check;
