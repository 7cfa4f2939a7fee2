-- name: OrderSubscriptionGrant :exec
INSERT INTO order_subscriptions (order_id, template_id) VALUES (@order_id, @template_id)
ON CONFLICT (order_id, template_id) DO NOTHING;

-- name: OrderSubscriptionsOf :many
SELECT template_id, used_for, outcome FROM order_subscriptions WHERE order_id = @order_id ORDER BY template_id;

-- name: OrderSubscriptionGranted :one
-- Whether a message for this status may go out: the template is granted
-- and not taken by another status.
SELECT EXISTS (SELECT 1 FROM order_subscriptions
    WHERE order_id = @order_id AND template_id = @template_id
      AND (used_for IS NULL OR used_for = @status::text)) AS granted;

-- name: OrderSubscriptionTake :one
-- The status's message takes the grant (again, on a retry of its own job).
UPDATE order_subscriptions SET used_for = @status::text
WHERE order_id = @order_id AND template_id = @template_id
  AND (used_for IS NULL OR used_for = @status::text)
RETURNING outcome;

-- name: OrderSubscriptionFinish :exec
UPDATE order_subscriptions SET outcome = @outcome, finished_at = now()
WHERE order_id = @order_id AND template_id = @template_id AND used_for = @status::text;

-- name: SubscribeMessageSubject :one
-- What a message says and to whom.
SELECT o.id, o.status, o.updated_at, o.fulfilment, u.openid, m.name AS merchant_name,
       -- What the order's accept deadline did, if it did anything: the
       -- message says so.
       CASE WHEN o.accept_deadline_applied THEN o.accept_then ELSE '' END::text AS accept_deadline_did
FROM orders o JOIN users u ON u.id = o.user_id JOIN merchants m ON m.id = o.merchant_id
WHERE o.id = @order_id;
