-- +goose Up
-- Pickup and scheduled orders. A merchant offers delivery, pickup or both,
-- and may take orders for a later time slot (package fulfilment: the
-- slots' length, lead time, days ahead, same-day cut-off, capacity and
-- when their tickets print). Existing merchants deliver only, as before.
ALTER TABLE merchants
    ADD COLUMN fulfilment jsonb NOT NULL DEFAULT '{"delivery": true, "pickup": false, "scheduled": null}'
        CONSTRAINT merchants_fulfilment_check CHECK (jsonb_typeof(fulfilment) = 'object');

-- An order is delivered or collected. A pickup order has a number, one of
-- its merchant's for the day it is collected (the slot's, or the day it
-- was placed: in the merchant's time zone), allocated by its placement;
-- the unique index is what makes a number never given twice. A
-- scheduled order names its slot. None of these columns changes after
-- the placement, so the index leaves the transitions' updates heap-only.
ALTER TABLE orders
    ADD COLUMN fulfilment text NOT NULL DEFAULT 'delivery'
        CONSTRAINT orders_fulfilment_check CHECK (fulfilment IN ('delivery', 'pickup')),
    ADD COLUMN pickup_day date,
    ADD COLUMN pickup_no  integer CONSTRAINT orders_pickup_no_check CHECK (pickup_no > 0),
    ADD COLUMN slot_start timestamptz,
    ADD COLUMN slot_end   timestamptz,
    ADD CONSTRAINT orders_pickup_check CHECK ((fulfilment = 'pickup') = (pickup_no IS NOT NULL)
        AND (pickup_no IS NULL) = (pickup_day IS NULL)),
    ADD CONSTRAINT orders_slot_check CHECK ((slot_start IS NULL) = (slot_end IS NULL) AND slot_end > slot_start);
CREATE UNIQUE INDEX orders_pickup_no_key ON orders (merchant_id, pickup_day, pickup_no) WHERE pickup_no IS NOT NULL;

-- The last pickup number given by a merchant on a day. The placement
-- takes the next in its transaction: a placement that fails gives it
-- back with its rollback.
CREATE TABLE pickup_counters (
    merchant_id bigint  NOT NULL REFERENCES merchants (id),
    day         date    NOT NULL,
    last        integer NOT NULL CHECK (last >= 0),
    PRIMARY KEY (merchant_id, day)
);

-- A slot's orders, taken like stock: the placement adds one while it is
-- below the merchant's capacity, and a cancel (or any transition that
-- gives the stock back) takes it off with the order's hold. taken is
-- always the number of the slot's holds.
CREATE TABLE slot_bookings (
    merchant_id bigint      NOT NULL REFERENCES merchants (id),
    slot_start  timestamptz NOT NULL,
    taken       integer     NOT NULL CHECK (taken >= 0),
    PRIMARY KEY (merchant_id, slot_start)
);

-- The slot an order holds, until it is given back.
CREATE TABLE slot_holds (
    order_id    bigint      PRIMARY KEY REFERENCES orders (id),
    merchant_id bigint      NOT NULL,
    slot_start  timestamptz NOT NULL
);

-- +goose Down
DROP TABLE slot_holds;
DROP TABLE slot_bookings;
DROP TABLE pickup_counters;
DROP INDEX orders_pickup_no_key;
ALTER TABLE orders
    DROP CONSTRAINT orders_slot_check,
    DROP CONSTRAINT orders_pickup_check,
    DROP COLUMN slot_end,
    DROP COLUMN slot_start,
    DROP COLUMN pickup_no,
    DROP COLUMN pickup_day,
    DROP COLUMN fulfilment;
ALTER TABLE merchants DROP COLUMN fulfilment;
