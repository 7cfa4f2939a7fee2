-- The database floor of an order: the least PostgreSQL must store for a
-- placement and a payment, with the constraints exactly-once needs and
-- nothing else. Its own database; the bench creates it afresh each run.
CREATE TABLE dishes (
    id          integer PRIMARY KEY,
    merchant_id integer NOT NULL,
    price_fen   bigint  NOT NULL,
    stock       bigint  NOT NULL CHECK (stock >= 0)
);
CREATE TABLE orders (
    id          bigint      PRIMARY KEY,
    user_id     bigint      NOT NULL,
    digest      bytea       NOT NULL,
    merchant_id integer     NOT NULL,
    status      text        NOT NULL,
    total_fen   bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, digest)
);
CREATE TABLE order_items (
    order_id bigint   NOT NULL,
    line     smallint NOT NULL,
    dish_id  integer  NOT NULL,
    qty      integer  NOT NULL,
    PRIMARY KEY (order_id, line)
);
CREATE TABLE payments (
    transaction_id text   PRIMARY KEY,
    order_id       bigint NOT NULL
);
CREATE TABLE outbox (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id   bigint      NOT NULL,
    kind       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
