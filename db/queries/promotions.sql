-- name: PromotionCreate :one
INSERT INTO promotions (merchant_id, kind, name, tiers, new_customer_scope, funded_by, starts_on, ends_on,
                        daily_from, daily_until, stackable, budget_fen, created_by)
VALUES (@merchant_id, @kind, @name, @tiers, sqlc.narg(new_customer_scope), @funded_by, sqlc.narg(starts_on),
        sqlc.narg(ends_on), sqlc.narg(daily_from), sqlc.narg(daily_until), @stackable, sqlc.narg(budget_fen), @created_by)
RETURNING *;

-- name: PromotionBudgetAdd :exec
-- Adds to each of a promotion's budget shards (made when missing) its
-- fen: shard i gets fen[i+1].
INSERT INTO promotion_budget AS b (promotion_id, shard, remaining)
SELECT @promotion_id, (x.n - 1)::smallint, x.amount FROM unnest(@shard_fen::bigint[]) WITH ORDINALITY AS x(amount, n)
ON CONFLICT (promotion_id, shard) DO UPDATE SET remaining = b.remaining + excluded.remaining;

-- name: PromotionGet :one
SELECT sqlc.embed(p), (SELECT coalesce(sum(b.remaining), 0) FROM promotion_budget b WHERE b.promotion_id = p.id)::bigint AS budget_left
FROM promotions p WHERE p.id = @id;

-- name: PromotionsOf :many
-- A merchant's promotions, newest first.
SELECT sqlc.embed(p), (SELECT coalesce(sum(b.remaining), 0) FROM promotion_budget b WHERE b.promotion_id = p.id)::bigint AS budget_left
FROM promotions p WHERE p.merchant_id = @merchant_id
ORDER BY p.id DESC LIMIT 200;

-- name: PromotionsOnMenu :many
-- What the menu shows: a merchant's active promotions that may not have
-- ended (the caller drops those ended before the merchant's today), with
-- the budget they have left (0 without a budget).
SELECT sqlc.embed(p), (SELECT coalesce(sum(b.remaining), 0) FROM promotion_budget b WHERE b.promotion_id = p.id)::bigint AS budget_left
FROM promotions p
WHERE p.merchant_id = @merchant_id AND p.status = 'active' AND (p.ends_on IS NULL OR p.ends_on >= current_date - 2)
ORDER BY p.id;

-- name: PromotionUpdate :one
-- Only at the version the caller read. A NULL keeps a field; the clear_*
-- flags set the dates and daily window to none.
UPDATE promotions SET
    name        = coalesce(sqlc.narg(name), name),
    tiers       = coalesce(sqlc.narg(tiers), tiers),
    status      = coalesce(sqlc.narg(status), status),
    stackable   = coalesce(sqlc.narg(stackable), stackable),
    starts_on   = CASE WHEN @set_dates::boolean THEN sqlc.narg(starts_on) ELSE starts_on END,
    ends_on     = CASE WHEN @set_dates::boolean THEN sqlc.narg(ends_on) ELSE ends_on END,
    daily_from  = CASE WHEN @set_hours::boolean THEN sqlc.narg(daily_from) ELSE daily_from END,
    daily_until = CASE WHEN @set_hours::boolean THEN sqlc.narg(daily_until) ELSE daily_until END,
    budget_fen  = budget_fen + @add_budget_fen,
    version = version + 1, updated_at = now()
WHERE id = @id AND version = @version
RETURNING *;

-- name: MerchantQuoteChanged :exec
-- A change of what the merchant's orders cost that is not in the
-- merchant's row (its promotions): quotes made before it no longer take
-- stock.
UPDATE merchants SET quote_version = quote_version + 1 WHERE id = @id;

-- name: PromotionBudgetTakeWait :execrows
-- An order's part of a promotion's budget from the first shard, from a
-- shard of the caller's choosing on, that has it: waiting for a
-- placement that holds it (and passing on to the next when that one
-- left it short). No row: no one shard has the order's part.
WITH pick AS MATERIALIZED (
    SELECT shard FROM promotion_budget
    WHERE promotion_id = @promotion_id AND remaining >= @fen::bigint
    ORDER BY shard < @start::smallint, shard
    LIMIT 1
    FOR UPDATE
)
UPDATE promotion_budget b SET remaining = b.remaining - @fen::bigint
FROM pick
WHERE b.promotion_id = @promotion_id AND b.shard = pick.shard;

-- name: PromotionBudgetLock :many
-- Every shard of a promotion's budget, locked in shard order (waiting for
-- placements that hold one): the transaction path's take.
SELECT shard, remaining FROM promotion_budget WHERE promotion_id = @promotion_id ORDER BY shard FOR UPDATE;

