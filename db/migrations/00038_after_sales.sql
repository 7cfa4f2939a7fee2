-- +goose Up
-- After-sales requests: a customer asks for some of an order's money
-- back after the merchant accepted it (lines, or an amount), the
-- merchant agrees or rejects before respond_by (else it is agreed for
-- it: a job inserted with the request), and a rejection can be escalated
-- to the platform, whose admin decides. Agreeing writes the refund in
-- the same transaction (refund_id). One open request per order.
CREATE TABLE after_sales (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id      bigint      NOT NULL REFERENCES orders (id),
    merchant_id   bigint      NOT NULL REFERENCES merchants (id),
    user_id       bigint      NOT NULL REFERENCES users (id),
    lines         jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(lines) = 'array'),
    amount_fen    bigint      CHECK (amount_fen > 0),
    reason        text        NOT NULL CHECK (length(reason) BETWEEN 1 AND 200),
    photos        text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(photos) <= 9),
    status        text        NOT NULL DEFAULT 'requested'
        CHECK (status IN ('requested', 'agreed', 'rejected', 'escalated', 'refused')),
    respond_by    timestamptz NOT NULL,
    -- Who decided last (merchant staff, system at the deadline, admin)
    -- and what they said; the customer's words when escalating.
    decided_by    text        NOT NULL DEFAULT '',
    decision_note text        NOT NULL DEFAULT '',
    escalation    text        NOT NULL DEFAULT '',
    refund_id     bigint      REFERENCES refunds (id),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    decided_at    timestamptz,
    escalated_at  timestamptz,
    CHECK ((amount_fen IS NULL) <> (lines = '[]'::jsonb)),
    CHECK ((status = 'agreed') = (refund_id IS NOT NULL))
);
CREATE UNIQUE INDEX after_sales_one_open_idx ON after_sales (order_id) WHERE status IN ('requested', 'escalated');
CREATE INDEX after_sales_merchant_idx ON after_sales (merchant_id, status, id);
CREATE INDEX after_sales_status_idx ON after_sales (status, id);

-- +goose Down
DROP TABLE after_sales;
