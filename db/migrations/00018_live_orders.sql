-- +goose Up
-- Merchant staff log in with a username and password (argon2id, PHC
-- string) and get a staff token for their merchant.
CREATE TABLE staff_accounts (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    merchant_id   bigint      NOT NULL REFERENCES merchants (id),
    username      text        NOT NULL CHECK (username ~ '^[a-z0-9][a-z0-9._-]{2,63}$'),
    password_hash text        NOT NULL CHECK (password_hash LIKE '$argon2id$%'),
    created_by    text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz,
    CONSTRAINT staff_accounts_username_key UNIQUE (username)
);
CREATE INDEX staff_accounts_merchant_idx ON staff_accounts (merchant_id);

-- The staff tokens a login issued, so disabling an account revokes them.
CREATE TABLE staff_sessions (
    token_id   text        PRIMARY KEY,
    account_id bigint      NOT NULL REFERENCES staff_accounts (id),
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX staff_sessions_account_idx ON staff_sessions (account_id, expires_at);

-- The order events outbox: every event a webhook gets, written in the
-- transaction of its transition, read by each instance's live-order hub
-- and replayed to boards that reconnect. Rows are read in (xid, seq)
-- order and only below the oldest running transaction (pg_current_snapshot's
-- xmin): a transaction that committed late can never appear behind a
-- position already read, so no board skips an event.
CREATE TABLE order_events (
    seq         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid         bigint      NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    event_id    text        NOT NULL,
    merchant_id bigint      NOT NULL,
    order_id    bigint      NOT NULL,
    type        text        NOT NULL,
    body        json        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT order_events_event_id_key UNIQUE (event_id)
);
CREATE INDEX order_events_position_idx ON order_events (xid, seq);
CREATE INDEX order_events_merchant_idx ON order_events (merchant_id, xid, seq);

-- The subscribe-message templates a customer accepted for an order
-- (wx.requestSubscribeMessage). Each acceptance allows one message: the
-- first status change that uses the template takes it (used_for).
CREATE TABLE order_subscriptions (
    order_id    bigint      NOT NULL,
    template_id text        NOT NULL CHECK (template_id ~ '^[A-Za-z0-9_-]{1,128}$'),
    granted_at  timestamptz NOT NULL DEFAULT now(),
    used_for    text,
    outcome     text        CHECK (outcome IN ('sent', 'refused', 'rejected')),
    finished_at timestamptz,
    PRIMARY KEY (order_id, template_id)
);

-- +goose Down
DROP TABLE order_subscriptions;
DROP TABLE order_events;
DROP TABLE staff_sessions;
DROP TABLE staff_accounts;