-- name: PromotionBudgetTake :exec
UPDATE promotion_budget SET remaining = remaining - @fen WHERE promotion_id = @promotion_id AND shard = @shard;

-- name: PromotionBudgetRelease :exec
-- Gives back what an order got from promotions with a budget (the
-- order's promotions column), to one shard chosen by the order id.
WITH given AS (
    SELECT (p ->> 'promotion_id')::bigint AS promotion_id, (p ->> 'amount_fen')::bigint AS fen
    FROM orders o, jsonb_array_elements(o.promotions) p
    WHERE o.id = sqlc.arg(order_id)::bigint
)
UPDATE promotion_budget b SET remaining = b.remaining + g.fen
FROM given g
WHERE b.promotion_id = g.promotion_id
  -- greatest: a promotion without a budget has no shards (and no row
  -- to update), and the modulus must not be 0 for it.
  AND b.shard = (SELECT mod(sqlc.arg(order_id)::bigint, greatest(count(*), 1))::smallint
                 FROM promotion_budget s WHERE s.promotion_id = g.promotion_id);

-- name: NewCustomerLock :exec
-- The lock every claim of a customer's first order in a scope takes first
-- (db/functions/new_customer_lock_key.sql).
SELECT pg_advisory_xact_lock(new_customer_lock_key(@user_id, @scope));

-- name: NewCustomerClaim :execrows
INSERT INTO new_customer_claims (user_id, scope, order_id) VALUES (@user_id, @scope, @order_id)
ON CONFLICT DO NOTHING;

-- name: NewCustomerRelease :execrows
DELETE FROM new_customer_claims WHERE order_id = @order_id;

-- name: CustomerStanding :one
-- What a customer's first-order discounts depend on: an order paid at the
-- merchant (and anywhere), those placed before promotions existed
-- included, and a first-order claim held in each scope.
SELECT
    EXISTS (SELECT 1 FROM orders o JOIN payments p ON p.order_id = o.id
            WHERE o.user_id = @user_id AND o.merchant_id = @merchant_id::bigint AND p.paid_at IS NOT NULL)::boolean AS paid_at_merchant,
    EXISTS (SELECT 1 FROM new_customer_claims c WHERE c.user_id = @user_id AND c.scope = @merchant_id::bigint)::boolean AS claimed_at_merchant,
    EXISTS (SELECT 1 FROM orders o JOIN payments p ON p.order_id = o.id
            WHERE o.user_id = @user_id AND p.paid_at IS NOT NULL)::boolean AS paid_on_platform,
    EXISTS (SELECT 1 FROM new_customer_claims c WHERE c.user_id = @user_id AND c.scope = 0)::boolean AS claimed_on_platform;

-- name: PromotionBudgetTakeFree :execrows
-- An order's part of a promotion's budget from one shard that has it and
-- that no other transaction holds, starting at a shard of the caller's
-- choosing (as order_place takes it); no row when none is free.
WITH pick AS MATERIALIZED (
    SELECT shard FROM promotion_budget
    WHERE promotion_id = @promotion_id AND remaining >= @fen::bigint
    ORDER BY shard < @start::smallint, shard
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE promotion_budget b SET remaining = b.remaining - @fen::bigint
FROM pick
WHERE b.promotion_id = @promotion_id AND b.shard = pick.shard;
