-- name: DishInsert :one
-- Its stock is set next, in the same transaction (StockSpread).
INSERT INTO dishes (merchant_id, name, price_fen, on_sale)
VALUES (@merchant_id, @name, @price_fen, @on_sale)
RETURNING id;

-- name: DishGetByID :one
SELECT * FROM dishes_with_stock WHERE id = @id;

-- name: DishListByMerchant :many
SELECT * FROM dishes_with_stock WHERE merchant_id = @merchant_id ORDER BY id;

-- name: DishUpdate :one
-- Compare-and-set on version: a stale version updates nothing.
UPDATE dishes SET
    name       = coalesce(sqlc.narg('name'), name),
    price_fen  = coalesce(sqlc.narg('price_fen'), price_fen),
    on_sale    = coalesce(sqlc.narg('on_sale'), on_sale),
    version    = version + 1,
    updated_at = now()
WHERE id = @id AND version = @version
RETURNING id, merchant_id;
