-- name: OrderInsert :one
-- ON CONFLICT DO NOTHING with every unique index as arbiter: a duplicate
-- returns no row, and the caller reads the order that was placed. Naming
-- only (user, intent digest) is not enough: two submits of one token carry
-- one order id too, and the loser of that race would fail on orders_pkey
-- (a non-arbiter index raises instead of doing nothing). A pickup order is
-- inserted without its number: the placement gives it one last
-- (PickupNumberAssign).
INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
                    items_total_fen, packaging_fee_fen, delivery_fee_fen, total_fen, address, remark, pay_deadline, created_at, updated_at,
                    voucher_id, discount_fen, platform_discount_fen, merchant_discount_fen, promotions,
                    fulfilment, pickup_day, slot_start, slot_end)
VALUES (@id, @user_id, @merchant_id, @intent_digest, @content_digest, @intent_seq, @digest_alg, 'PENDING_PAYMENT',
        @items_total_fen, @packaging_fee_fen, @delivery_fee_fen, @total_fen, @address, @remark, @pay_deadline, @created_at, @created_at,
        sqlc.narg(voucher_id), @discount_fen, @platform_discount_fen, @merchant_discount_fen, coalesce(sqlc.narg(promotions)::jsonb, '[]'),
        @fulfilment, sqlc.narg(pickup_day), sqlc.narg(slot_start), sqlc.narg(slot_end))
ON CONFLICT DO NOTHING
RETURNING *;

-- name: OrderGetByUserDigest :one
SELECT * FROM orders WHERE user_id = @user_id AND intent_digest = @intent_digest;

-- name: OrderGetByID :one
SELECT * FROM orders WHERE id = @id;

-- name: OrdersLatestByContent :many
-- The user's latest order of each content, for the intent sequence: a
-- confirm asks of the cart priced with each choice of discounts it may
-- have got, in one round trip.
SELECT DISTINCT ON (content_digest) content_digest, id, intent_seq, status, created_at FROM orders
WHERE user_id = @user_id AND content_digest = ANY(@content_digests::bytea[])
ORDER BY content_digest, intent_seq DESC;

-- name: OrderListByUser :many
-- Newest first; ids grow with time, so the cursor is the last id seen.
SELECT * FROM orders
WHERE user_id = @user_id AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id'))
ORDER BY id DESC
LIMIT @max_rows;

-- name: OrderItemInsert :exec
INSERT INTO order_items (order_id, line, dish_id, name, qty, unit_price_fen, line_total_fen, options, packaging_fee_fen, discount_fen)
VALUES (@order_id, @line, @dish_id, @name, @qty, @unit_price_fen, @line_total_fen, @options, @packaging_fee_fen, @discount_fen);

-- name: OrderItemsByOrder :many
SELECT * FROM order_items WHERE order_id = @order_id ORDER BY line;

-- name: OrderItemsByOrders :many
SELECT * FROM order_items WHERE order_id = ANY(@order_ids::bigint[]) ORDER BY order_id, line;

-- name: OrderHistoryInsert :exec
INSERT INTO order_status_history (order_id, from_status, to_status, version, actor, reason)
VALUES (@order_id, sqlc.narg('from_status'), @to_status, @version, @actor, @reason);

