-- name: ReconciliationLock :one
-- Takes the date's row (made when first run): runs of one date take turns.
INSERT INTO reconciliations (bill_date) VALUES (@bill_date)
ON CONFLICT (bill_date) DO UPDATE SET bill_date = excluded.bill_date
RETURNING *;

-- name: ReconciliationDone :one
UPDATE reconciliations SET status = 'done', attempts = attempts + 1, trade_hash = @trade_hash, fund_hash = @fund_hash,
    summary = @summary, error = '', finished_at = now()
WHERE bill_date = @bill_date
RETURNING *;

-- name: ReconciliationFailed :exec
INSERT INTO reconciliations (bill_date, status, attempts, error, finished_at) VALUES (@bill_date, 'failed', 1, @error, now())
ON CONFLICT (bill_date) DO UPDATE SET status = CASE WHEN reconciliations.status = 'done' THEN 'done' ELSE 'failed' END,
    attempts = reconciliations.attempts + 1, error = excluded.error, finished_at = now();

-- name: ReconciliationGet :one
SELECT * FROM reconciliations WHERE bill_date = @bill_date;

-- name: ReconciliationDoneSince :many
SELECT bill_date FROM reconciliations WHERE status = 'done' AND bill_date >= @since ORDER BY bill_date;

-- name: ReconciliationAnomaliesClear :exec
DELETE FROM reconciliation_anomalies WHERE bill_date = @bill_date;

-- name: ReconciliationAnomalyInsert :exec
INSERT INTO reconciliation_anomalies (bill_date, kind, ref, detail, bill_fen, ours_fen)
VALUES (@bill_date, @kind, @ref, @detail, sqlc.narg('bill_fen'), sqlc.narg('ours_fen'))
ON CONFLICT (bill_date, kind, ref) DO NOTHING;

-- name: ReconciliationAnomalies :many
SELECT * FROM reconciliation_anomalies WHERE bill_date = @bill_date ORDER BY kind, ref;

-- name: ReconciliationAnomalyCounts :many
-- Anomalies of the last runs (dates since @since), by kind.
SELECT kind, count(*) AS n FROM reconciliation_anomalies WHERE bill_date >= @since GROUP BY kind;

-- name: BillFirstPayment :one
SELECT min(paid_at)::timestamptz FROM payments WHERE paid_at IS NOT NULL;

-- name: BillPayments :many
-- Our payments the bill names, and those we have as paid on its day,
-- with what the ledger's sale (or receipt) put in WeChat clearing.
SELECT p.id, p.order_id, o.merchant_id, p.out_trade_no, p.amount_fen, p.status, p.transaction_id, p.paid_at,
    coalesce((SELECT sum(e.amount_fen) FROM ledger_entries e WHERE e.journal = 'pay:' || p.id AND e.account = 'wechat_clearing'), 0)::bigint AS ledger_fen
FROM payments p JOIN orders o ON o.id = p.order_id
WHERE p.out_trade_no = ANY(@out_trade_nos::text[])
   OR (p.paid_at >= @day_start AND p.paid_at < @day_end AND p.status IN ('SUCCESS', 'REFUNDED'));

-- name: BillRefunds :many
-- Our refunds the bill names, and those that succeeded on its day, with
-- what the ledger's refund took out of WeChat Pay: from clearing, and in
-- the service-provider mode from what was unfrozen to the merchant.
SELECT f.id, f.order_id, o.merchant_id, f.out_refund_no, f.amount_fen, f.status, f.transaction_id,
    coalesce((SELECT -sum(e.amount_fen) FROM ledger_entries e WHERE e.journal = 'refund:' || f.id
              AND e.account IN ('wechat_clearing', 'merchant_settled')), 0)::bigint AS ledger_fen
FROM refunds f JOIN orders o ON o.id = f.order_id
WHERE f.out_refund_no = ANY(@out_refund_nos::text[])
   OR (f.status = 'SUCCESS' AND f.updated_at >= @day_start AND f.updated_at < @day_end);

-- name: BillUnexpected :many
-- Transactions we did not expect (given back as refunds), by transaction id.
SELECT DISTINCT ON (f.transaction_id) f.transaction_id::text AS transaction_id, f.order_id, f.amount_fen
FROM refunds f WHERE f.transaction_id = ANY(@transaction_ids::text[])
ORDER BY f.transaction_id, f.id;

-- name: LedgerPostFee :exec
-- WeChat Pay's fee of a payment (or, negative, given back with a refund),
-- as the bill says: posted once per journal.
SELECT ledger_post(@journal::text, 'fee', @order_id::bigint, @merchant_id::bigint, sqlc.narg('payment_id')::bigint, sqlc.narg('refund_id')::bigint,
    @ref::text, ARRAY['wechat_fees', 'wechat_fees_withheld'], ARRAY[@fee_fen::bigint, 0 - @fee_fen::bigint]);

-- name: BillSharings :many
-- Our profit-sharing requests the profit-sharing bill names, and those
-- that succeeded on its day.
SELECT s.id, s.kind, s.out_no, s.amount_fen, s.unfrozen_fen, s.status
FROM profit_sharings s
WHERE s.out_no = ANY(@out_nos::text[])
   OR (s.status = 'SUCCESS' AND s.finished_at >= @day_start AND s.finished_at < @day_end);
