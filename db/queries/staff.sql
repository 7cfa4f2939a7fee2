-- name: StaffAccountCreate :one
INSERT INTO staff_accounts (merchant_id, username, password_hash, created_by)
VALUES (@merchant_id, @username, @password_hash, @created_by)
RETURNING id, merchant_id, username, created_by, created_at, disabled_at;

-- name: StaffAccountsOfMerchant :many
SELECT id, merchant_id, username, created_by, created_at, disabled_at
FROM staff_accounts WHERE merchant_id = @merchant_id ORDER BY id;

-- name: StaffAccountByUsername :one
SELECT * FROM staff_accounts WHERE username = @username;

-- name: StaffAccountDisable :one
-- Disabling twice keeps the first time.
UPDATE staff_accounts SET disabled_at = coalesce(disabled_at, now())
WHERE id = @id
RETURNING id, merchant_id, username, created_by, created_at, disabled_at;

-- name: StaffSessionInsert :execrows
-- Only while the account is enabled, its row share-locked: a disable
-- either waits for this insert (and then finds the session to revoke)
-- or commits first (and then nothing is inserted).
INSERT INTO staff_sessions (token_id, account_id, expires_at)
SELECT @token_id, a.id, @expires_at FROM staff_accounts a
WHERE a.id = @account_id AND a.disabled_at IS NULL
FOR SHARE OF a;

-- name: StaffSessionsLive :many
SELECT token_id, expires_at FROM staff_sessions WHERE account_id = @account_id AND expires_at > now();

-- name: StaffSessionsPrune :execrows
DELETE FROM staff_sessions WHERE expires_at <= now() - interval '1 day';
