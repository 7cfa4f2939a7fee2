-- name: MerchantSetSubMerchant :one
-- Onboards a merchant as a sub-merchant (sub_mchid NULL takes it off).
UPDATE merchants SET sub_mchid = sqlc.narg(sub_mchid), sub_appid = sqlc.narg(sub_appid), version = version + 1, updated_at = now()
WHERE id = @id
RETURNING id, sub_mchid, sub_appid, version;

-- name: MerchantSubMerchantOfOrder :one
SELECT m.id, m.sub_mchid, m.sub_appid
FROM orders o JOIN merchants m ON m.id = o.merchant_id
WHERE o.id = @order_id;

-- name: SharingInsert :one
-- Records a profit-sharing request once: a second insert of the live
-- share of a payment (or return of a refund) returns no row.
INSERT INTO profit_sharings (kind, payment_id, order_id, merchant_id, refund_id, attempt, out_no, cause, amount_fen)
VALUES (@kind, @payment_id, @order_id, @merchant_id, sqlc.narg(refund_id), @attempt, @out_no, @cause, @amount_fen)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: SharingGetByOutNo :one
SELECT * FROM profit_sharings WHERE out_no = @out_no;

-- name: SharingGetByOutNoForUpdate :one
SELECT * FROM profit_sharings WHERE out_no = @out_no FOR UPDATE;

-- name: SharingLiveShare :one
-- The live share of a payment, if it has one.
SELECT * FROM profit_sharings WHERE payment_id = @payment_id AND kind = 'share' AND status <> 'SUPERSEDED';

-- name: SharingLiveReturn :one
SELECT * FROM profit_sharings WHERE refund_id = @refund_id AND kind = 'return' AND status <> 'SUPERSEDED';

-- name: SharingMarkSent :execrows
UPDATE profit_sharings SET status = 'PROCESSING', amount_fen = @amount_fen, unfrozen_fen = @unfrozen_fen,
    sent_at = @sent_at, updated_at = now()
WHERE id = @id AND status = 'PENDING';

-- name: SharingSetWxID :exec
UPDATE profit_sharings SET wx_id = @wx_id, updated_at = now() WHERE id = @id AND wx_id IS NULL;

-- name: SharingFinish :one
-- Records how a request ended, once: a request that ended already
-- returns no row. unfrozen_fen, when given, is what the platform reports
-- it unfroze to the merchant.
UPDATE profit_sharings SET status = @status, fail_reason = sqlc.narg(fail_reason), finished_at = @finished_at,
    unfrozen_fen = coalesce(sqlc.narg(unfrozen_fen)::bigint, unfrozen_fen), updated_at = now()
WHERE id = @id AND status IN ('PENDING', 'PROCESSING')
RETURNING *;

-- name: SharingSupersede :one
-- An operator's retry of a failed request: it is superseded, and the
-- next attempt takes its place.
UPDATE profit_sharings SET status = 'SUPERSEDED', updated_at = now()
WHERE out_no = @out_no AND status = 'FAILED'
RETURNING *;

-- name: SharingList :many
SELECT * FROM profit_sharings
WHERE (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (sqlc.narg(order_id)::bigint IS NULL OR order_id = sqlc.narg(order_id))
ORDER BY id DESC
LIMIT @max_rows;

-- name: SharingFailedCount :one
SELECT count(*) FILTER (WHERE kind = 'share')::bigint AS shares, count(*) FILTER (WHERE kind = 'return')::bigint AS returns
FROM profit_sharings WHERE status = 'FAILED';

-- name: SharingPaymentFigures :one
-- A payment's money as the ledger has it: what is still frozen at WeChat
-- (wechat_clearing) and the commission the order owes the platform now
-- (its sale's, less what refunds took back).
SELECT coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'wechat_clearing'), 0)::bigint AS frozen_fen,
       coalesce(-sum(e.amount_fen) FILTER (WHERE e.account = 'platform_commission'), 0)::bigint AS commission_fen,
       coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'platform_shared'), 0)::bigint AS shared_fen
FROM ledger_entries e WHERE e.payment_id = @payment_id;

-- name: SharingRefundsSentUnfinished :one
-- Refunds of a payment sent to WeChat that have not ended: a share waits
-- for them, since they take from the frozen money it would share.
SELECT count(*)::bigint FROM refunds
WHERE payment_id = @payment_id AND sent_at IS NOT NULL AND status IN ('PENDING', 'PROCESSING');

-- name: SharingPaymentForUpdate :one
SELECT * FROM payments WHERE id = @id FOR UPDATE;

-- name: SharingDueByDeadline :many
-- Paid payments frozen for sharing that nobody completed in time (no
-- share yet): the deadline's shares.
SELECT p.id, p.order_id, p.out_trade_no, o.merchant_id
FROM payments p JOIN orders o ON o.id = p.order_id
WHERE p.profit_sharing AND p.status = 'SUCCESS' AND p.paid_at < @paid_before
  AND NOT EXISTS (SELECT 1 FROM profit_sharings s WHERE s.payment_id = p.id AND s.kind = 'share')
ORDER BY p.paid_at
LIMIT @max_rows;

-- name: SharingLastAttempt :one
-- The last attempt of a payment's share (refund_id NULL) or of a
-- refund's return.
SELECT coalesce(max(attempt), 0)::integer FROM profit_sharings
WHERE payment_id = @payment_id AND refund_id IS NOT DISTINCT FROM sqlc.narg(refund_id)::bigint;

-- name: SharingOpenShares :many
-- Shares not ended and not touched for a while: their jobs are queued
-- again (a unique job is not queued twice).
SELECT out_no FROM profit_sharings
WHERE kind = 'share' AND status IN ('PENDING', 'PROCESSING') AND updated_at < @idle_since
ORDER BY id LIMIT @max_rows;

-- name: SharingRefundsInFlight :one
-- Other refunds of a payment not ended that a refund after its share
-- waits for: those asked for before it, and any sent. Each then
-- computes its return on the refunds before it, all ended and posted
-- (a return done for an earlier refund not yet posted would otherwise
-- be counted against this one).
SELECT count(*)::bigint FROM refunds
WHERE payment_id = @payment_id AND id <> @refund_id AND status IN ('PENDING', 'PROCESSING')
  AND (id < @refund_id OR sent_at IS NOT NULL);

-- name: SharingCommissionOfSale :one
-- The commission a payment's sale charged, and what refunds took back
-- of the payment so far (the ledger's figures, on which a refund's part
-- of the commission is computed).
SELECT coalesce((SELECT sum(e.amount_fen) FROM ledger_entries e WHERE e.journal = 'pay:' || p.id AND e.account = 'merchant_commission'), 0)::bigint AS commission_fen,
       coalesce((SELECT -sum(e.amount_fen) FROM ledger_entries e WHERE e.payment_id = p.id AND e.kind = 'refund'
                 AND e.account IN ('wechat_clearing', 'refunds_outside', 'merchant_settled')), 0)::bigint AS refunded_fen,
       p.amount_fen
FROM payments p WHERE p.id = @payment_id;
