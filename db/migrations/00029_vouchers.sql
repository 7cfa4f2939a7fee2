-- +goose Up
-- Vouchers (代金券): a template says what a voucher is worth, who funds
-- it, when it may be claimed, for how long a claimed one is valid, how
-- many may be claimed in all (the budget) and by one customer; a voucher
-- is one customer's claim of it.
CREATE TABLE voucher_templates (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- NULL: a platform voucher, good at any merchant.
    merchant_id    bigint      REFERENCES merchants (id),
    name           text        NOT NULL CHECK (length(name) BETWEEN 1 AND 60),
    amount_fen     bigint      NOT NULL CHECK (amount_fen BETWEEN 1 AND 100000000),
    -- 0: no threshold (无门槛); otherwise the items' total it needs.
    threshold_fen  bigint      NOT NULL DEFAULT 0 CHECK (threshold_fen BETWEEN 0 AND 100000000),
    funded_by      text        NOT NULL CHECK (funded_by IN ('platform', 'merchant')),
    claim_from     timestamptz NOT NULL,
    claim_until    timestamptz NOT NULL,
    valid_days     integer     NOT NULL CHECK (valid_days BETWEEN 1 AND 365),
    budget         integer     NOT NULL CHECK (budget BETWEEN 1 AND 10000000),
    per_user_limit integer     NOT NULL DEFAULT 1 CHECK (per_user_limit BETWEEN 1 AND 100),
    status         text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    version        bigint      NOT NULL DEFAULT 1 CHECK (version > 0),
    created_by     text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CHECK (claim_until > claim_from),
    -- A merchant funds only its own vouchers.
    CHECK (merchant_id IS NOT NULL OR funded_by = 'platform'),
    -- A threshold voucher never takes the whole threshold.
    CHECK (threshold_fen = 0 OR amount_fen < threshold_fen)
);
-- A retried create of the same template must not make a second one.
CREATE UNIQUE INDEX voucher_templates_name_key ON voucher_templates (coalesce(merchant_id, 0), name);
CREATE INDEX voucher_templates_merchant ON voucher_templates (merchant_id, id);

-- A template's unclaimed budget, spread over shards as a dish's stock is,
-- so that a storm of claims does not queue on one row.
CREATE TABLE voucher_budget (
    template_id bigint   NOT NULL REFERENCES voucher_templates (id),
    shard       smallint NOT NULL CHECK (shard >= 0),
    remaining   integer  NOT NULL CHECK (remaining >= 0),
    PRIMARY KEY (template_id, shard)
);

-- A customer's claim of a template: the n-th of at most per_user_limit
-- (unique), so racing claims of one customer make at most that many.
CREATE TABLE vouchers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    template_id bigint      NOT NULL REFERENCES voucher_templates (id),
    user_id     bigint      NOT NULL REFERENCES users (id),
    claim_no    integer     NOT NULL CHECK (claim_no >= 1),
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    valid_until timestamptz NOT NULL,
    CONSTRAINT vouchers_claim_key UNIQUE (template_id, user_id, claim_no)
);
CREATE INDEX vouchers_user ON vouchers (user_id, id);

-- +goose Down
DROP TABLE vouchers;
DROP TABLE voucher_budget;
DROP TABLE voucher_templates;
