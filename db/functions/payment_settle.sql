-- payment_settle is payment_settle_grouped for a payment settled alone:
-- 'moved' is raised as SQLSTATE TK002, rolling the statement back.
CREATE OR REPLACE FUNCTION payment_settle(
    p_channel text, p_mchid text, p_out_trade_no text, p_appid text, p_sub_mchid text, p_amount_fen bigint, p_currency text,
    n_notification_id text, n_transaction_id text, p_paid_at timestamptz,
    o_from_status text, o_to_status text, o_updated_at timestamptz,
    h_actor text, h_reason text, e_type text
) RETURNS text LANGUAGE plpgsql
AS $$
DECLARE
    outcome text;
BEGIN
    outcome := payment_settle_grouped(p_channel, p_mchid, p_out_trade_no, p_appid, p_sub_mchid, p_amount_fen, p_currency,
                                      n_notification_id, n_transaction_id, p_paid_at,
                                      o_from_status, o_to_status, o_updated_at, h_actor, h_reason, e_type);
    IF outcome = 'moved' THEN
        RAISE EXCEPTION 'payment_settle: the order of % is not %', p_out_trade_no, o_from_status
            USING ERRCODE = 'TK002';
    END IF;
    RETURN outcome;
END
$$;
