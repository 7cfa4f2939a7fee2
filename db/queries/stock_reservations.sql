-- name: DishesForQuote :many
SELECT id, merchant_id, name, price_fen, stock, on_sale, version FROM dishes_with_stock
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
