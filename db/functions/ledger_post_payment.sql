-- ledger_post_payment posts a payment that succeeded, in the transaction
-- that marks it paid (a trigger: every path that settles a payment, the
-- one-statement payment_settle and the transaction path alike, writes it).
--
-- The first payment of an order is its sale: WeChat holds what was paid,
-- the order was worth that plus its discounts, each discount is charged
-- to who funds it, and the platform's commission (the merchant's rate, in
-- basis points of what it sells at after its own discounts) moves from
-- the merchant to the platform. Any later payment of the same order (paid
-- twice) is money received for no sale, owed back: the refund that
-- follows gives it back.
CREATE OR REPLACE FUNCTION ledger_post_payment() RETURNS trigger LANGUAGE plpgsql
AS $$
DECLARE
    o record;
    bps integer;
    sold_at bigint;
    commission bigint;
BEGIN
    -- The order's row orders two payments of one order succeeding at once
    -- (the settle path holds it already).
    SELECT id, merchant_id, merchant_discount_fen, platform_discount_fen INTO o
    FROM orders WHERE id = NEW.order_id FOR NO KEY UPDATE;
    IF EXISTS (SELECT 1 FROM ledger_entries e WHERE e.order_id = o.id AND e.kind = 'sale' AND e.payment_id <> NEW.id) THEN
        PERFORM ledger_post('pay:' || NEW.id, 'receipt', o.id, o.merchant_id, NEW.id, NULL, NEW.out_trade_no,
            ARRAY['wechat_clearing', 'unexpected_receipts'], ARRAY[NEW.amount_fen, -NEW.amount_fen]);
        RETURN NULL;
    END IF;
    SELECT commission_bps INTO bps FROM merchants WHERE id = o.merchant_id;
    sold_at := NEW.amount_fen + o.platform_discount_fen;
    commission := sold_at * bps / 10000;
    PERFORM ledger_post('pay:' || NEW.id, 'sale', o.id, o.merchant_id, NEW.id, NULL, NEW.out_trade_no,
        ARRAY['wechat_clearing', 'platform_promotions', 'merchant_discounts', 'merchant_sales', 'merchant_commission', 'platform_commission'],
        ARRAY[NEW.amount_fen, o.platform_discount_fen, o.merchant_discount_fen, -(sold_at + o.merchant_discount_fen), commission, -commission]);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER payments_ledger AFTER UPDATE OF status ON payments
    FOR EACH ROW WHEN (NEW.status = 'SUCCESS' AND OLD.status IN ('CREATED', 'CLOSED'))
    EXECUTE FUNCTION ledger_post_payment();

-- A payment written already paid (none of takeout's paths does; a
-- repair by hand might) is posted all the same.
CREATE OR REPLACE TRIGGER payments_ledger_insert AFTER INSERT ON payments
    FOR EACH ROW WHEN (NEW.status = 'SUCCESS')
    EXECUTE FUNCTION ledger_post_payment();
