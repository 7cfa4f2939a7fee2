-- name: MerchantSetCourierDispatch :one
UPDATE merchants SET courier_dispatch = @courier_dispatch, version = version + 1, updated_at = now()
WHERE id = @id
RETURNING id, courier_dispatch, version;

-- name: MerchantCourierDispatch :one
SELECT courier_dispatch FROM merchants WHERE id = @id;

-- name: DeliveryOrderFacts :one
-- What a placement tells the provider: the order, its address, its shop.
SELECT o.id, o.merchant_id, o.status, o.fulfilment, o.address, o.items_total_fen, o.remark,
       m.name AS merchant_name, m.latitude, m.longitude
FROM orders o JOIN merchants m ON m.id = o.merchant_id
WHERE o.id = @order_id;

-- name: DeliveryInsert :one
-- Opens an order's next placement; an order that has an active one (or
-- this attempt already) gets no row.
INSERT INTO deliveries (order_id, merchant_id, attempt, provider, out_no, reason, quote_token, quote_expires, fee_fen)
VALUES (@order_id, @merchant_id, @attempt, @provider, @out_no, @reason, sqlc.narg(quote_token), sqlc.narg(quote_expires), sqlc.narg(fee_fen))
ON CONFLICT DO NOTHING
RETURNING *;

-- name: DeliveryGet :one
SELECT * FROM deliveries WHERE id = @id;

-- name: DeliveryGetForUpdate :one
SELECT * FROM deliveries WHERE id = @id FOR UPDATE;

-- name: DeliveryByOutNoForUpdate :one
SELECT * FROM deliveries WHERE out_no = @out_no FOR UPDATE;

-- name: DeliveryLatest :one
-- An order's latest placement.
SELECT * FROM deliveries WHERE order_id = @order_id ORDER BY attempt DESC LIMIT 1;

-- name: DeliveryActiveOfOrder :one
SELECT * FROM deliveries
WHERE order_id = @order_id AND status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED');

-- name: DeliveriesOfOrder :many
SELECT * FROM deliveries WHERE order_id = @order_id ORDER BY attempt;

-- name: DeliveryQuoted :exec
UPDATE deliveries SET quote_token = @quote_token, quote_expires = @quote_expires, fee_fen = @fee_fen, updated_at = now()
WHERE id = @id AND status = 'QUOTED';

-- name: DeliveryPlaced :one
-- Records the provider's acceptance of a placement, once.
UPDATE deliveries SET status = 'PLACED', provider_ref = @provider_ref, fee_fen = coalesce(sqlc.narg(fee_fen)::bigint, fee_fen),
    assign_by = @assign_by, seq = seq + 1, heard_at = now(), updated_at = now()
WHERE id = @id AND status = 'QUOTED'
RETURNING *;

-- name: DeliveryApply :one
-- Writes an update the state table accepted, from the row read under
-- lock.
UPDATE deliveries SET status = @status, rider_id = @rider_id, rider_name = @rider_name, rider_phone = @rider_phone,
    latitude = coalesce(sqlc.narg(latitude)::float8, latitude), longitude = coalesce(sqlc.narg(longitude)::float8, longitude),
    located_at = coalesce(sqlc.narg(located_at)::timestamptz, located_at),
    provider_time = coalesce(sqlc.narg(provider_time)::timestamptz, provider_time),
    tip_fen = coalesce(sqlc.narg(tip_fen)::bigint, tip_fen),
    cancel_fee_fen = cancel_fee_fen + @add_cancel_fee_fen, reason = CASE WHEN @reason::text = '' THEN reason ELSE @reason::text END,
    seq = seq + 1, heard_at = now(), updated_at = now()
WHERE id = @id AND seq = @seq
RETURNING *;

-- name: DeliveryHeard :exec
-- Records that the provider was heard (a query that changed nothing),
-- with the rider's last location and the tip it holds when it said.
UPDATE deliveries SET heard_at = now(),
    tip_fen = CASE WHEN status IN ('DELIVERED', 'CANCELLED', 'FAILED') THEN tip_fen ELSE coalesce(sqlc.narg(tip_fen)::bigint, tip_fen) END,
    latitude = coalesce(sqlc.narg(latitude)::float8, latitude), longitude = coalesce(sqlc.narg(longitude)::float8, longitude),
    located_at = coalesce(sqlc.narg(located_at)::timestamptz, located_at)
