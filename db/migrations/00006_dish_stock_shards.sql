-- +goose Up
-- A dish's stock is split over one or more shard rows so that orders of
-- one popular dish do not all queue for one row lock: each order takes
-- its units from one shard (or, near the end of the stock, from several)
-- and holds only that row's lock until it commits. The stock of a dish is
-- the sum of its shards; each shard stays at or above zero, so the sum
-- does too. Shard 0 always exists.
CREATE TABLE dish_stock (
    dish_id bigint   NOT NULL REFERENCES dishes (id),
    shard   smallint NOT NULL CHECK (shard BETWEEN 0 AND 63),
    units   integer  NOT NULL CHECK (units >= 0),
    CONSTRAINT dish_stock_pkey PRIMARY KEY (dish_id, shard)
);
INSERT INTO dish_stock (dish_id, shard, units) SELECT id, 0, stock FROM dishes;
ALTER TABLE dishes DROP COLUMN stock;

-- The view dishes_with_stock lives in db/functions/dishes_with_stock.sql.
-- +goose Down
ALTER TABLE dishes ADD COLUMN stock integer NOT NULL DEFAULT 0 CHECK (stock >= 0);
UPDATE dishes d SET stock = (SELECT coalesce(sum(units), 0) FROM dish_stock s WHERE s.dish_id = d.id);
ALTER TABLE dishes ALTER COLUMN stock DROP DEFAULT;
DROP TABLE dish_stock;
