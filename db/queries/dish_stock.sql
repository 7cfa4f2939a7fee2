-- name: StockTakeFree :one
-- (Stock shards: see migration 00006. The statements that take stock
-- check the quote on the dish and merchant rows, reading them without a
-- lock, with quote_holds: db/functions/quote_holds.sql.)
-- Takes qty units from one shard that has them and that no other
-- transaction holds, looking from shard @start on (so that concurrent
-- orders spread over the shards). No row: no such shard right now.
--
-- The pick is a MATERIALIZED CTE so that it runs once, whatever the plan:
-- joined as a subquery, a plan that scanned the shards outside and ran the
-- pick inside would run it per row, each run skipping the rows this
-- statement had just updated, and take from several shards (as a voucher
-- claim once did: VoucherBudgetTakeFree).
WITH pick AS MATERIALIZED (
    SELECT ds.dish_id, ds.shard FROM dish_stock ds
    JOIN dishes d ON d.id = ds.dish_id
    JOIN merchants m ON m.id = d.merchant_id
    WHERE ds.dish_id = @dish_id AND ds.units >= @qty
      AND quote_holds(d, m, @merchant_id, @price_fen, @packaging_fee_fen, @options_version, @quote_version)
    ORDER BY ds.shard < sqlc.arg(start)::smallint, ds.shard
    LIMIT 1
    FOR UPDATE OF ds SKIP LOCKED
)
UPDATE dish_stock s SET units = s.units - @qty
FROM pick
WHERE s.dish_id = pick.dish_id AND s.shard = pick.shard
RETURNING s.shard;

-- name: StockShardsWith :many
-- The shards that had at least qty units at the statement's snapshot, if
-- the quote still holds; it locks nothing.
SELECT ds.shard FROM dish_stock ds
JOIN dishes d ON d.id = ds.dish_id
JOIN merchants m ON m.id = d.merchant_id
WHERE ds.dish_id = @dish_id AND ds.units >= @qty
  AND quote_holds(d, m, @merchant_id, @price_fen, @packaging_fee_fen, @options_version, @quote_version)
ORDER BY ds.shard;

-- name: StockTakeShard :one
-- Takes qty units from one given shard, waiting for its lock; no row if,
-- once it is free, the shard lacks them or the quote no longer holds.
UPDATE dish_stock s SET units = s.units - @qty
FROM dishes d, merchants m
WHERE s.dish_id = @dish_id AND s.shard = @shard AND s.units >= @qty
  AND d.id = s.dish_id AND m.id = d.merchant_id
  AND quote_holds(d, m, @merchant_id, @price_fen, @packaging_fee_fen, @options_version, @quote_version)
RETURNING s.shard;

-- name: StockLockShards :many
-- Locks every shard of a dish, in shard order, and returns their units.
SELECT shard, units FROM dish_stock WHERE dish_id = @dish_id ORDER BY shard FOR UPDATE;

-- name: StockQuoteHolds :one
SELECT EXISTS (
    SELECT 1 FROM dishes d JOIN merchants m ON m.id = d.merchant_id
    WHERE d.id = @dish_id
      AND quote_holds(d, m, @merchant_id, @price_fen, @packaging_fee_fen, @options_version, @quote_version)
);

-- name: StockTakeLocked :exec
-- Takes units from a shard this transaction has locked.
UPDATE dish_stock s SET units = s.units - @qty WHERE s.dish_id = @dish_id AND s.shard = @shard;

-- name: StockReturn :execrows
-- Returns qty units to one shard of the dish, the @pick-th modulo the
-- dish's shard count (shards are numbered from 0 without gaps). No row:
-- a restock dropped that shard while this waited for it.
UPDATE dish_stock s SET units = s.units + @qty
WHERE s.dish_id = @dish_id
  AND s.shard = sqlc.arg(pick)::integer % (SELECT count(*) FROM dish_stock c WHERE c.dish_id = @dish_id);

-- name: StockDeleteShardsFrom :exec
-- Drops the shards numbered @shards and up (their units are being reset).
DELETE FROM dish_stock WHERE dish_id = @dish_id AND shard >= sqlc.arg(shards)::smallint;

-- name: StockSpread :exec
-- Sets a dish's stock to @units spread evenly over shards 0..@shards-1.
INSERT INTO dish_stock (dish_id, shard, units)
SELECT @dish_id, g::smallint, (sqlc.arg(units)::integer / sqlc.arg(shards)::integer + (g < sqlc.arg(units)::integer % sqlc.arg(shards)::integer)::integer)
FROM generate_series(0, sqlc.arg(shards)::integer - 1) AS g
ON CONFLICT (dish_id, shard) DO UPDATE SET units = excluded.units;

-- name: StockSavepoint :exec
-- Marks where a try at taking stock begins (see inventory.take).
SAVEPOINT stock_take;

-- name: StockRollbackToSavepoint :exec
-- Undoes a try that took nothing, with any row lock it took in passing.
ROLLBACK TO SAVEPOINT stock_take;

-- name: StockReturnFirst :exec
-- Returns qty units to shard 0, which always exists: the fallback when the
-- shard StockReturn picked was dropped by a restock meanwhile.
UPDATE dish_stock SET units = units + @qty WHERE dish_id = @dish_id AND shard = 0;

-- name: DishLockForRestock :one
-- Serialises restocks of one dish. NO KEY UPDATE: orders that insert
-- reservations (a foreign-key share lock) are not blocked by it.
SELECT merchant_id FROM dishes WHERE id = @id FOR NO KEY UPDATE;

-- name: StockHeld :one
-- The units of a dish that open orders hold: reserved, neither released
-- nor consumed.
SELECT coalesce(sum(qty), 0)::integer FROM stock_reservations
WHERE dish_id = @dish_id AND released_at IS NULL AND consumed_at IS NULL;

-- name: StockAdjustmentInsert :exec
INSERT INTO stock_adjustments (dish_id, kind, delta, on_hand_after, actor)
VALUES (@dish_id, @kind, @delta, @on_hand_after, @actor);
