-- name: DishReserveStock :one
-- Takes qty units if the dish is still on sale at the quoted price and has
-- them; no row means it has not (the caller finds out which).
UPDATE dishes SET stock = stock - @qty
WHERE id = @id AND merchant_id = @merchant_id AND price_fen = @price_fen AND on_sale AND stock >= @qty
RETURNING id, stock;

-- name: DishesForQuote :many
SELECT id, merchant_id, name, price_fen, stock, on_sale, version FROM dishes
WHERE merchant_id = @merchant_id AND id = ANY(@ids::bigint[])
ORDER BY id;

-- name: ReservationInsert :exec
INSERT INTO stock_reservations (order_id, dish_id, qty) VALUES (@order_id, @dish_id, @qty);

-- name: ReservationRelease :many
-- Marks an order's unreleased reservations released; each is released
-- once, however often this runs.
UPDATE stock_reservations SET released_at = now()
WHERE order_id = @order_id AND released_at IS NULL
RETURNING dish_id, qty;

-- name: DishReturnStock :exec
UPDATE dishes SET stock = stock + @qty WHERE id = @id;
