-- ledger_post_delivery posts what a courier provider charges for an
-- order, in the transaction that records it (a trigger on deliveries):
-- the fee and tip of a delivery made, the fee of one cancelled after a
-- rider took it. Each is owed to the provider (courier_payable) and costs
-- the merchant (merchant_courier_fees). The journal is named by the
-- delivery, so a status written again posts nothing more.
CREATE OR REPLACE FUNCTION ledger_post_delivery() RETURNS trigger LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.status = 'DELIVERED' THEN
        PERFORM ledger_post('courier:' || NEW.id, 'courier_fee', NEW.order_id, NEW.merchant_id, NULL, NULL, NEW.out_no,
            ARRAY['merchant_courier_fees', 'courier_payable'],
            ARRAY[coalesce(NEW.fee_fen, 0) + NEW.tip_fen, -(coalesce(NEW.fee_fen, 0) + NEW.tip_fen)]);
    ELSIF NEW.cancel_fee_fen > 0 THEN
        PERFORM ledger_post('courier_cancel:' || NEW.id, 'courier_cancel_fee', NEW.order_id, NEW.merchant_id, NULL, NULL, NEW.out_no,
            ARRAY['merchant_courier_fees', 'courier_payable'], ARRAY[NEW.cancel_fee_fen, -NEW.cancel_fee_fen]);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER deliveries_ledger AFTER UPDATE OF status ON deliveries
    FOR EACH ROW WHEN (NEW.status IN ('DELIVERED', 'CANCELLED', 'FAILED') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION ledger_post_delivery();
