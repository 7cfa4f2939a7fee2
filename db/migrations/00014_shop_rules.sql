-- +goose Up
-- A shop's money rules and hours: a minimum order, delivery priced by
-- distance bands from the shop's location, and a weekly schedule in the
-- shop's time zone with closures on given dates. quote_version moves with
-- every change of them, so that a submit takes stock only under the rules
-- it was quoted (see StockTakeFree).
ALTER TABLE merchants
    ADD COLUMN min_order_fen  bigint NOT NULL DEFAULT 0 CHECK (min_order_fen BETWEEN 0 AND 100000000),
    ADD COLUMN latitude       double precision CHECK (latitude BETWEEN -90 AND 90),
    ADD COLUMN longitude      double precision CHECK (longitude BETWEEN -180 AND 180),
    -- [{"up_to_m": 3000, "fee_fen": 300}, ...], ascending; [] prices every
    -- address at delivery_fee_fen.
    ADD COLUMN delivery_bands jsonb  NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(delivery_bands) = 'array'),
    ADD COLUMN time_zone      text   NOT NULL DEFAULT 'Asia/Shanghai' CHECK (length(time_zone) BETWEEN 1 AND 64),
    -- [{"day": "mon", "open": "10:00", "close": "14:00"}, ...]; [] is open
    -- around the clock.
    ADD COLUMN weekly_hours   jsonb  NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(weekly_hours) = 'array'),
    -- Dates the shop stays closed, YYYY-MM-DD in its time zone.
    ADD COLUMN closed_dates   text[] NOT NULL DEFAULT '{}' CHECK (cardinality(closed_dates) <= 366),
    ADD COLUMN quote_version  bigint NOT NULL DEFAULT 1 CHECK (quote_version > 0),
    ADD CONSTRAINT merchants_location_check CHECK ((latitude IS NULL) = (longitude IS NULL)),
    ADD CONSTRAINT merchants_bands_location_check CHECK (delivery_bands = '[]' OR latitude IS NOT NULL);

-- +goose Down
ALTER TABLE merchants
    DROP CONSTRAINT merchants_bands_location_check,
    DROP CONSTRAINT merchants_location_check,
    DROP COLUMN min_order_fen,
    DROP COLUMN latitude,
    DROP COLUMN longitude,
    DROP COLUMN delivery_bands,
    DROP COLUMN time_zone,
    DROP COLUMN weekly_hours,
    DROP COLUMN closed_dates,
    DROP COLUMN quote_version;
