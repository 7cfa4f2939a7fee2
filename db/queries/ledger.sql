-- name: LedgerEntriesByOrder :many
-- An order's journals, in the order they were posted.
SELECT * FROM ledger_entries WHERE order_id = @order_id ORDER BY id;

-- name: LedgerOrderMerchant :one
SELECT merchant_id FROM orders WHERE id = @id;

-- name: LedgerOrderCheck :one
-- What an order's payments brought in less what its refunds gave back
-- (final ones), next to what its entries in the cash accounts say, and
-- the sum of all its entries (zero when every journal balances).
SELECT (
    (SELECT coalesce(sum(p.amount_fen), 0) FROM payments p
        WHERE p.order_id = @order_id AND p.status IN ('SUCCESS', 'REFUNDED'))::bigint
  + (SELECT coalesce(sum(f.amount_fen), 0) FROM refunds f
        WHERE f.order_id = @order_id AND f.transaction_id IS NOT NULL AND f.status <> 'RETRIED'
        AND f.id = (SELECT min(g.id) FROM refunds g WHERE g.transaction_id = f.transaction_id))::bigint
  - (SELECT coalesce(sum(f.amount_fen), 0) FROM refunds f
        WHERE f.order_id = @order_id AND f.status IN ('SUCCESS', 'SETTLED'))::bigint)::bigint AS expected_fen,
    (SELECT coalesce(sum(e.amount_fen), 0) FROM ledger_entries e
        WHERE e.order_id = @order_id AND e.account IN ('wechat_clearing', 'refunds_outside') AND e.kind <> 'fee')::bigint AS cash_fen,
    (SELECT coalesce(sum(e.amount_fen), 0) FROM ledger_entries e WHERE e.order_id = @order_id)::bigint AS sum_fen;

-- name: MerchantSetCommission :one
UPDATE merchants SET commission_bps = @commission_bps, version = version + 1, updated_at = now()
WHERE id = @id
RETURNING id, commission_bps, version;
