-- ledger_post_sharing posts a profit-sharing request that succeeded, in
-- the transaction that records its success (a trigger on
-- profit_sharings):
--
-- a share moves the payment's frozen money out of WeChat's clearing: the
-- commission into the platform's own account (platform_shared), the rest
-- unfrozen into the merchant's (merchant_settled); a return (回退) brings
-- commission back from the platform's account to the merchant's, so that
-- the refund that needed it can leave from there.
CREATE OR REPLACE FUNCTION ledger_post_sharing() RETURNS trigger LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.kind = 'share' THEN
        PERFORM ledger_post('share:' || NEW.id, 'share', NEW.order_id, NEW.merchant_id, NEW.payment_id, NULL, NEW.out_no,
            ARRAY['wechat_clearing', 'platform_shared', 'merchant_settled'],
            ARRAY[-(NEW.amount_fen + NEW.unfrozen_fen), NEW.amount_fen, NEW.unfrozen_fen]);
    ELSE
        PERFORM ledger_post('return:' || NEW.id, 'share_return', NEW.order_id, NEW.merchant_id, NEW.payment_id, NEW.refund_id, NEW.out_no,
            ARRAY['platform_shared', 'merchant_settled'], ARRAY[-NEW.amount_fen, NEW.amount_fen]);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER profit_sharings_ledger AFTER UPDATE OF status ON profit_sharings
    FOR EACH ROW WHEN (NEW.status = 'SUCCESS' AND OLD.status <> 'SUCCESS')
    EXECUTE FUNCTION ledger_post_sharing();
