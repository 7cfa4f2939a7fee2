-- payment_settle_grouped applies a successful payment in one statement:
-- the notification, the payment marked paid, its order moved from
-- o_from_status to o_to_status (the state table's, for a payment), the
-- history row and, when e_type is not null, the outbox event rendered
-- from the order as written. An order made PAID gets its accept deadline
-- in the same UPDATE, as the transaction path's OrderTransition writes
-- it, and its due row for the sweep, as runEffects inserts it. It answers:
--   'applied';
--   'duplicate': the notification was seen before, or the payment was
--       already paid by this transaction (nothing else changed);
--   'transaction', having written nothing: the payment is not the one the
--       caller describes (unknown, another amount, app or currency, paid
--       by another transaction): the api's transaction path decides,
--       recording anomalies and refunds;
--   'moved', having written nothing: the payment is unpaid and its order
--       is no longer at o_from_status: the transaction path decides.
-- It takes no subtransaction, so that it can be committed with other
-- payments in one group (db.Group) and answer its own outcome alone.
CREATE OR REPLACE FUNCTION payment_settle_grouped(
    p_channel text, p_mchid text, p_out_trade_no text, p_appid text, p_sub_mchid text, p_amount_fen bigint, p_currency text,
    n_notification_id text, n_transaction_id text, p_paid_at timestamptz,
    o_from_status text, o_to_status text, o_updated_at timestamptz,
    h_actor text, h_reason text, e_type text
) RETURNS text LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    pay_id bigint;
    pay_order_id bigint;
    pay_appid text;
    pay_sub_mchid text;
    pay_amount_fen bigint;
    pay_currency text;
    pay_status text;
    pay_transaction_id text;
    o_status text;
    m_accept_within integer;
    m_accept_then text;
    o orders%ROWTYPE;
BEGIN
    -- The payment and its order, both locked (in that order, as before),
    -- and the merchant's accept rule, read and not locked.
    SELECT p.id, p.order_id, p.appid, p.sub_mchid, p.amount_fen, p.currency, p.status, p.transaction_id, od.status,
           m.accept_within_seconds, m.accept_timeout_action
    INTO pay_id, pay_order_id, pay_appid, pay_sub_mchid, pay_amount_fen, pay_currency, pay_status, pay_transaction_id, o_status,
         m_accept_within, m_accept_then
    FROM payments p JOIN orders od ON od.id = p.order_id JOIN merchants m ON m.id = od.merchant_id
    WHERE p.channel = p_channel AND p.mchid = p_mchid AND p.out_trade_no = p_out_trade_no
    FOR UPDATE OF p, od;
    IF NOT FOUND OR pay_appid <> p_appid OR pay_sub_mchid IS DISTINCT FROM nullif(p_sub_mchid, '')
        OR pay_amount_fen <> p_amount_fen
        OR (p_currency <> '' AND pay_currency <> p_currency)
        OR (pay_status NOT IN ('CREATED', 'CLOSED') AND pay_transaction_id IS DISTINCT FROM n_transaction_id) THEN
        RETURN 'transaction';
    END IF;
    IF pay_status IN ('CREATED', 'CLOSED') AND o_status <> o_from_status THEN
        RETURN 'moved';
    END IF;
    INSERT INTO payment_notifications (channel, notification_id, transaction_id, event_type, order_id, outcome)
    VALUES (p_channel, n_notification_id, n_transaction_id, 'TRANSACTION.SUCCESS', pay_order_id, 'SUCCESS')
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'duplicate';
    END IF;
    UPDATE payments SET status = 'SUCCESS', transaction_id = n_transaction_id, paid_at = p_paid_at, updated_at = now()
    WHERE id = pay_id AND status IN ('CREATED', 'CLOSED');
    IF NOT FOUND THEN
        RETURN 'duplicate'; -- paid by this transaction already (the query got there first)
    END IF;
    -- Paid: the accept deadline starts (the state table's
    -- start_accept_deadline on pay), from the merchant's rule as it is.
    UPDATE orders SET status = o_to_status, version = version + 1, updated_at = o_updated_at,
        accept_by = CASE WHEN o_to_status = 'PAID' AND m_accept_within > 0
            THEN o_updated_at + make_interval(secs => m_accept_within) ELSE accept_by END,
        accept_then = CASE WHEN o_to_status = 'PAID' AND m_accept_within > 0
            THEN m_accept_then ELSE accept_then END
    WHERE id = pay_order_id AND status = o_from_status
    RETURNING * INTO o;
    IF NOT FOUND THEN -- not after the check above, under the lock; kept as the guard it was
        RAISE EXCEPTION 'payment_settle: order % is not %', pay_order_id, o_from_status
            USING ERRCODE = 'TK002';
    END IF;
    IF o.accept_by IS NOT NULL AND o_to_status = 'PAID' THEN
        -- The deadline's due row, for the sweep (AcceptDeadlineInsert).
        INSERT INTO order_accept_deadlines (order_id, accept_by) VALUES (o.id, o.accept_by);
    END IF;
    INSERT INTO order_status_history (order_id, from_status, to_status, version, actor, reason)
    VALUES (o.id, o_from_status, o_to_status, o.version, h_actor, h_reason);
    IF e_type IS NOT NULL THEN
        INSERT INTO order_events (event_id, merchant_id, order_id, type, body)
        VALUES (o.id || ':' || e_type || ':' || o.version, o.merchant_id, o.id, e_type, order_event_json(o, e_type));
    END IF;
    RETURN 'applied';
END
$$;
