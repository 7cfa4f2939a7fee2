-- +goose Up
-- Spending a voucher on an order. The voucher row says which order holds
-- it (order_id, set from NULL by the placement, back to NULL by a release
-- of that same order): one row, so one holder at a time. The order keeps
-- what it spent and who funds it; each line keeps its share of the
-- discount as sold (largest remainder: the shares sum to the discount).
-- The new columns' defaults need no rewrite; the checks hold for every
-- row written from now on, and NOT VALID spares the big tables a scan
-- under an exclusive lock to prove them for rows whose new columns are
-- the defaults, which satisfy them.
ALTER TABLE vouchers
    ADD COLUMN order_id bigint,
    ADD COLUMN used_at  timestamptz,
    ADD CONSTRAINT vouchers_used_check CHECK ((order_id IS NULL) = (used_at IS NULL));
-- An order spends at most one voucher.
CREATE UNIQUE INDEX vouchers_order_key ON vouchers (order_id) WHERE order_id IS NOT NULL;

ALTER TABLE orders
    ADD COLUMN voucher_id            bigint,
    ADD COLUMN discount_fen          bigint NOT NULL DEFAULT 0 CHECK (discount_fen >= 0),
    ADD COLUMN platform_discount_fen bigint NOT NULL DEFAULT 0 CHECK (platform_discount_fen >= 0),
    ADD COLUMN merchant_discount_fen bigint NOT NULL DEFAULT 0 CHECK (merchant_discount_fen >= 0),
    ADD CONSTRAINT orders_discount_shares_check CHECK (platform_discount_fen + merchant_discount_fen = discount_fen) NOT VALID,
    ADD CONSTRAINT orders_discount_items_check CHECK (discount_fen <= items_total_fen) NOT VALID,
    -- What the customer pays: everything, less the discount.
    DROP CONSTRAINT orders_total_check,
    ADD CONSTRAINT orders_total_check
        CHECK (total_fen = items_total_fen + packaging_fee_fen + delivery_fee_fen - discount_fen) NOT VALID;

ALTER TABLE order_items
    ADD COLUMN discount_fen bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT order_items_discount_check CHECK (discount_fen BETWEEN 0 AND line_total_fen) NOT VALID;

-- +goose Down
ALTER TABLE order_items DROP COLUMN discount_fen;
ALTER TABLE orders DROP CONSTRAINT orders_total_check,
    ADD CONSTRAINT orders_total_check CHECK (total_fen = items_total_fen + packaging_fee_fen + delivery_fee_fen) NOT VALID,
    DROP CONSTRAINT orders_discount_items_check, DROP CONSTRAINT orders_discount_shares_check,
    DROP COLUMN merchant_discount_fen, DROP COLUMN platform_discount_fen, DROP COLUMN discount_fen, DROP COLUMN voucher_id;
DROP INDEX vouchers_order_key;
ALTER TABLE vouchers DROP CONSTRAINT vouchers_used_check, DROP COLUMN used_at, DROP COLUMN order_id;
