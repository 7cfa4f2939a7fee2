-- name: OrderEventInsert :exec
INSERT INTO order_events (event_id, merchant_id, order_id, type, body)
VALUES (@event_id, @merchant_id, @order_id, @type, @body);

-- name: OrderEventsAfter :many
-- Every merchant's events after a position, up to the oldest running
-- transaction: all of them are committed and none can appear before them.
SELECT xid, seq, merchant_id, event_id, type, body::text AS body FROM order_events
WHERE (xid, seq) > (@xid::bigint, @seq::bigint)
  AND xid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
ORDER BY xid, seq
LIMIT @max_rows;

-- name: OrderEventsOfMerchantAfter :many
SELECT xid, seq, merchant_id, event_id, type, body::text AS body FROM order_events
WHERE merchant_id = @merchant_id
  AND (xid, seq) > (@xid::bigint, @seq::bigint)
  AND xid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
ORDER BY xid, seq
LIMIT @max_rows;

-- name: OrderEventsLatest :one
-- The last position that is final: where a reader starts from "now".
SELECT coalesce(max(xid), 0)::bigint AS xid, coalesce(max(seq), 0)::bigint AS seq FROM (
    SELECT xid, seq FROM order_events
    WHERE xid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
    ORDER BY xid DESC, seq DESC LIMIT 1
) last;

-- name: OrderEventPosition :one
SELECT xid, seq FROM order_events WHERE event_id = @event_id AND merchant_id = @merchant_id;

-- name: OrderEventsPrune :execrows
-- The oldest events past retention, a bounded batch at a time (events
-- are written in seq order, roughly in time).
DELETE FROM order_events WHERE seq IN (
    SELECT e.seq FROM order_events e
    WHERE e.seq <= (SELECT min(f.seq) + 5000 FROM order_events f) AND e.created_at < @before
);
