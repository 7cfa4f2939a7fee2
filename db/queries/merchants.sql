-- name: MerchantInsert :one
INSERT INTO merchants (name, status, delivery_fee_fen, min_order_fen, latitude, longitude, delivery_bands, time_zone, weekly_hours, closed_dates,
                       accept_within_seconds, accept_timeout_action, fulfilment)
-- What is left out (NULL) takes the column's default.
VALUES (@name, @status, @delivery_fee_fen, @min_order_fen, sqlc.narg('latitude'), sqlc.narg('longitude'),
        coalesce(sqlc.narg('delivery_bands')::jsonb, '[]'), coalesce(sqlc.narg('time_zone')::text, 'Asia/Shanghai'),
        coalesce(sqlc.narg('weekly_hours')::jsonb, '[]'), coalesce(sqlc.narg('closed_dates')::text[], '{}'),
        coalesce(sqlc.narg('accept_within_seconds')::integer, 300), coalesce(sqlc.narg('accept_timeout_action')::text, 'reject'),
        coalesce(sqlc.narg('fulfilment')::jsonb, '{"delivery": true, "pickup": false, "scheduled": null}'))
RETURNING *;

-- name: MerchantGetByID :one
SELECT * FROM merchants WHERE id = @id;

-- name: MerchantList :many
SELECT * FROM merchants ORDER BY id;

-- name: MerchantUpdate :one
-- Compare-and-set on version: a stale version updates nothing.
UPDATE merchants SET
    name             = coalesce(sqlc.narg('name'), name),
    status           = coalesce(sqlc.narg('status'), status),
    delivery_fee_fen = coalesce(sqlc.narg('delivery_fee_fen'), delivery_fee_fen),
    min_order_fen    = coalesce(sqlc.narg('min_order_fen'), min_order_fen),
    -- NULL is a value of the location (none): the flag says whether to
    -- set it.
    latitude         = CASE WHEN @set_location::boolean THEN sqlc.narg('latitude') ELSE latitude END,
    longitude        = CASE WHEN @set_location::boolean THEN sqlc.narg('longitude') ELSE longitude END,
    delivery_bands   = coalesce(sqlc.narg('delivery_bands'), delivery_bands),
    time_zone        = coalesce(sqlc.narg('time_zone'), time_zone),
    weekly_hours     = coalesce(sqlc.narg('weekly_hours'), weekly_hours),
    closed_dates     = coalesce(sqlc.narg('closed_dates')::text[], closed_dates),
    accept_within_seconds = coalesce(sqlc.narg('accept_within_seconds')::integer, accept_within_seconds),
    accept_timeout_action = coalesce(sqlc.narg('accept_timeout_action')::text, accept_timeout_action),
    fulfilment       = coalesce(sqlc.narg('fulfilment')::jsonb, fulfilment),
    -- A change of what an order costs or when it may be placed: quotes
    -- made before it no longer take stock.
    quote_version    = quote_version + CASE WHEN @quote_changed::boolean THEN 1 ELSE 0 END,
    version          = version + 1,
    updated_at       = now()
WHERE id = @id AND version = @version
RETURNING *;

-- name: MerchantGetByName :one
SELECT * FROM merchants WHERE name = @name ORDER BY id LIMIT 1;
