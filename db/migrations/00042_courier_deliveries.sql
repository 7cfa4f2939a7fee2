-- +goose Up
-- Delivery by courier providers (Dada-like, Meituan-like). A merchant
-- chooses when its delivery orders go to a courier: never (the merchant
-- dispatches them itself), when it accepts them, or when the food is
-- ready.
ALTER TABLE merchants
    ADD COLUMN courier_dispatch text NOT NULL DEFAULT 'off' CHECK (courier_dispatch IN ('off', 'accept', 'ready'));

-- One row per placement of an order with a provider. A placement that
-- no rider takes in time, or that the provider fails, is cancelled and
-- the order placed again as the next attempt (with the other provider):
-- an order has at most one active delivery (deliveries_one_active).
-- Statuses only move forward (courier.Table): an update is applied when
-- it is newer than the last one (provider_time) and not behind it.
CREATE TABLE deliveries (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id       bigint      NOT NULL REFERENCES orders (id),
    merchant_id    bigint      NOT NULL REFERENCES merchants (id),
    attempt        integer     NOT NULL CHECK (attempt BETWEEN 1 AND 9),
    provider       text        NOT NULL CHECK (provider IN ('dada', 'meituan')),
    -- Our number of the placement at the provider (Dada's origin_id,
    -- Meituan's order_id), and the provider's own.
    out_no         text        NOT NULL UNIQUE,
    provider_ref   text,
    status         text        NOT NULL DEFAULT 'QUOTED' CHECK (status IN (
        'QUOTED', 'PLACED', 'ASSIGNED', 'ARRIVED', 'PICKED_UP', 'DELIVERED', 'CANCELLED', 'FAILED')),
    -- The quote placed on (Dada's deliveryNo), and what the provider
    -- charges: fee_fen (with tip_fen) when it delivers, cancel_fee_fen
    -- when it was cancelled after a rider took it.
    quote_token    text,
    quote_expires  timestamptz,
    fee_fen        bigint      CHECK (fee_fen >= 0),
    tip_fen        bigint      NOT NULL DEFAULT 0 CHECK (tip_fen >= 0),
    cancel_fee_fen bigint      NOT NULL DEFAULT 0 CHECK (cancel_fee_fen >= 0),
    rider_id       text        NOT NULL DEFAULT '',
    rider_name     text        NOT NULL DEFAULT '',
    rider_phone    text        NOT NULL DEFAULT '',
    latitude       double precision,
    longitude      double precision,
    located_at     timestamptz,
    -- The provider's time of the last update applied, and how many were.
    provider_time  timestamptz,
    seq            integer     NOT NULL DEFAULT 0,
    -- A placement no rider took by assign_by is tipped (once) or placed
    -- again elsewhere; heard_at is when we last learned anything of it,
    -- for the sweep that asks about deliveries whose callbacks are late.
    assign_by      timestamptz,
    -- A placement whose answer never came: until the provider says it
    -- has no such order, a later refusal does not prove it unplaced.
    place_unsure   boolean     NOT NULL DEFAULT false,
    heard_at       timestamptz NOT NULL DEFAULT now(),
    reason         text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (order_id, attempt)
);
CREATE UNIQUE INDEX deliveries_one_active ON deliveries (order_id)
    WHERE status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED');
CREATE INDEX deliveries_open_idx ON deliveries (heard_at)
    WHERE status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED');
CREATE INDEX deliveries_merchant_idx ON deliveries (merchant_id, created_at);

-- Every update applied to a delivery, in order: a status reached, or a
-- rider reassigned. seq is the delivery's count; a status never goes
-- backward along it.
CREATE TABLE delivery_events (
    delivery_id   bigint      NOT NULL REFERENCES deliveries (id),
    seq           integer     NOT NULL,
    order_id      bigint      NOT NULL,
    kind          text        NOT NULL CHECK (kind IN ('status', 'reassigned')),
    status        text        NOT NULL,
    rider_name    text        NOT NULL DEFAULT '',
    provider_time timestamptz,
    source        text        NOT NULL CHECK (source IN ('callback', 'query', 'system')),
    at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (delivery_id, seq)
);

-- The ledger learns what couriers cost the merchant: the fee (and tip) of
-- a delivery made, the fee of one cancelled after a rider took it, both
-- owed to the provider.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check
    CHECK (kind IN ('sale', 'receipt', 'refund', 'fee', 'share', 'share_return', 'courier_fee', 'courier_cancel_fee'));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_account_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_account_check CHECK (account IN (
    'wechat_clearing', 'refunds_outside', 'wechat_fees_withheld', 'wechat_fees',
    'merchant_sales', 'merchant_discounts', 'merchant_refunds', 'merchant_commission',
    'platform_commission', 'platform_promotions', 'unexpected_receipts',
    'platform_shared', 'merchant_settled',
    'merchant_courier_fees', -- merchant: what couriers charged for its orders (debit)
    'courier_payable'        -- liability: owed to the courier providers (credit)
));

-- +goose Down
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_account_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_account_check CHECK (account IN (
    'wechat_clearing', 'refunds_outside', 'wechat_fees_withheld', 'wechat_fees',
    'merchant_sales', 'merchant_discounts', 'merchant_refunds', 'merchant_commission',
    'platform_commission', 'platform_promotions', 'unexpected_receipts',
    'platform_shared', 'merchant_settled'));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check
    CHECK (kind IN ('sale', 'receipt', 'refund', 'fee', 'share', 'share_return'));
DROP TABLE delivery_events;
DROP TABLE deliveries;
ALTER TABLE merchants DROP COLUMN courier_dispatch;