WHERE id = @id;

-- name: DeliveryClaimPlacing :one
-- A try's hold on placing a QUOTED delivery, until @until; no row: it is
-- not QUOTED, or another try holds it.
UPDATE deliveries SET placing_until = @until::timestamptz
WHERE id = @id AND status = 'QUOTED' AND (placing_until IS NULL OR placing_until < @now::timestamptz)
RETURNING *;

-- name: DeliveryReleasePlacing :exec
-- The try that held the delivery is done with it.
UPDATE deliveries SET placing_until = NULL WHERE id = @id AND placing_until = @until::timestamptz;

-- name: DeliveryPlaceUnsure :exec
UPDATE deliveries SET place_unsure = true, updated_at = now() WHERE id = @id AND status = 'QUOTED';

-- name: DeliveryTipped :one
-- Claims the one tip of a placement waiting for a rider, before the
-- provider is asked: of two sweeps at once, one tips.
UPDATE deliveries SET tip_fen = @tip_fen, assign_by = @assign_by, updated_at = now()
WHERE id = @id AND status = 'PLACED' AND tip_fen = 0
RETURNING *;

-- name: DeliveryTipSet :exec
-- Records the tip the provider holds, after a tip whose outcome was not
-- known.
UPDATE deliveries SET tip_fen = @tip_fen, updated_at = now()
WHERE id = @id AND status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED');

-- name: DeliveryEventInsert :exec
INSERT INTO delivery_events (delivery_id, seq, order_id, kind, status, rider_name, provider_time, source)
VALUES (@delivery_id, @seq, @order_id, @kind, @status, @rider_name, sqlc.narg(provider_time), @source);

-- name: DeliveryEventsOf :many
SELECT * FROM delivery_events WHERE delivery_id = @delivery_id ORDER BY seq;

-- name: DeliveriesUnassigned :many
-- Placements no rider took by their time.
SELECT * FROM deliveries
WHERE status = 'PLACED' AND assign_by < @now
ORDER BY assign_by LIMIT @max_rows;

-- name: DeliveriesLate :many
-- Active placements not heard of since heard_before: their callbacks
-- are late, so the provider is asked.
SELECT * FROM deliveries
WHERE status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED') AND heard_at < @heard_before
ORDER BY heard_at LIMIT @max_rows;

-- name: DeliveriesList :many
-- GET /admin/v1/deliveries: newest first, by merchant and status. final
-- is a delivery that ended undelivered with nothing after it while its
-- order still waits for a courier: the merchant's to see to.
SELECT sqlc.embed(d),
       (o.status IN ('ACCEPTED', 'READY') AND d.status IN ('CANCELLED', 'FAILED')
        AND NOT EXISTS (SELECT 1 FROM deliveries n WHERE n.order_id = d.order_id AND n.attempt > d.attempt))::boolean AS final
FROM deliveries d JOIN orders o ON o.id = d.order_id
WHERE (sqlc.narg(merchant_id)::bigint IS NULL OR d.merchant_id = sqlc.narg(merchant_id))
  AND (sqlc.narg(status)::text IS NULL OR d.status = sqlc.narg(status))
  AND (sqlc.narg(active)::boolean IS NULL OR (d.status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED')) = sqlc.narg(active))
  AND (NOT @final_only::boolean OR (o.status IN ('ACCEPTED', 'READY') AND d.status IN ('CANCELLED', 'FAILED')
        AND NOT EXISTS (SELECT 1 FROM deliveries n WHERE n.order_id = d.order_id AND n.attempt > d.attempt)))
  AND d.created_at >= @since
ORDER BY d.id DESC LIMIT @max_rows;

-- name: DeliveryGetByOutNo :one
SELECT * FROM deliveries WHERE out_no = @out_no;
