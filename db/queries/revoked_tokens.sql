-- name: RevokedTokenInsert :exec
INSERT INTO revoked_tokens (token_id, kind, subject, expires_at, revoked_by)
VALUES (@token_id, @kind, @subject, @expires_at, @revoked_by)
ON CONFLICT (token_id) DO NOTHING;

-- name: RevokedTokensLive :many
-- The revocations that still matter: their token has not expired.
SELECT token_id FROM revoked_tokens WHERE expires_at > now();

-- name: RevokedTokensPrune :execrows
DELETE FROM revoked_tokens WHERE expires_at <= now() - interval '1 hour';
