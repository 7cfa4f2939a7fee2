-- name: MerchantInsert :one
INSERT INTO merchants (name, status, delivery_fee_fen)
VALUES (@name, @status, @delivery_fee_fen)
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
    version          = version + 1,
    updated_at       = now()
WHERE id = @id AND version = @version
RETURNING *;

-- name: MerchantGetByName :one
SELECT * FROM merchants WHERE name = @name ORDER BY id LIMIT 1;
