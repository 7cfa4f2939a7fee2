-- ledger_post_refund posts a refund that ended, in the transaction that
-- records its end (a trigger): succeeded at WeChat Pay (the money leaves
-- wechat_clearing) or settled by an operator outside it
-- (refunds_outside). And, when a refund of a transaction we never
-- expected is recorded, the money that transaction brought in.
--
-- A refund of a sale takes back its part of everything the sale posted:
-- of R refunded out of P paid, each discount and the commission go back
-- in proportion, rounded on the running total (so the refund that gives
-- back the last fen gives back the last fen of each), and the merchant's
-- refunds account takes back the sale's worth of it (R and its
-- discounts). A refund of money received for no sale gives it back.
--
-- In service-provider mode a payment's money may have left WeChat's
-- frozen funds by profit sharing: a refund takes what is still frozen
-- for the payment first (wechat_clearing) and the rest from what was
-- unfrozen to the merchant (merchant_settled), as WeChat Pay does.
CREATE OR REPLACE FUNCTION ledger_post_refund() RETURNS trigger LANGUAGE plpgsql
AS $$
DECLARE
    o record;
    cash text := CASE NEW.status WHEN 'SETTLED' THEN 'refunds_outside' ELSE 'wechat_clearing' END;
    sale_kind text;
    paid bigint;
    merchant_disc bigint;
    platform_disc bigint;
    commission bigint;
    before bigint;
    after bigint;
    md bigint;
    pd bigint;
    cm bigint;
    frozen bigint;
    from_frozen bigint;
BEGIN
    SELECT id, merchant_id INTO o FROM orders WHERE id = NEW.order_id;
    IF TG_OP = 'INSERT' THEN
        -- A transaction we did not expect, now being given back: it came in.
        PERFORM ledger_post('txn:' || NEW.transaction_id, 'receipt', o.id, o.merchant_id, NULL, NULL, NEW.transaction_id,
            ARRAY['wechat_clearing', 'unexpected_receipts'], ARRAY[NEW.amount_fen, -NEW.amount_fen]);
        RETURN NULL;
    END IF;
    IF NEW.transaction_id IS NOT NULL THEN
        PERFORM ledger_post('refund:' || NEW.id, 'refund', o.id, o.merchant_id, NULL, NEW.id, NEW.out_refund_no,
            ARRAY[cash, 'unexpected_receipts'], ARRAY[-NEW.amount_fen, NEW.amount_fen]);
        RETURN NULL;
    END IF;
    SELECT min(e.kind),
           coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'wechat_clearing'), 0)::bigint,
           coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'merchant_discounts'), 0)::bigint,
           coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'platform_promotions'), 0)::bigint,
           coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'merchant_commission'), 0)::bigint
    INTO sale_kind, paid, merchant_disc, platform_disc, commission
    FROM ledger_entries e WHERE e.journal = 'pay:' || NEW.payment_id;
    IF sale_kind IS NULL THEN
        RAISE EXCEPTION 'ledger_post_refund: payment % of refund % was never posted', NEW.payment_id, NEW.out_refund_no
            USING ERRCODE = 'TK011';
    END IF;
    IF sale_kind = 'receipt' THEN
        PERFORM ledger_post('refund:' || NEW.id, 'refund', o.id, o.merchant_id, NEW.payment_id, NEW.id, NEW.out_refund_no,
            ARRAY[cash, 'unexpected_receipts'], ARRAY[-NEW.amount_fen, NEW.amount_fen]);
        RETURN NULL;
    END IF;
    -- What earlier refunds of this payment gave back.
    SELECT coalesce(-sum(e.amount_fen), 0)::bigint INTO before FROM ledger_entries e
    WHERE e.payment_id = NEW.payment_id AND e.kind = 'refund' AND e.account IN ('wechat_clearing', 'refunds_outside', 'merchant_settled');
    after := least(before + NEW.amount_fen, paid);
    md := merchant_disc * after / paid - merchant_disc * before / paid;
    pd := platform_disc * after / paid - platform_disc * before / paid;
    cm := commission * after / paid - commission * before / paid;
    from_frozen := NEW.amount_fen;
    IF cash = 'wechat_clearing' THEN
        SELECT coalesce(sum(e.amount_fen), 0)::bigint INTO frozen FROM ledger_entries e
        WHERE e.payment_id = NEW.payment_id AND e.account = 'wechat_clearing';
        from_frozen := least(greatest(frozen, 0), NEW.amount_fen);
    END IF;
    PERFORM ledger_post('refund:' || NEW.id, 'refund', o.id, o.merchant_id, NEW.payment_id, NEW.id, NEW.out_refund_no,
        ARRAY[cash, 'merchant_settled', 'merchant_refunds', 'merchant_discounts', 'platform_promotions', 'merchant_commission', 'platform_commission'],
        ARRAY[-from_frozen, from_frozen - NEW.amount_fen, NEW.amount_fen + md + pd, -md, -pd, -cm, cm]);
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER refunds_ledger AFTER UPDATE OF status ON refunds
    FOR EACH ROW WHEN (NEW.status IN ('SUCCESS', 'SETTLED') AND OLD.status NOT IN ('SUCCESS', 'SETTLED'))
    EXECUTE FUNCTION ledger_post_refund();

CREATE OR REPLACE TRIGGER refunds_ledger_receipt AFTER INSERT ON refunds
    FOR EACH ROW WHEN (NEW.transaction_id IS NOT NULL)
    EXECUTE FUNCTION ledger_post_refund();
