-- +goose Up
-- A customer may urge the merchant about a late order, at most once per
-- interval: when they last did, and how often (each urge is its own order
-- event).
ALTER TABLE orders
    ADD COLUMN urged_at   timestamptz,
    ADD COLUMN urge_count integer NOT NULL DEFAULT 0 CHECK (urge_count >= 0);

-- +goose Down
ALTER TABLE orders DROP COLUMN urged_at, DROP COLUMN urge_count;
