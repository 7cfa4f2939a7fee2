-- +goose Up
CREATE TABLE orders (
    -- Snowflake-style id (time | worker | sequence), assigned at confirm.
    id               bigint      PRIMARY KEY,
    user_id          bigint      NOT NULL REFERENCES users (id),
    merchant_id      bigint      NOT NULL REFERENCES merchants (id),
    -- SM3 digest of the order's stable fields plus its intent sequence:
    -- one order per (user, digest) is what merges retried submits.
    intent_digest    bytea       NOT NULL CHECK (length(intent_digest) = 32),
    -- SM3 digest of the stable fields alone, to find the previous order of
    -- the same content when assigning the next intent sequence.
    content_digest   bytea       NOT NULL CHECK (length(content_digest) = 32),
    intent_seq       integer     NOT NULL CHECK (intent_seq >= 1),
    digest_alg       text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('PENDING_PAYMENT', 'PAID', 'ACCEPTED', 'DELIVERING',
                                                            'COMPLETED', 'CANCELLED', 'REFUNDING', 'REFUNDED')),
    items_total_fen  bigint      NOT NULL CHECK (items_total_fen > 0),
    delivery_fee_fen bigint      NOT NULL CHECK (delivery_fee_fen >= 0),
    total_fen        bigint      NOT NULL CHECK (total_fen = items_total_fen + delivery_fee_fen),
    address          jsonb       NOT NULL,
    remark           text        NOT NULL DEFAULT '',
    version          bigint      NOT NULL DEFAULT 1 CHECK (version > 0),
    pay_deadline     timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    CONSTRAINT orders_user_intent_key UNIQUE (user_id, intent_digest),
    CONSTRAINT orders_user_content_seq_key UNIQUE (user_id, content_digest, intent_seq)
);
-- A user's orders, newest first (ids grow with time).
CREATE INDEX orders_user_id_idx ON orders (user_id, id DESC);

CREATE TABLE order_items (
    order_id       bigint  NOT NULL REFERENCES orders (id),
    dish_id        bigint  NOT NULL REFERENCES dishes (id),
    name           text    NOT NULL,
    qty            integer NOT NULL CHECK (qty BETWEEN 1 AND 99),
    unit_price_fen bigint  NOT NULL CHECK (unit_price_fen > 0),
    line_total_fen bigint  NOT NULL CHECK (line_total_fen = unit_price_fen * qty),
    PRIMARY KEY (order_id, dish_id)
);

-- Stock an order holds. It is released exactly once (released_at) when
-- the order ends without being fulfilled.
CREATE TABLE stock_reservations (
    order_id    bigint      NOT NULL REFERENCES orders (id),
    dish_id     bigint      NOT NULL REFERENCES dishes (id),
    qty         integer     NOT NULL CHECK (qty > 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    released_at timestamptz,
    CONSTRAINT stock_reservations_order_dish_key PRIMARY KEY (order_id, dish_id)
);

CREATE TABLE order_status_history (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id    bigint      NOT NULL REFERENCES orders (id),
    from_status text,
    to_status   text        NOT NULL,
    version     bigint      NOT NULL,
    actor       text        NOT NULL,
    reason      text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT order_status_history_order_version_key UNIQUE (order_id, version)
);

-- The completed response of an idempotent request, replayed byte for byte.
CREATE TABLE idempotency_records (
    user_id     bigint      NOT NULL,
    key         text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    -- What the request asked for; the same key with another fingerprint is
    -- refused (422).
    fingerprint bytea       NOT NULL,
    digest_alg  text        NOT NULL,
    order_id    bigint,
    status_code integer     NOT NULL,
    headers     jsonb       NOT NULL,
    body        bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    CONSTRAINT idempotency_records_user_key_key PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_records_expires_idx ON idempotency_records (expires_at);

-- Leases of the 1024 Snowflake worker ids: two live instances never hold
-- the same one.
CREATE TABLE worker_leases (
    worker_id  integer     PRIMARY KEY CHECK (worker_id BETWEEN 0 AND 1023),
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE worker_leases;
DROP TABLE idempotency_records;
DROP TABLE order_status_history;
DROP TABLE stock_reservations;
DROP TABLE order_items;
DROP TABLE orders;
