-- name: IdempotencyRecordInsert :exec
-- A unique violation (idempotency_records_user_key_key) means a concurrent
-- request with the same key committed first; the caller rolls back and
-- replays that one. No ON CONFLICT, so the insert can be pipelined.
INSERT INTO idempotency_records (user_id, key, fingerprint, digest_alg, order_id, status_code, headers, body, expires_at)
VALUES (@user_id, @key, @fingerprint, @digest_alg, @order_id, @status_code, @headers, @body, @expires_at);

-- name: IdempotencyRecordGet :one
SELECT * FROM idempotency_records WHERE user_id = @user_id AND key = @key AND expires_at > now();

-- name: IdempotencyRecordDelete :execrows
DELETE FROM idempotency_records WHERE user_id = @user_id AND key = @key;

-- name: IdempotencyRecordsPrune :execrows
-- Deletes up to max_rows expired records (in batches, to keep locks short).
DELETE FROM idempotency_records r
WHERE r.ctid IN (SELECT i.ctid FROM idempotency_records i WHERE i.expires_at <= @cutoff::timestamptz LIMIT @max_rows);
