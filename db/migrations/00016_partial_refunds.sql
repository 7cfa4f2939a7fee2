-- +goose Up
-- Partial refunds: staff give back some lines, or an amount, of a paid
-- order, several times, never more than was paid. A refund records the
-- lines it gave back; an order line counts the units refunded, and of
-- them those whose stock went back on sale.
ALTER TABLE refunds
    ADD COLUMN lines   jsonb   NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(lines) = 'array'),
    ADD COLUMN restock boolean NOT NULL DEFAULT false,
    ADD COLUMN partial boolean NOT NULL DEFAULT false;
-- What a payment has given back, summed at every refund request.
CREATE INDEX refunds_payment_idx ON refunds (payment_id);

ALTER TABLE order_items
    ADD COLUMN refunded_qty  integer NOT NULL DEFAULT 0,
    ADD COLUMN restocked_qty integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT order_items_refunded_check CHECK (refunded_qty BETWEEN 0 AND qty),
    ADD CONSTRAINT order_items_restocked_check CHECK (restocked_qty BETWEEN 0 AND refunded_qty);

-- +goose Down
ALTER TABLE order_items
    DROP CONSTRAINT order_items_restocked_check,
    DROP CONSTRAINT order_items_refunded_check,
    DROP COLUMN restocked_qty,
    DROP COLUMN refunded_qty;
DROP INDEX refunds_payment_idx;
ALTER TABLE refunds DROP COLUMN partial, DROP COLUMN restock, DROP COLUMN lines;
