-- +goose Up
-- Tokens revoked before they expire (a logout, a staff member who left):
-- each instance keeps the live ones in memory, told of new ones over Redis
-- pub/sub and reloading from here periodically and on resubscription.
CREATE TABLE revoked_tokens (
    token_id   text        PRIMARY KEY CHECK (length(token_id) BETWEEN 1 AND 128),
    kind       text        NOT NULL CHECK (kind IN ('user', 'staff', 'unknown')),
    subject    text        NOT NULL DEFAULT '',
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz NOT NULL DEFAULT now(),
    revoked_by text        NOT NULL
);
CREATE INDEX revoked_tokens_expires_idx ON revoked_tokens (expires_at);

-- +goose Down
DROP TABLE revoked_tokens;
