-- name: UserUpsertByOpenID :one
-- Logging in twice with one openid yields one user.
INSERT INTO users (openid) VALUES (@openid)
ON CONFLICT (openid) DO UPDATE SET last_login_at = now()
RETURNING *;

-- name: UserGetByID :one
SELECT * FROM users WHERE id = @id;
