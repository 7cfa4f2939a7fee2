-- +goose Up
-- WeChat's shipping information: a mini-program whose payments WeChat
-- holds until it is told how the goods went out uploads, once per
-- payment, how each order left: same-city delivery (logistics type 2)
-- when it is dispatched, collected by the customer (4) when it is picked
-- up. The row is written by the transaction that dispatches or hands over
-- the order, with the job that uploads it (the outbox); the job records
-- how it went. An operator lists the ones that need attention: refused
-- by WeChat (final) or failed (out of tries).
CREATE TABLE shipping_uploads (
    order_id       bigint      PRIMARY KEY REFERENCES orders (id),
    logistics_type smallint    NOT NULL CHECK (logistics_type IN (2, 4)),
    status         text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'uploaded', 'refused', 'failed', 'skipped')),
    tries          integer     NOT NULL DEFAULT 0,
    errcode        integer,
    last_error     text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    uploaded_at    timestamptz,
    -- The try that holds the upload until then: two runs of its job (an
    -- operator's retry while the last try still finishes) never call
    -- WeChat at once.
    leased_until   timestamptz
);
CREATE INDEX shipping_uploads_attention_idx ON shipping_uploads (created_at) WHERE status IN ('refused', 'failed', 'pending');

-- +goose Down
DROP TABLE shipping_uploads;
