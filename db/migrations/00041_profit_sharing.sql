-- +goose Up
-- Service-provider mode (TAKEOUT_WXPAY_MODE=partner): each merchant is a
-- sub-merchant of the platform's WeChat Pay account. Customers pay it
-- directly, the money stays frozen for profit sharing, and the platform
-- takes its commission by sharing (分账) once the order completes.
ALTER TABLE merchants
    ADD COLUMN sub_mchid text CHECK (sub_mchid ~ '^[0-9]{8,12}$'),
    ADD COLUMN sub_appid text CHECK (sub_appid ~ '^wx[0-9a-f]{16}$');
CREATE UNIQUE INDEX merchants_sub_mchid_key ON merchants (sub_mchid) WHERE sub_mchid IS NOT NULL;

-- A payment taken for a sub-merchant: whose, and frozen for sharing.
ALTER TABLE payments
    ADD COLUMN sub_mchid text,
    ADD COLUMN sub_appid text,
    ADD COLUMN profit_sharing boolean NOT NULL DEFAULT false;

-- payment_settle and payment_settle_grouped compare the sub-merchant
-- too (db/functions): the old signatures go.
DROP FUNCTION IF EXISTS payment_settle(text, text, text, text, bigint, text, text, text, timestamptz, text, text, timestamptz, text, text, text);
DROP FUNCTION IF EXISTS payment_settle_grouped(text, text, text, text, bigint, text, text, text, timestamptz, text, text, timestamptz, text, text, text);

-- Every request of profit sharing, each with its deterministic number at
-- WeChat Pay: the share of a payment (its commission to the platform, the
-- rest unfrozen to the merchant: out_order_no) and the returns (回退) that
-- a refund needs from what was shared (out_return_no). A request that
-- FAILED and is tried again gets a new attempt, and so a new number.
CREATE TABLE profit_sharings (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text        NOT NULL CHECK (kind IN ('share', 'return')),
    payment_id  bigint      NOT NULL REFERENCES payments (id),
    order_id    bigint      NOT NULL REFERENCES orders (id),
    merchant_id bigint      NOT NULL REFERENCES merchants (id),
    -- The refund a return is for.
    refund_id   bigint      REFERENCES refunds (id),
    attempt     integer     NOT NULL DEFAULT 1 CHECK (attempt > 0),
    out_no      text        NOT NULL UNIQUE,
    -- Why: completed (the order), deadline (nobody completed it), or the
    -- refund's out_refund_no.
    cause       text        NOT NULL,
    -- A share: the commission sent to the platform, and what was
    -- unfrozen to the merchant; a return: what came back.
    amount_fen   bigint     NOT NULL DEFAULT 0 CHECK (amount_fen >= 0),
    unfrozen_fen bigint     NOT NULL DEFAULT 0 CHECK (unfrozen_fen >= 0),
    -- PENDING (recorded), PROCESSING (sent), SUCCESS, FAILED (for an
    -- operator: tried again as a new attempt), SUPERSEDED (tried again).
    status      text        NOT NULL DEFAULT 'PENDING'
        CHECK (status IN ('PENDING', 'PROCESSING', 'SUCCESS', 'FAILED', 'SUPERSEDED')),
    wx_id       text,
    fail_reason text,
    sent_at     timestamptz,
    finished_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'return') = (refund_id IS NOT NULL))
);
-- One live share per payment and one live return per refund: what is
-- tried again supersedes what failed.
CREATE UNIQUE INDEX profit_sharings_one_share ON profit_sharings (payment_id)
    WHERE kind = 'share' AND status <> 'SUPERSEDED';
CREATE UNIQUE INDEX profit_sharings_one_return ON profit_sharings (refund_id)
    WHERE kind = 'return' AND status <> 'SUPERSEDED';
CREATE INDEX profit_sharings_order_idx ON profit_sharings (order_id);
CREATE INDEX profit_sharings_open_idx ON profit_sharings (status) WHERE status IN ('PENDING', 'PROCESSING', 'FAILED');

-- The ledger learns where shared money goes: to the platform's own
-- WeChat Pay account, or unfrozen to the merchant's.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check
    CHECK (kind IN ('sale', 'receipt', 'refund', 'fee', 'share', 'share_return'));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_account_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_account_check CHECK (account IN (
    'wechat_clearing', 'refunds_outside', 'wechat_fees_withheld', 'wechat_fees',
    'merchant_sales', 'merchant_discounts', 'merchant_refunds', 'merchant_commission',
    'platform_commission', 'platform_promotions', 'unexpected_receipts',
    'platform_shared',   -- asset: commission shared into the platform's WeChat Pay account
    'merchant_settled'   -- paid out: unfrozen into the sub-merchant's own account
));

-- +goose Down
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_account_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_account_check CHECK (account IN (
    'wechat_clearing', 'refunds_outside', 'wechat_fees_withheld', 'wechat_fees',
    'merchant_sales', 'merchant_discounts', 'merchant_refunds', 'merchant_commission',
    'platform_commission', 'platform_promotions', 'unexpected_receipts'));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check CHECK (kind IN ('sale', 'receipt', 'refund', 'fee'));
DROP TABLE profit_sharings;
ALTER TABLE payments DROP COLUMN profit_sharing, DROP COLUMN sub_appid, DROP COLUMN sub_mchid;
DROP INDEX merchants_sub_mchid_key;
ALTER TABLE merchants DROP COLUMN sub_appid, DROP COLUMN sub_mchid;
