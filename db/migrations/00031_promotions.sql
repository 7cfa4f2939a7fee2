-- +goose Up
-- Promotions a merchant runs on its own menu: spend-and-save tiers (满减),
-- a new-customer discount and free delivery above a total. Each has a
-- validity of local dates and an optional daily window, both read in the
-- merchant's time zone, says whether it combines with other discounts,
-- and may have a budget: the most it gives away in all, spread over
-- shards as a voucher template's is, so that the orders of a busy shop
-- do not queue on one row. Any change of a promotion moves the
-- merchant's quote_version (in the same transaction), so that a cart
-- quoted under the old terms takes no stock and is confirmed again.
CREATE TABLE promotions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    merchant_id   bigint      NOT NULL REFERENCES merchants (id),
    kind          text        NOT NULL CHECK (kind IN ('spend_save', 'new_customer', 'free_delivery')),
    name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 60),
    -- [{"threshold_fen": n, "off_fen": n}], thresholds ascending: the
    -- spend-and-save tiers; one tier for the other kinds (free delivery's
    -- off_fen is 0: it waives the delivery fee).
    tiers         jsonb       NOT NULL CHECK (jsonb_typeof(tiers) = 'array' AND jsonb_array_length(tiers) BETWEEN 1 AND 5),
    -- Whose first order counts for a new-customer discount: at this
    -- merchant, or anywhere on the platform.
    new_customer_scope text   CHECK (new_customer_scope IN ('merchant', 'platform')),
    funded_by     text        NOT NULL CHECK (funded_by IN ('platform', 'merchant')),
    starts_on     date,
    ends_on       date,
    daily_from    time,
    daily_until   time,
    stackable     boolean     NOT NULL DEFAULT true,
    budget_fen    bigint      CHECK (budget_fen BETWEEN 1 AND 10000000000),
    status        text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    version       bigint      NOT NULL DEFAULT 1 CHECK (version > 0),
    created_by    text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'new_customer') = (new_customer_scope IS NOT NULL)),
    CHECK (ends_on IS NULL OR starts_on IS NULL OR ends_on >= starts_on),
    CHECK ((daily_from IS NULL) = (daily_until IS NULL) AND (daily_from IS NULL OR daily_until > daily_from))
);
-- A retried create must not make a second one.
CREATE UNIQUE INDEX promotions_name_key ON promotions (merchant_id, name);

-- A promotion's budget not yet given away, in fen, spread over shards.
CREATE TABLE promotion_budget (
    promotion_id bigint   NOT NULL REFERENCES promotions (id),
    shard        smallint NOT NULL CHECK (shard >= 0),
    remaining    bigint   NOT NULL CHECK (remaining >= 0),
    PRIMARY KEY (promotion_id, shard)
);

-- A customer's first order in a scope (a merchant, or 0: the platform)
-- that took a new-customer discount: one row per customer and scope, so
-- racing first orders give the discount once. A cancel before the order
-- went to the kitchen deletes it (the customer is new again).
CREATE TABLE new_customer_claims (
    user_id     bigint NOT NULL REFERENCES users (id),
    scope       bigint NOT NULL,
    order_id    bigint NOT NULL UNIQUE,
    PRIMARY KEY (user_id, scope)
);

-- What the order got from promotions, as the api shows it: id, version,
-- kind, name, amount_fen, funded_by for each.
ALTER TABLE orders ADD COLUMN promotions jsonb NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE orders DROP COLUMN promotions;
DROP TABLE new_customer_claims;
DROP TABLE promotion_budget;
DROP TABLE promotions;
