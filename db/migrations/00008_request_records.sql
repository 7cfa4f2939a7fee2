-- +goose Up
-- The Idempotency-Key records of creating requests other than submit
-- (admin creates, stock adjustments, ...): low volume, so PostgreSQL
-- alone. A scope names who sent the key (e.g. "staff:alice"); the record
-- is claimed, filled and committed in the transaction of the change it
-- answers, so a concurrent duplicate waits on the claim and then replays.
CREATE TABLE request_records (
    scope       text        NOT NULL CHECK (length(scope) BETWEEN 1 AND 300),
    key         text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    fingerprint bytea       NOT NULL,
    status_code integer     NOT NULL,
    headers     jsonb       NOT NULL DEFAULT '{}',
    body        bytea       NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CONSTRAINT request_records_scope_key_key PRIMARY KEY (scope, key)
);
CREATE INDEX request_records_expires_idx ON request_records (expires_at);

-- +goose Down
DROP TABLE request_records;
