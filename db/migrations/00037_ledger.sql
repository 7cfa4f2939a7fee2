-- +goose Up
-- The ledger: every money movement as balanced entries (debits positive,
-- credits negative; each journal sums to zero), written by the
-- transaction of the event that causes it (db/functions/ledger.sql: the
-- payment that succeeds, the refund that succeeds or is settled). A
-- journal is one event, named once ("pay:<payment>", "refund:<refund>",
-- "txn:<transaction>", "fee:<transaction>"): posting it twice writes
-- nothing more.
CREATE TABLE ledger_entries (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    journal     text        NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('sale', 'receipt', 'refund', 'fee')),
    account     text        NOT NULL CHECK (account IN (
        'wechat_clearing',      -- asset: money WeChat Pay holds for us
        'refunds_outside',      -- asset given back outside WeChat (a settled refund)
        'wechat_fees_withheld', -- contra-asset: what WeChat keeps of it as fees
        'wechat_fees',          -- expense: WeChat Pay's fees
        'merchant_sales',       -- merchant: what the orders were worth (credit)
        'merchant_discounts',   -- merchant: discounts the merchant funds
        'merchant_refunds',     -- merchant: what refunds took back of the sales
        'merchant_commission',  -- merchant: commission charged by the platform
        'platform_commission',  -- platform: commission earned (credit)
        'platform_promotions',  -- platform: discounts the platform funds
        'unexpected_receipts'   -- liability: money received for no sale (a second payment), owed back
    )),
    amount_fen  bigint      NOT NULL CHECK (amount_fen <> 0),
    order_id    bigint      NOT NULL REFERENCES orders (id),
    merchant_id bigint      NOT NULL REFERENCES merchants (id),
    payment_id  bigint      REFERENCES payments (id),
    refund_id   bigint      REFERENCES refunds (id),
    -- What the platform calls it: out_trade_no, out_refund_no, transaction_id.
    ref         text        NOT NULL,
    posted_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (journal, account)
);
CREATE INDEX ledger_entries_order_idx ON ledger_entries (order_id);
CREATE INDEX ledger_entries_payment_idx ON ledger_entries (payment_id) WHERE payment_id IS NOT NULL;
CREATE INDEX ledger_entries_merchant_idx ON ledger_entries (merchant_id, posted_at);

-- The platform's commission on a merchant's sales, in basis points of
-- what the merchant sells at (after its own discounts), fixed on each
-- sale when it is paid.
ALTER TABLE merchants ADD COLUMN commission_bps integer NOT NULL DEFAULT 0
    CHECK (commission_bps BETWEEN 0 AND 5000);

-- +goose Down
ALTER TABLE merchants DROP COLUMN commission_bps;
DROP TABLE ledger_entries;
