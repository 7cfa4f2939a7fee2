-- name: AfterSaleInsert :one
INSERT INTO after_sales (order_id, merchant_id, user_id, lines, amount_fen, reason, photos, respond_by)
VALUES (@order_id, @merchant_id, @user_id, @lines, sqlc.narg('amount_fen'), @reason, @photos, @respond_by)
RETURNING *;

-- name: AfterSaleGet :one
SELECT * FROM after_sales WHERE id = @id;

-- name: AfterSaleGetForUpdate :one
SELECT * FROM after_sales WHERE id = @id FOR UPDATE;

-- name: AfterSalesByOrder :many
SELECT * FROM after_sales WHERE order_id = @order_id ORDER BY id;

-- name: AfterSalesList :many
-- Requests in a status, of one merchant or all, oldest first after a
-- cursor.
SELECT * FROM after_sales
WHERE status = @status AND (sqlc.narg('merchant_id')::bigint IS NULL OR merchant_id = sqlc.narg('merchant_id'))
  AND id > @after_id
ORDER BY id LIMIT @max_rows;

-- name: AfterSaleAgree :one
UPDATE after_sales SET status = 'agreed', refund_id = @refund_id, decided_by = @decided_by, decision_note = @decision_note,
    decided_at = now(), updated_at = now()
WHERE id = @id
RETURNING *;

-- name: AfterSaleReject :one
UPDATE after_sales SET status = @status, decided_by = @decided_by, decision_note = @decision_note, decided_at = now(), updated_at = now()
WHERE id = @id
RETURNING *;

-- name: AfterSaleEscalate :one
UPDATE after_sales SET status = 'escalated', escalation = @escalation, escalated_at = now(), updated_at = now()
WHERE id = @id
RETURNING *;

-- name: AfterSaleCompletedAt :one
-- When the order was completed (null if it was not).
SELECT max(created_at)::timestamptz FROM order_status_history WHERE order_id = @order_id AND to_status = 'COMPLETED';

-- name: AfterSaleRefund :one
SELECT * FROM refunds WHERE id = @id;
