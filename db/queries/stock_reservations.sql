-- name: DishesForQuote :many
SELECT id, merchant_id, name, price_fen, packaging_fee_fen, options_version, stock, on_sale, version FROM dishes_with_stock
WHERE merchant_id = @merchant_id AND id = ANY(@ids::bigint[])
ORDER BY id;

-- name: QuoteCart :many
-- A confirm's reads in one round trip and one snapshot: the merchant's
-- status and delivery fee on every row, with one row per dish of the
-- cart that the merchant has (the dish columns NULL on the one row of a
-- merchant with none of them). No row: no such merchant.
SELECT m.version AS merchant_version, m.status AS merchant_status, m.delivery_fee_fen, m.min_order_fen, m.latitude, m.longitude, m.delivery_bands,
       m.time_zone, m.weekly_hours, m.closed_dates, m.quote_version, m.fulfilment, m.courier_dispatch,
       d.id AS dish_id, d.name, d.price_fen, d.stock, d.on_sale, d.version,
       d.packaging_fee_fen, d.options_version,
       -- The dish's option groups and choices, in menu order, one object
       -- per choice.
       (SELECT coalesce(json_agg(json_build_object(
                   'group_id', g.id, 'group_name', g.name, 'min', g.min_choices, 'max', g.max_choices,
                   'choice_id', c.id, 'choice_name', c.name, 'delta', c.price_delta_fen, 'available', c.available)
                   ORDER BY g.position, g.id, c.position, c.id), '[]')
        FROM option_groups g JOIN option_choices c ON c.group_id = g.id
        WHERE g.dish_id = d.id)::jsonb AS options,
       -- The merchant's promotions that are on (those ended in the last
       -- week too, so that confirm can say why they no longer apply),
       -- each with the budget it has left (null: no budget).
       (SELECT coalesce(jsonb_agg(to_jsonb(p) || jsonb_build_object('budget_left',
                   (SELECT sum(b.remaining) FROM promotion_budget b WHERE b.promotion_id = p.id)) ORDER BY p.id), '[]')
        FROM promotions p
        WHERE p.merchant_id = m.id AND p.status = 'active'
          AND (p.ends_on IS NULL OR p.ends_on >= current_date - 7))::jsonb AS promotions
FROM merchants m
LEFT JOIN dishes_with_stock d ON d.merchant_id = m.id AND d.id = ANY(@ids::bigint[])
WHERE m.id = @merchant_id
ORDER BY d.id;

-- name: QuoteLive :many
-- What a confirm reads afresh when it prices the cart from its cache of
-- QuoteCart's answers: the versions that say whether the cached merchant
-- (its row and its promotions) and dishes still hold, each cart dish's
-- stock, and what the named promotions have left of their budgets. One
-- row per dish of the cart that the merchant has, as QuoteCart's; no row:
-- no such merchant.
SELECT m.version AS merchant_version, m.quote_version,
       b.budget_ids::bigint[] AS budget_ids, b.budgets_left::bigint[] AS budgets_left,
       d.id AS dish_id, d.version AS dish_version, d.stock
FROM merchants m
CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(x.promotion_id ORDER BY x.promotion_id), '{}') AS budget_ids,
           coalesce(array_agg(x.remaining ORDER BY x.promotion_id), '{}') AS budgets_left
    FROM (SELECT pb.promotion_id, sum(pb.remaining)::bigint AS remaining
          FROM promotion_budget pb
          WHERE pb.promotion_id = ANY(@budgeted::bigint[])
          GROUP BY pb.promotion_id) x
) b
LEFT JOIN dishes_with_stock d ON d.merchant_id = m.id AND d.id = ANY(@ids::bigint[])
WHERE m.id = @merchant_id
ORDER BY d.id;

-- name: ReservationInsert :exec
INSERT INTO stock_reservations (order_id, dish_id, qty) VALUES (@order_id, @dish_id, @qty);

-- name: ReservationRelease :many
-- Marks an order's unreleased reservations released; each is released
-- once, however often this runs.
UPDATE stock_reservations SET released_at = now()
WHERE order_id = @order_id AND released_at IS NULL AND consumed_at IS NULL
RETURNING dish_id, qty;

-- name: ReservationConsume :exec
-- Marks an order's held units consumed: they left the kitchen with the
-- order, so they no longer count as on hand.
UPDATE stock_reservations SET consumed_at = now()
WHERE order_id = @order_id AND released_at IS NULL AND consumed_at IS NULL;

-- name: ReservationShrink :one
-- Gives qty units of an order's held reservation of a dish back (a
-- refunded line whose stock goes back on sale); a reservation left with
-- none is released. No row: nothing held to give back.
UPDATE stock_reservations SET qty = CASE WHEN qty > @qty THEN qty - @qty ELSE qty END,
    released_at = CASE WHEN qty = @qty THEN now() ELSE released_at END
WHERE order_id = @order_id AND dish_id = @dish_id AND released_at IS NULL AND consumed_at IS NULL AND qty >= @qty
RETURNING qty, released_at IS NOT NULL AS released;
