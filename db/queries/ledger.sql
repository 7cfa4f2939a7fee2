-- name: LedgerEntriesByOrder :many
-- An order's journals, in the order they were posted.
SELECT * FROM ledger_entries WHERE order_id = @order_id ORDER BY id;

-- name: LedgerOrderMerchant :one
SELECT merchant_id FROM orders WHERE id = @id;

-- name: MerchantSetCommission :one
UPDATE merchants SET commission_bps = @commission_bps, version = version + 1, updated_at = now()
WHERE id = @id
RETURNING id, commission_bps, version;

-- name: MerchantStatementDays :many
-- A merchant's ledger by day in its time zone: each figure one sum of
-- its entries (the merchant's accounts, and the platform's discounts
-- and WeChat's fees on its orders).
SELECT (e.posted_at AT TIME ZONE @time_zone::text)::date AS day,
    count(DISTINCT e.journal) FILTER (WHERE e.kind = 'sale')::integer AS orders,
    coalesce(-sum(e.amount_fen) FILTER (WHERE e.account = 'merchant_sales'), 0)::bigint AS gross_fen,
    coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'merchant_discounts'), 0)::bigint AS merchant_discount_fen,
    coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'platform_promotions'), 0)::bigint AS platform_discount_fen,
    coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'merchant_refunds'), 0)::bigint AS refunds_fen,
    coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'merchant_commission'), 0)::bigint AS commission_fen,
    coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'wechat_fees'), 0)::bigint AS fees_fen,
    coalesce(-sum(e.amount_fen) FILTER (WHERE e.account LIKE 'merchant\_%'), 0)::bigint AS net_fen
FROM ledger_entries e
WHERE e.merchant_id = @merchant_id AND e.posted_at >= @from_at AND e.posted_at < @to_at
GROUP BY 1 ORDER BY 1;

-- name: MerchantTopDishes :many
-- The dishes of a merchant's orders sold (a sale posted) in a time range:
-- their units (less those refunded) and what their lines sold for, best
-- sellers first.
SELECT i.dish_id, i.name, sum(i.qty - i.refunded_qty)::bigint AS qty, sum(i.line_total_fen)::bigint AS sales_fen
FROM order_items i
WHERE i.order_id IN (SELECT e.order_id FROM ledger_entries e WHERE e.merchant_id = @merchant_id AND e.kind = 'sale'
                     AND e.account = 'merchant_sales' AND e.posted_at >= @from_at AND e.posted_at < @to_at)
GROUP BY i.dish_id, i.name
ORDER BY sales_fen DESC, i.dish_id
LIMIT @max_rows;

-- name: MerchantTimeZone :one
SELECT time_zone FROM merchants WHERE id = @id;
