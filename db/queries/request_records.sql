-- name: RequestRecordClaim :execrows
-- Claims (scope, key) for this transaction: a row means claimed. A
-- concurrent claim waits here until the first commits (then finds its
-- record) or rolls back (then claims it). An expired record is reclaimed.
INSERT INTO request_records (scope, key, fingerprint, status_code, expires_at)
VALUES (@scope, @key, @fingerprint, 0, @expires_at)
ON CONFLICT (scope, key) DO UPDATE
    SET fingerprint = excluded.fingerprint, status_code = 0, headers = '{}', body = '',
        created_at = now(), expires_at = excluded.expires_at
    WHERE request_records.expires_at <= now();

-- name: RequestRecordGet :one
SELECT * FROM request_records WHERE scope = @scope AND key = @key;

-- name: RequestRecordComplete :exec
UPDATE request_records SET status_code = @status_code, headers = @headers, body = @body
WHERE scope = @scope AND key = @key;

-- name: RequestRecordsPrune :execrows
DELETE FROM request_records r
WHERE r.ctid IN (SELECT i.ctid FROM request_records i WHERE i.expires_at <= @cutoff::timestamptz LIMIT @max_rows);
