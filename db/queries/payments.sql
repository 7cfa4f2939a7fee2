-- name: PaymentInsert :one
INSERT INTO payments (order_id, channel, mchid, appid, out_trade_no, amount_fen, currency, sub_mchid, sub_appid, profit_sharing)
VALUES (@order_id, @channel, @mchid, @appid, @out_trade_no, @amount_fen, @currency, sqlc.narg(sub_mchid), sqlc.narg(sub_appid), @profit_sharing)
ON CONFLICT (channel, mchid, out_trade_no) DO UPDATE SET updated_at = payments.updated_at
RETURNING *;

-- name: PaymentSetPrepay :one
-- Records the prepay of an attempt still open; no row when it was paid or
-- closed meanwhile.
UPDATE payments SET prepay_id = @prepay_id, prepay_expires_at = @prepay_expires_at, updated_at = now()
WHERE id = @id AND status = 'CREATED'
RETURNING *;

-- name: PaymentGetByOutTradeNo :one
SELECT * FROM payments WHERE channel = @channel AND mchid = @mchid AND out_trade_no = @out_trade_no;

-- name: PaymentGetByOutTradeNoForUpdate :one
SELECT * FROM payments WHERE channel = @channel AND mchid = @mchid AND out_trade_no = @out_trade_no FOR UPDATE;

-- name: PaymentSettle :one
-- A successful payment and its order's transition in one statement and
-- one round trip (db/functions/payment_settle.sql): applied, duplicate or
-- transaction.
SELECT payment_settle(
    sqlc.arg(channel)::text, sqlc.arg(mchid)::text, sqlc.arg(out_trade_no)::text, sqlc.arg(appid)::text, sqlc.arg(sub_mchid)::text,
    sqlc.arg(amount_fen)::bigint, sqlc.arg(currency)::text, sqlc.arg(notification_id)::text,
    sqlc.arg(transaction_id)::text, sqlc.arg(paid_at)::timestamptz,
    sqlc.arg(from_status)::text, sqlc.arg(to_status)::text, sqlc.arg(updated_at)::timestamptz,
    sqlc.arg(actor)::text, sqlc.arg(reason)::text, sqlc.narg(event_type)::text
)::text AS outcome;

-- name: PaymentSettleGrouped :batchone
-- PaymentSettle for payments committed together, one statement each in
-- one pipeline (db/functions/payment_settle_grouped.sql): its outcomes, or moved (nothing written).
SELECT payment_settle_grouped(
    sqlc.arg(channel)::text, sqlc.arg(mchid)::text, sqlc.arg(out_trade_no)::text, sqlc.arg(appid)::text, sqlc.arg(sub_mchid)::text,
    sqlc.arg(amount_fen)::bigint, sqlc.arg(currency)::text, sqlc.arg(notification_id)::text,
    sqlc.arg(transaction_id)::text, sqlc.arg(paid_at)::timestamptz,
    sqlc.arg(from_status)::text, sqlc.arg(to_status)::text, sqlc.arg(updated_at)::timestamptz,
    sqlc.arg(actor)::text, sqlc.arg(reason)::text, sqlc.narg(event_type)::text
)::text AS outcome;

-- name: PaymentsByOrder :many
SELECT * FROM payments WHERE order_id = @order_id ORDER BY id;

-- name: PaymentMarkRefunded :exec
UPDATE payments SET status = 'REFUNDED', updated_at = now() WHERE id = @id;

-- name: NotificationInsert :one
-- ON CONFLICT DO NOTHING on both unique keys: a duplicate notification is
-- recognised by its id or by (transaction, event), and changes nothing.
INSERT INTO payment_notifications (channel, notification_id, transaction_id, event_type, order_id, outcome)
VALUES (@channel, @notification_id, @transaction_id, @event_type, @order_id, @outcome)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: AnomalyInsert :exec
INSERT INTO payment_anomalies (channel, notification_id, out_trade_no, kind, detail, payload)
VALUES (@channel, @notification_id, @out_trade_no, @kind, @detail, @payload)
ON CONFLICT DO NOTHING;

-- name: RefundInsert :one
INSERT INTO refunds (payment_id, order_id, out_refund_no, amount_fen, reason, transaction_id)
VALUES (@payment_id, @order_id, @out_refund_no, @amount_fen, @reason, sqlc.narg('transaction_id'))
ON CONFLICT (out_refund_no) DO NOTHING
RETURNING *;

-- name: RefundGetByOutRefundNo :one
SELECT * FROM refunds WHERE out_refund_no = @out_refund_no;

-- name: RefundSetStatus :one
UPDATE refunds SET status = @status, refund_id = coalesce(sqlc.narg('refund_id'), refund_id), updated_at = now()
WHERE out_refund_no = @out_refund_no AND status NOT IN ('SUCCESS', 'RETRIED', 'SETTLED')
RETURNING *;

-- name: PaymentsToReconcile :many
-- Takes prepaid payments of orders still waiting for payment, old enough
-- that their callback is late, least recently checked first, and stamps
-- them checked; rows another sweep or a callback holds are skipped.
WITH due AS (
    SELECT p.id FROM payments p JOIN orders o ON o.id = p.order_id
    WHERE p.status = 'CREATED' AND p.prepay_id IS NOT NULL AND o.status = 'PENDING_PAYMENT'
      AND p.created_at <= @older_than
    ORDER BY p.checked_at NULLS FIRST, p.id
    LIMIT @max_rows
    FOR UPDATE OF p SKIP LOCKED
)
UPDATE payments p SET checked_at = now() FROM due WHERE p.id = due.id
RETURNING p.*;

-- name: PaymentMarkClosed :exec
UPDATE payments SET status = 'CLOSED', updated_at = now() WHERE id = @id AND status = 'CREATED';

