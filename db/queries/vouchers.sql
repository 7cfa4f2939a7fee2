-- name: VoucherTemplateCreate :one
INSERT INTO voucher_templates (merchant_id, name, amount_fen, threshold_fen, funded_by, claim_from, claim_until,
                               valid_days, budget, per_user_limit, created_by)
VALUES (@merchant_id, @name, @amount_fen, @threshold_fen, @funded_by, @claim_from, @claim_until,
        @valid_days, @budget, @per_user_limit, @created_by)
RETURNING *;

-- name: VoucherBudgetAdd :exec
-- Adds to each of a template's budget shards (made when missing) its
-- units: shard i gets units[i+1] (see voucher.spread).
INSERT INTO voucher_budget AS b (template_id, shard, remaining)
SELECT @template_id, (x.n - 1)::smallint, x.units FROM unnest(@units::int[]) WITH ORDINALITY AS x(units, n)
ON CONFLICT (template_id, shard) DO UPDATE SET remaining = b.remaining + excluded.remaining;

-- name: VoucherTemplateGet :one
SELECT sqlc.embed(t), (SELECT coalesce(sum(b.remaining), 0) FROM voucher_budget b WHERE b.template_id = t.id)::bigint AS remaining
FROM voucher_templates t WHERE t.id = @id;

-- name: VoucherTemplatesOf :many
-- A merchant's templates (NULL: the platform's), newest first.
SELECT sqlc.embed(t), (SELECT coalesce(sum(b.remaining), 0) FROM voucher_budget b WHERE b.template_id = t.id)::bigint AS remaining
FROM voucher_templates t WHERE t.merchant_id IS NOT DISTINCT FROM sqlc.narg(merchant_id)::bigint
ORDER BY t.id DESC LIMIT 200;

-- name: VoucherTemplatesClaimable :many
-- What a customer may claim now: the platform's templates and, with a
-- merchant, that merchant's; active, in their claim window, budget left.
SELECT sqlc.embed(t), r.remaining
FROM voucher_templates t
CROSS JOIN LATERAL (SELECT coalesce(sum(b.remaining), 0)::bigint AS remaining FROM voucher_budget b WHERE b.template_id = t.id) r
WHERE t.status = 'active' AND t.claim_from <= @now AND @now < t.claim_until AND r.remaining > 0
  AND (t.merchant_id IS NULL OR t.merchant_id = sqlc.narg(merchant_id)::bigint)
ORDER BY t.merchant_id NULLS LAST, t.id DESC LIMIT 100;

-- name: VoucherTemplateUpdate :one
-- Only at the version the caller read.
UPDATE voucher_templates SET
    name = coalesce(sqlc.narg(name), name),
    status = coalesce(sqlc.narg(status), status),
    claim_until = coalesce(sqlc.narg(claim_until), claim_until),
    budget = budget + @add_budget,
    version = version + 1, updated_at = now()
WHERE id = @id AND version = @version
RETURNING *;

-- name: VoucherClaimSlot :one
-- The customer's first free claim of the template, if any is left under
-- its per-user limit. A racing claim of the same slot waits for the
-- other's commit and then inserts nothing (the caller looks again).
INSERT INTO vouchers (template_id, user_id, claim_no, claimed_at, valid_until)
SELECT @template_id, @user_id, n, @now, @valid_until
FROM generate_series(1, @per_user_limit::int) AS n
WHERE NOT EXISTS (SELECT 1 FROM vouchers v WHERE v.template_id = @template_id AND v.user_id = @user_id AND v.claim_no = n)
ORDER BY n LIMIT 1
ON CONFLICT (template_id, user_id, claim_no) DO NOTHING
RETURNING *;

-- name: VoucherClaimsOf :one
-- How many of the template the customer holds.
SELECT count(*) FROM vouchers WHERE template_id = @template_id AND user_id = @user_id;

-- name: VoucherBudgetTakeFree :execrows
-- One unit of the template's budget from a shard with some that no other
-- transaction holds, starting at a shard of the caller's choosing. A
-- shard that had some when the statement began and none by the time it
-- was locked is skipped but stays locked: the caller runs this in a
-- savepoint and rolls it back when it took nothing.
--
-- The pick is a MATERIALIZED CTE so that it runs once: as a subquery
-- joined in FROM, a plan that scans the budget outside and runs the pick
-- inside runs it again for every row, and each run skips the rows this
-- statement has just updated and picks the next shard: one claim took
-- five units so on a freshly promoted primary (make soak-ha-quick).
WITH pick AS MATERIALIZED (
    SELECT shard FROM voucher_budget
    WHERE template_id = @template_id AND remaining > 0
    ORDER BY shard < @start::smallint, shard
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE voucher_budget b SET remaining = b.remaining - 1
FROM pick
WHERE b.template_id = @template_id AND b.shard = pick.shard;

-- name: VoucherBudgetTakeWaiting :execrows
-- One unit from a shard with some, waiting for it if another transaction
-- holds it: when every shard with budget is busy. Shards are locked in
-- ascending order (a shard found empty once its holder commits stays
-- locked until the statement's savepoint is rolled back), so two of these
-- never wait for each other. MATERIALIZED as in VoucherBudgetTakeFree.
WITH pick AS MATERIALIZED (
    SELECT shard FROM voucher_budget
    WHERE template_id = @template_id AND remaining > 0
    ORDER BY shard
    LIMIT 1
    FOR UPDATE
)
UPDATE voucher_budget b SET remaining = b.remaining - 1
FROM pick
WHERE b.template_id = @template_id AND b.shard = pick.shard AND b.remaining > 0;

-- name: VoucherBudgetLeft :one
SELECT EXISTS (SELECT 1 FROM voucher_budget WHERE template_id = @template_id AND remaining > 0);

-- name: VouchersOfUser :many
-- A customer's wallet, newest first, with what each voucher is and the
-- order that holds it, if any.
SELECT v.id, v.template_id, v.claimed_at, v.valid_until, v.order_id, v.used_at,
       t.merchant_id, t.name, t.amount_fen, t.threshold_fen, t.funded_by
FROM vouchers v JOIN voucher_templates t ON t.id = v.template_id
WHERE v.user_id = @user_id
ORDER BY v.id DESC LIMIT 200;

-- name: VoucherOfUser :one
-- One of a customer's vouchers, with what it is worth and where (confirm
-- prices a cart with it).
SELECT v.id, v.valid_until, v.order_id, t.merchant_id, t.name, t.amount_fen, t.threshold_fen, t.funded_by
FROM vouchers v JOIN voucher_templates t ON t.id = v.template_id
WHERE v.id = @id AND v.user_id = @user_id;

-- name: VoucherTake :one
-- Marks the customer's voucher held by the order, if it is unused and
-- valid at @now, waiting for a transaction that holds its row (the
-- transaction path of a placement; order_place takes it without
-- waiting). No row: it is used or expired (VoucherOfUser says which).
UPDATE vouchers SET order_id = @order_id::bigint, used_at = @now::timestamptz
WHERE id = @id AND user_id = @user_id AND order_id IS NULL AND valid_until > @now::timestamptz
RETURNING id;

-- name: VoucherRelease :execrows
-- Gives back the voucher the order holds, if it still holds one: a
-- cancelled order's, or a paid order's refunded whole before acceptance.
-- Its validity is unchanged: one that expired meanwhile goes back
-- expired.
UPDATE vouchers SET order_id = NULL, used_at = NULL WHERE order_id = @order_id::bigint;
