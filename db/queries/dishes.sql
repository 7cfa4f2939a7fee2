-- name: DishInsert :one
INSERT INTO dishes (merchant_id, name, price_fen, stock, on_sale)
VALUES (@merchant_id, @name, @price_fen, @stock, @on_sale)
RETURNING *;

-- name: DishGetByID :one
SELECT * FROM dishes WHERE id = @id;

-- name: DishListByMerchant :many
SELECT * FROM dishes WHERE merchant_id = @merchant_id ORDER BY id;

-- name: DishUpdate :one
-- Compare-and-set on version: a stale version updates nothing.
UPDATE dishes SET
    name       = coalesce(sqlc.narg('name'), name),
    price_fen  = coalesce(sqlc.narg('price_fen'), price_fen),
    on_sale    = coalesce(sqlc.narg('on_sale'), on_sale),
    stock      = coalesce(sqlc.narg('stock'), stock),
    version    = version + 1,
    updated_at = now()
WHERE id = @id AND version = @version
RETURNING *;
