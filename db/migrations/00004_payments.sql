-- +goose Up
-- One payment attempt of an order at the provider (a JSAPI prepay).
CREATE TABLE payments (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id          bigint      NOT NULL REFERENCES orders (id),
    channel           text        NOT NULL,
    mchid             text        NOT NULL,
    appid             text        NOT NULL,
    out_trade_no      text        NOT NULL,
    amount_fen        bigint      NOT NULL CHECK (amount_fen > 0),
    currency          text        NOT NULL DEFAULT 'CNY',
    prepay_id         text,
    prepay_expires_at timestamptz,
    -- CREATED (prepay asked), SUCCESS (paid), CLOSED, REFUNDED
    status            text        NOT NULL DEFAULT 'CREATED' CHECK (status IN ('CREATED', 'SUCCESS', 'CLOSED', 'REFUNDED')),
    transaction_id    text,
    paid_at           timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payments_channel_mchid_out_trade_no_key UNIQUE (channel, mchid, out_trade_no)
);
CREATE INDEX payments_order_idx ON payments (order_id);

-- Every notification processed, once: by its id and by what it says.
CREATE TABLE payment_notifications (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel         text        NOT NULL,
    notification_id text        NOT NULL,
    transaction_id  text        NOT NULL,
    event_type      text        NOT NULL,
    order_id        bigint,
    outcome         text        NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payment_notifications_channel_id_key UNIQUE (channel, notification_id),
    CONSTRAINT payment_notifications_channel_txn_event_key UNIQUE (channel, transaction_id, event_type)
);

-- Refunds, each with a deterministic out_refund_no.
CREATE TABLE refunds (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payment_id    bigint      NOT NULL REFERENCES payments (id),
    order_id      bigint      NOT NULL REFERENCES orders (id),
    out_refund_no text        NOT NULL,
    amount_fen    bigint      NOT NULL CHECK (amount_fen > 0),
    reason        text        NOT NULL,
    status        text        NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'PROCESSING', 'SUCCESS', 'FAILED')),
    refund_id     text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT refunds_out_refund_no_key UNIQUE (out_refund_no)
);

-- Callbacks that do not match their payment (amount, mchid, appid,
-- currency): stored, counted, and never allowed to change an order.
CREATE TABLE payment_anomalies (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel         text        NOT NULL,
    notification_id text        NOT NULL,
    out_trade_no    text        NOT NULL,
    kind            text        NOT NULL,
    detail          text        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payment_anomalies_channel_notification_kind_key UNIQUE (channel, notification_id, kind)
);

-- +goose Down
DROP TABLE payment_anomalies;
DROP TABLE refunds;
DROP TABLE payment_notifications;
DROP TABLE payments;