-- name: OrderTransition :one
-- Compare-and-set: only from the status and version the caller read.
-- @start_accept_deadline (the state table's start_accept_deadline, on
-- payment) writes the order's accept deadline from its merchant's rule
-- as it is now; @accept_deadline_applied (the deadline's own events)
-- records that the system moved the order on at it.
UPDATE orders SET status = @to_status, version = version + 1, updated_at = now(),
    accept_by = CASE WHEN @start_accept_deadline::boolean
        THEN (SELECT CASE WHEN m.accept_within_seconds > 0 THEN now() + make_interval(secs => m.accept_within_seconds) END
              FROM merchants m WHERE m.id = orders.merchant_id)
        ELSE accept_by END,
    accept_then = CASE WHEN @start_accept_deadline::boolean
        THEN (SELECT CASE WHEN m.accept_within_seconds > 0 THEN m.accept_timeout_action END
              FROM merchants m WHERE m.id = orders.merchant_id)
        ELSE accept_then END,
    accept_deadline_applied = accept_deadline_applied OR @accept_deadline_applied::boolean
WHERE orders.id = @id AND orders.status = @from_status AND orders.version = @version
RETURNING *;

-- name: OrderSearch :many
-- Admin search, newest first; every filter is optional.
SELECT * FROM orders
WHERE (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (sqlc.narg('merchant_id')::bigint IS NULL OR merchant_id = sqlc.narg('merchant_id'))
  AND (sqlc.narg('user_id')::bigint IS NULL OR user_id = sqlc.narg('user_id'))
  AND (sqlc.narg('created_from')::timestamptz IS NULL OR created_at >= sqlc.narg('created_from'))
  AND (sqlc.narg('created_to')::timestamptz IS NULL OR created_at < sqlc.narg('created_to'))
  AND (sqlc.narg('before_id')::bigint IS NULL OR id < sqlc.narg('before_id'))
ORDER BY id DESC
LIMIT @max_rows;

-- name: OrderHistoryByOrder :many
SELECT * FROM order_status_history WHERE order_id = @order_id ORDER BY version;

-- name: OrderStatusForShare :one
-- Reads an order's status and holds it: a transition of the order waits
-- until this transaction ends (see payment.Service.Pay).
SELECT status FROM orders WHERE id = @id FOR SHARE;

-- name: OrderUrge :one
-- An urge of the user's order in one of @statuses, if the last was at or
-- before @not_after (or there was none): concurrent urges make one.
UPDATE orders SET urged_at = @now, urge_count = urge_count + 1
WHERE id = @id AND user_id = @user_id AND status = ANY(@statuses::text[])
  AND (urged_at IS NULL OR urged_at <= @not_after)
RETURNING *;

-- name: OrderGetForUpdate :one
-- The order, locked: refund requests of one order take turns.
SELECT * FROM orders WHERE id = @id FOR UPDATE;

-- name: OrderItemRefund :one
-- Marks qty more units of a line refunded (and restocked, when they go
-- back on sale); no row when the line has fewer units left to refund.
UPDATE order_items SET refunded_qty = refunded_qty + @qty,
    restocked_qty = restocked_qty + CASE WHEN @restock::boolean THEN @qty ELSE 0 END
WHERE order_id = @order_id AND line = @line AND refunded_qty + @qty <= qty
RETURNING *;

-- name: OrderLockForRefund :one
SELECT id FROM orders WHERE id = @id FOR UPDATE;

-- name: OrderPlace :one
-- A new order and everything that goes with it in one statement (see
-- db/functions/order_place.sql): true when placed, false when the order
-- exists.
SELECT order_place(
    sqlc.arg(id)::bigint, sqlc.arg(user_id)::bigint, sqlc.arg(merchant_id)::bigint, sqlc.arg(intent_digest)::bytea,
    sqlc.arg(content_digest)::bytea, sqlc.arg(intent_seq)::integer, sqlc.arg(digest_alg)::text,
    sqlc.arg(items_total_fen)::bigint, sqlc.arg(packaging_fee_fen)::bigint, sqlc.arg(delivery_fee_fen)::bigint,
    sqlc.arg(total_fen)::bigint, sqlc.arg(address)::jsonb, sqlc.arg(remark)::text,
    sqlc.arg(pay_deadline)::timestamptz, sqlc.arg(created_at)::timestamptz,
    sqlc.narg(voucher_id)::bigint, sqlc.arg(discount_fen)::bigint, sqlc.arg(platform_discount_fen)::bigint,
    sqlc.arg(merchant_discount_fen)::bigint,
    sqlc.arg(item_dish_ids)::bigint[], sqlc.arg(item_names)::text[], sqlc.arg(item_qtys)::integer[],
    sqlc.arg(item_unit_prices_fen)::bigint[], sqlc.arg(item_options)::jsonb[], sqlc.arg(item_packaging_fees_fen)::bigint[],
    sqlc.arg(item_discounts_fen)::bigint[],
    sqlc.arg(stock_dish_ids)::bigint[], sqlc.arg(stock_qtys)::integer[], sqlc.arg(stock_prices_fen)::bigint[],
    sqlc.arg(stock_packaging_fees_fen)::bigint[], sqlc.arg(stock_options_versions)::bigint[],
    sqlc.arg(stock_start_shards)::smallint[], sqlc.arg(quote_version)::bigint,
    sqlc.arg(actor)::text,
    sqlc.arg(record_key)::text, sqlc.arg(record_fingerprint)::bytea, sqlc.arg(record_digest_alg)::text,
    sqlc.arg(record_status_code)::integer, sqlc.arg(record_headers)::jsonb, sqlc.arg(record_body)::bytea,
    sqlc.arg(record_expires_at)::timestamptz,
    sqlc.arg(promotions)::jsonb, sqlc.arg(budget_promotion_ids)::bigint[], sqlc.arg(budget_amounts_fen)::bigint[],
    sqlc.narg(new_customer_scope)::bigint
)::boolean AS placed;

-- name: OrderPlaceGrouped :batchone
-- OrderPlace for orders committed together, one statement each in one
-- pipeline (db/functions/order_place_grouped.sql): 1 placed, 0 the order exists, -1 a line
-- needs the statement-by-statement take; in the last two nothing was written.
SELECT order_place_grouped(
    sqlc.arg(id)::bigint, sqlc.arg(user_id)::bigint, sqlc.arg(merchant_id)::bigint, sqlc.arg(intent_digest)::bytea,
    sqlc.arg(content_digest)::bytea, sqlc.arg(intent_seq)::integer, sqlc.arg(digest_alg)::text,
    sqlc.arg(items_total_fen)::bigint, sqlc.arg(packaging_fee_fen)::bigint, sqlc.arg(delivery_fee_fen)::bigint,
    sqlc.arg(total_fen)::bigint, sqlc.arg(address)::jsonb, sqlc.arg(remark)::text,
    sqlc.arg(pay_deadline)::timestamptz, sqlc.arg(created_at)::timestamptz,
    sqlc.narg(voucher_id)::bigint, sqlc.arg(discount_fen)::bigint, sqlc.arg(platform_discount_fen)::bigint,
    sqlc.arg(merchant_discount_fen)::bigint,
    sqlc.arg(item_dish_ids)::bigint[], sqlc.arg(item_names)::text[], sqlc.arg(item_qtys)::integer[],
    sqlc.arg(item_unit_prices_fen)::bigint[], sqlc.arg(item_options)::jsonb[], sqlc.arg(item_packaging_fees_fen)::bigint[],
    sqlc.arg(item_discounts_fen)::bigint[],
    sqlc.arg(stock_dish_ids)::bigint[], sqlc.arg(stock_qtys)::integer[], sqlc.arg(stock_prices_fen)::bigint[],
    sqlc.arg(stock_packaging_fees_fen)::bigint[], sqlc.arg(stock_options_versions)::bigint[],
    sqlc.arg(stock_start_shards)::smallint[], sqlc.arg(quote_version)::bigint,
    sqlc.arg(actor)::text,
    sqlc.arg(record_key)::text, sqlc.arg(record_fingerprint)::bytea, sqlc.arg(record_digest_alg)::text,
    sqlc.arg(record_status_code)::integer, sqlc.arg(record_headers)::jsonb, sqlc.arg(record_body)::bytea,
    sqlc.arg(record_expires_at)::timestamptz,
    sqlc.arg(promotions)::jsonb, sqlc.arg(budget_promotion_ids)::bigint[], sqlc.arg(budget_amounts_fen)::bigint[],
    sqlc.narg(new_customer_scope)::bigint
)::smallint AS outcome;

-- name: AcceptDeadlinesDue :many
-- The accept deadlines due at @up_to, the most overdue first, with their
-- orders as they are now.
SELECT d.order_id, d.accept_by, o.status, coalesce(o.accept_then, '')::text AS accept_then
FROM order_accept_deadlines d JOIN orders o ON o.id = d.order_id
WHERE d.accept_by <= @up_to
ORDER BY d.accept_by
LIMIT @max_rows;

-- name: AcceptDeadlineInsert :exec
-- The due row of a paid order's accept deadline, in the transaction that
-- made it PAID.
INSERT INTO order_accept_deadlines (order_id, accept_by) VALUES (@order_id, @accept_by);

-- name: AcceptDeadlinesDelete :exec
-- Deadlines the sweep dealt with (applied, or their order moved on): a
-- range of the key over the rows due at @up_to.
DELETE FROM order_accept_deadlines
WHERE accept_by <= @up_to AND order_id = ANY(@order_ids::bigint[]);

-- name: OrdersOverdueWithoutTimeout :many
-- Orders still waiting for payment whose deadline came due in
-- [@since, @up_to] and that have no payment-timeout job yet (queued by
-- the sweep, or by a placement before migration 00022), oldest deadline
-- first.
SELECT o.id, o.pay_deadline FROM orders o
WHERE o.pay_deadline >= @since AND o.pay_deadline <= @up_to
  AND o.status = 'PENDING_PAYMENT'
  AND NOT EXISTS (SELECT 1 FROM river_job j
                  WHERE j.kind = 'order.payment_timeout' AND j.args @> jsonb_build_object('order_id', o.id::text))
ORDER BY o.pay_deadline
LIMIT @max_rows;

-- name: OrderTimeoutSweptTo :one
-- Every order due before this has its payment-timeout job.
SELECT swept_to FROM order_timeout_sweep;

-- name: OrderTimeoutSweptToAdvance :exec
UPDATE order_timeout_sweep SET swept_to = greatest(swept_to, @swept_to);
