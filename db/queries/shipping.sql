-- name: ShippingUploadQueue :execrows
-- The upload an order owes WeChat, written by the transaction that
-- dispatches or hands it over; once per order, however often that runs.
INSERT INTO shipping_uploads (order_id, logistics_type) VALUES (@order_id, @logistics_type)
ON CONFLICT (order_id) DO NOTHING;

-- name: ShippingUploadSubject :one
-- What an upload says of its order: the paid payment (its key at WeChat),
-- who paid, and what was bought.
SELECT s.order_id, s.logistics_type, s.status, s.tries, coalesce(p.mchid, '')::text AS mchid,
       coalesce(p.out_trade_no, '')::text AS out_trade_no, coalesce(p.transaction_id, '')::text AS transaction_id,
       u.openid, m.name AS merchant_name,
       (SELECT string_agg(i.name || '×' || i.qty, ', ' ORDER BY i.line) FROM order_items i WHERE i.order_id = s.order_id)::text AS items
FROM shipping_uploads s
JOIN orders o ON o.id = s.order_id
JOIN users u ON u.id = o.user_id
JOIN merchants m ON m.id = o.merchant_id
LEFT JOIN LATERAL (
    SELECT p.mchid, p.out_trade_no, p.transaction_id FROM payments p
    WHERE p.order_id = s.order_id AND p.status = 'SUCCESS' ORDER BY p.paid_at, p.id LIMIT 1
) p ON true
WHERE s.order_id = @order_id;

-- name: ShippingUploadLease :execrows
-- A try takes the pending upload until @until, unless another holds it.
UPDATE shipping_uploads SET leased_until = @until::timestamptz
WHERE order_id = @order_id AND status = 'pending' AND (leased_until IS NULL OR leased_until <= @now::timestamptz);

-- name: ShippingUploadTried :exec
-- A try that did not settle it: counted, with what went wrong.
UPDATE shipping_uploads SET tries = tries + 1, last_error = @last_error, errcode = sqlc.narg(errcode), leased_until = NULL, updated_at = now()
WHERE order_id = @order_id AND status = 'pending';

-- name: ShippingUploadSettle :execrows
-- How it ended: uploaded (WeChat took it, or says the payment was
-- shipped), refused (WeChat will never take it), failed (out of tries)
-- or skipped (no WeChat payment to tell of).
UPDATE shipping_uploads
SET status = @status, tries = tries + @tried::integer, errcode = sqlc.narg(errcode), last_error = @last_error,
    uploaded_at = CASE WHEN @status = 'uploaded' THEN now() END, leased_until = NULL, updated_at = now()
WHERE order_id = @order_id AND status = 'pending';

-- name: ShippingUploadList :many
-- The uploads of a status, oldest first.
SELECT s.*, o.merchant_id FROM shipping_uploads s JOIN orders o ON o.id = s.order_id
WHERE s.status = @status AND (sqlc.narg(merchant_id)::bigint IS NULL OR o.merchant_id = sqlc.narg(merchant_id))
ORDER BY s.created_at, s.order_id
LIMIT @max_rows;

-- name: ShippingUploadRetry :one
-- An operator's retry of an upload that failed or was refused: pending
-- again. Its tries are kept: a try that failed may have been taken, so
-- the next asks WeChat before uploading.
UPDATE shipping_uploads SET status = 'pending', errcode = NULL, last_error = '', leased_until = NULL, updated_at = now()
WHERE order_id = @order_id AND status IN ('failed', 'refused')
RETURNING *;
