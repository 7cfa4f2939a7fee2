-- name: PickupNumberAssign :one
-- Gives a newly placed pickup order the next number of its merchant's
-- day. The counter's row stays locked until the placement commits (or
-- rolls back, giving the number back), so numbers are given in commit
-- order without a gap that a failed placement leaves; the placement
-- takes it last, so that it holds the row only for its commit.
WITH n AS (
    INSERT INTO pickup_counters (merchant_id, day, last) VALUES (@merchant_id, @day, 1)
    ON CONFLICT (merchant_id, day) DO UPDATE SET last = pickup_counters.last + 1
    RETURNING last
)
UPDATE orders o SET pickup_no = n.last FROM n
WHERE o.id = @order_id
RETURNING o.pickup_no::integer;

-- name: SlotTake :one
-- One order more in a slot, while it is below the merchant's capacity
-- (read in the same statement, so a lowered capacity holds at once): no
-- row when the slot is full.
INSERT INTO slot_bookings AS b (merchant_id, slot_start, taken)
SELECT @merchant_id, @slot_start, 1
FROM merchants m
WHERE m.id = @merchant_id AND coalesce((m.fulfilment -> 'scheduled' ->> 'capacity')::integer, 0) >= 1
ON CONFLICT (merchant_id, slot_start) DO UPDATE SET taken = b.taken + 1
WHERE b.taken < (SELECT coalesce((m.fulfilment -> 'scheduled' ->> 'capacity')::integer, 0) FROM merchants m
                 WHERE m.id = excluded.merchant_id)
RETURNING taken;

-- name: SlotHoldInsert :exec
INSERT INTO slot_holds (order_id, merchant_id, slot_start) VALUES (@order_id, @merchant_id, @slot_start);

-- name: SlotRelease :execrows
-- Gives an order's slot back, once however often it runs: the hold goes,
-- and its slot has one order less.
WITH hold AS (
    DELETE FROM slot_holds WHERE order_id = @order_id RETURNING merchant_id, slot_start
)
UPDATE slot_bookings b SET taken = b.taken - 1
FROM hold
WHERE b.merchant_id = hold.merchant_id AND b.slot_start = hold.slot_start;

-- name: SlotBookings :many
-- How many orders a merchant's slots from a time on have taken.
SELECT slot_start, taken FROM slot_bookings
WHERE merchant_id = @merchant_id AND slot_start >= @since::timestamptz
ORDER BY slot_start;

