-- +goose Up
-- A menu as shops lay it out: ordered categories, dishes with an image,
-- a packaging fee per unit and option groups (size, spice, extras), each
-- choice with a price delta and a switch. An order line is a dish with its
-- chosen options, so one dish may be on several lines of an order.

CREATE TABLE categories (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    merchant_id bigint      NOT NULL REFERENCES merchants (id),
    name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    position    integer     NOT NULL DEFAULT 0 CHECK (position BETWEEN 0 AND 100000),
    version     bigint      NOT NULL DEFAULT 1 CHECK (version > 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT categories_merchant_name_key UNIQUE (merchant_id, name),
    -- For the composite reference from dishes: a dish's category is its
    -- merchant's.
    CONSTRAINT categories_merchant_id_key UNIQUE (merchant_id, id)
);

ALTER TABLE dishes
    ADD COLUMN category_id       bigint,
    ADD COLUMN position          integer NOT NULL DEFAULT 0 CHECK (position BETWEEN 0 AND 100000),
    ADD COLUMN image_url         text CHECK (image_url ~ '^https://[^\s]+$' AND length(image_url) <= 2048),
    ADD COLUMN packaging_fee_fen bigint  NOT NULL DEFAULT 0 CHECK (packaging_fee_fen BETWEEN 0 AND 100000000),
    -- Bumped by every change to the dish's options: a submit takes stock
    -- only while the options it was quoted are unchanged (see StockTakeFree).
    ADD COLUMN options_version   bigint  NOT NULL DEFAULT 1 CHECK (options_version > 0),
    ADD CONSTRAINT dishes_category_fkey FOREIGN KEY (merchant_id, category_id)
        REFERENCES categories (merchant_id, id) ON DELETE SET NULL (category_id);

CREATE TABLE option_groups (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dish_id     bigint  NOT NULL REFERENCES dishes (id) ON DELETE CASCADE,
    name        text    NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    position    integer NOT NULL CHECK (position BETWEEN 0 AND 100),
    -- A group is required when min_choices > 0.
    min_choices integer NOT NULL CHECK (min_choices BETWEEN 0 AND 20),
    max_choices integer NOT NULL CHECK (max_choices BETWEEN 1 AND 20),
    CONSTRAINT option_groups_choices_check CHECK (min_choices <= max_choices),
    CONSTRAINT option_groups_dish_name_key UNIQUE (dish_id, name)
);

CREATE TABLE option_choices (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_id        bigint  NOT NULL REFERENCES option_groups (id) ON DELETE CASCADE,
    name            text    NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    position        integer NOT NULL CHECK (position BETWEEN 0 AND 100),
    price_delta_fen bigint  NOT NULL CHECK (price_delta_fen BETWEEN 0 AND 100000000),
    available       boolean NOT NULL DEFAULT true,
    CONSTRAINT option_choices_group_name_key UNIQUE (group_id, name)
);
CREATE INDEX option_choices_group_idx ON option_choices (group_id);

-- Order lines: numbered, with the options as sold (names and prices, a
-- JSON array) and the packaging fee per unit.
ALTER TABLE order_items
    ADD COLUMN line              smallint,
    ADD COLUMN options           jsonb  NOT NULL DEFAULT '[]',
    ADD COLUMN packaging_fee_fen bigint NOT NULL DEFAULT 0 CHECK (packaging_fee_fen >= 0);
UPDATE order_items i SET line = n.line
FROM (SELECT order_id, dish_id, (row_number() OVER (PARTITION BY order_id ORDER BY dish_id) - 1)::smallint AS line
      FROM order_items) n
WHERE n.order_id = i.order_id AND n.dish_id = i.dish_id;
ALTER TABLE order_items
    ALTER COLUMN line SET NOT NULL,
    ADD CONSTRAINT order_items_line_check CHECK (line BETWEEN 0 AND 99),
    DROP CONSTRAINT order_items_pkey,
    ADD CONSTRAINT order_items_pkey PRIMARY KEY (order_id, line);

ALTER TABLE orders
    ADD COLUMN packaging_fee_fen bigint NOT NULL DEFAULT 0 CHECK (packaging_fee_fen >= 0),
    DROP CONSTRAINT orders_check,
    ADD CONSTRAINT orders_total_check CHECK (total_fen = items_total_fen + packaging_fee_fen + delivery_fee_fen);

-- +goose Down
ALTER TABLE orders
    DROP CONSTRAINT orders_total_check,
    DROP COLUMN packaging_fee_fen,
    ADD CONSTRAINT orders_check CHECK (total_fen = items_total_fen + delivery_fee_fen);
ALTER TABLE order_items
    DROP CONSTRAINT order_items_pkey,
    DROP COLUMN line,
    DROP COLUMN options,
    DROP COLUMN packaging_fee_fen,
    ADD CONSTRAINT order_items_pkey PRIMARY KEY (order_id, dish_id);
DROP TABLE option_choices;
DROP TABLE option_groups;
ALTER TABLE dishes
    DROP CONSTRAINT dishes_category_fkey,
    DROP COLUMN category_id,
    DROP COLUMN position,
    DROP COLUMN image_url,
    DROP COLUMN packaging_fee_fen,
    DROP COLUMN options_version;
DROP TABLE categories;
