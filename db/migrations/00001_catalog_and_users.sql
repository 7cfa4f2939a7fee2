-- +goose Up
-- Users are mini-program customers, identified by their WeChat openid.
CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    openid        text        NOT NULL CHECK (length(openid) BETWEEN 1 AND 128),
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_login_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_openid_key UNIQUE (openid)
);

CREATE TABLE merchants (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    status           text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    delivery_fee_fen bigint      NOT NULL DEFAULT 0 CHECK (delivery_fee_fen BETWEEN 0 AND 100000000),
    version          bigint      NOT NULL DEFAULT 1 CHECK (version > 0),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Stock is the number of units still for sale; it never goes negative.
CREATE TABLE dishes (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    merchant_id bigint      NOT NULL REFERENCES merchants (id),
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    price_fen   bigint      NOT NULL CHECK (price_fen BETWEEN 1 AND 100000000),
    stock       integer     NOT NULL CHECK (stock >= 0),
    on_sale     boolean     NOT NULL DEFAULT true,
    version     bigint      NOT NULL DEFAULT 1 CHECK (version > 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    -- A retried create of the same dish must not make a second one.
    CONSTRAINT dishes_merchant_name_key UNIQUE (merchant_id, name)
);

-- +goose Down
DROP TABLE dishes;
DROP TABLE merchants;
DROP TABLE users;