-- name: PaymentGetByID :one
SELECT * FROM payments WHERE id = @id;

-- name: RefundsToReconcile :many
-- Takes refunds the platform accepted whose result notification is late,
-- least recently checked first, and stamps them checked; rows another
-- sweep or a notification holds are skipped.
WITH due AS (
    SELECT f.id FROM refunds f
    WHERE f.status = 'PROCESSING' AND f.updated_at <= @older_than
    ORDER BY f.checked_at NULLS FIRST, f.id
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
)
UPDATE refunds r SET checked_at = now() FROM due WHERE r.id = due.id
RETURNING r.*;

-- name: PaymentRecordSuccess :one
-- Records a SUCCESS notification and marks its payment paid, in one
-- statement. recorded is false for a duplicate notification (by id, or by
-- transaction and event), which then changes nothing; paid is false when
-- the payment was already SUCCESS (the query got there first).
WITH n AS (
    INSERT INTO payment_notifications (channel, notification_id, transaction_id, event_type, order_id, outcome)
    VALUES (@channel, @notification_id, @transaction_id, 'TRANSACTION.SUCCESS', @order_id, 'SUCCESS')
    ON CONFLICT DO NOTHING
    RETURNING id
), p AS (
    UPDATE payments pm SET status = 'SUCCESS', transaction_id = @transaction_id, paid_at = @paid_at, updated_at = now()
    WHERE pm.id = @payment_id AND pm.status IN ('CREATED', 'CLOSED') AND EXISTS (SELECT 1 FROM n)
    RETURNING pm.id
)
SELECT EXISTS (SELECT 1 FROM n) AS recorded, EXISTS (SELECT 1 FROM p) AS paid;

-- name: RefundsByStatus :many
-- Refunds in a status, oldest first, after the id @after_id (a page).
SELECT * FROM refunds WHERE status = @status AND id > @after_id ORDER BY id LIMIT @max_rows;

-- name: RefundsNeedingAttention :one
SELECT count(*) FROM refunds WHERE status = 'FAILED';

-- name: RefundGetForUpdate :one
SELECT * FROM refunds WHERE out_refund_no = @out_refund_no FOR UPDATE;

-- name: RefundClose :one
-- Ends a FAILED refund by hand: RETRIED (a new refund replaces it) or
-- SETTLED (the money went back outside WeChat), with the operator's note.
UPDATE refunds SET status = @status, note = @note, updated_at = now()
WHERE out_refund_no = @out_refund_no AND status = 'FAILED'
RETURNING *;

-- name: RefundsOfPayment :one
SELECT count(*) FROM refunds WHERE payment_id = @payment_id;

-- name: RefundedOfPayment :one
-- What the payment has given back or owes back: every refund of the
-- order's own payment (not of an unexpected transaction) but those a
-- retry replaced.
SELECT coalesce(sum(amount_fen), 0)::bigint AS refunded_fen, count(*)::integer AS refunds FROM refunds
WHERE payment_id = @payment_id AND transaction_id IS NULL AND status <> 'RETRIED';

-- name: RefundedOfPaymentFinal :one
-- What the payment has given back for good: refunds that succeeded, or
-- that an operator settled outside WeChat.
SELECT coalesce(sum(amount_fen), 0)::bigint FROM refunds
WHERE payment_id = @payment_id AND transaction_id IS NULL AND status IN ('SUCCESS', 'SETTLED');

-- name: RefundInsertPartial :one
INSERT INTO refunds (payment_id, order_id, out_refund_no, amount_fen, reason, lines, restock, partial)
VALUES (@payment_id, @order_id, @out_refund_no, @amount_fen, @reason, @lines, @restock, true)
RETURNING *;

-- name: RefundInsertRetry :one
-- The retry of a FAILED refund: the same money of the same payment (its
-- lines and kind too), under a new out_refund_no.
INSERT INTO refunds (payment_id, order_id, out_refund_no, amount_fen, reason, transaction_id, lines, restock, partial)
SELECT old.payment_id, old.order_id, sqlc.arg(new_out_refund_no)::text, old.amount_fen, sqlc.arg(reason)::text, old.transaction_id, old.lines, old.restock, old.partial
FROM refunds old WHERE old.out_refund_no = @retry_of
RETURNING *;

-- name: RefundTurnLock :exec
-- Refunds of one payment take their turns under the payment's row.
SELECT id FROM payments WHERE id = @id FOR UPDATE;

-- name: RefundTurn :one
-- Whether an earlier refund of the same transaction still waits to be
-- sent, and when the last one of it was sent.
SELECT
    EXISTS (SELECT 1 FROM refunds f WHERE f.payment_id = @payment_id AND f.id < @id AND f.sent_at IS NULL
            AND f.status = 'PENDING' AND f.transaction_id IS NOT DISTINCT FROM sqlc.narg('transaction_id')::text) AS earlier_waiting,
    coalesce((SELECT max(f.sent_at) FROM refunds f WHERE f.payment_id = @payment_id AND f.id <> @id
            AND f.transaction_id IS NOT DISTINCT FROM sqlc.narg('transaction_id')::text), 'epoch')::timestamptz AS last_sent;

-- name: RefundMarkSent :exec
UPDATE refunds SET sent_at = @sent_at WHERE id = @id AND sent_at IS NULL;

-- name: RefundRecordError :exec
-- WeChat's refusal of a refund: kept for the operator; with @fail, the
-- refund needs one (FAILED).
UPDATE refunds SET last_error = @last_error, updated_at = now(),
    status = CASE WHEN @fail::boolean THEN 'FAILED' ELSE status END
WHERE id = @id AND status IN ('PENDING', 'PROCESSING');
