-- +goose Up
-- payment_succeed applies a successful payment in one statement: the
-- notification, the payment marked paid, the order's transition (the
-- status and version the caller read, to the status the state table
-- gave), its history row and its outbox event (rendered by the caller
-- from the order as read, as it will be after the transition). One
-- statement is one round trip and its own transaction, where the
-- transaction path costs eight (docs/performance.md, second round).
--
-- It returns 'applied'; 'duplicate' when the notification was seen before
-- (by id, or by transaction and event) or the payment was already paid by
-- this transaction, having changed nothing else; 'transaction', having
-- written nothing, when the payment is not the one the caller expects
-- (unknown, another order's, another amount, app or currency, or paid by
-- another transaction): the caller then runs the transaction path, which
-- records anomalies and refunds. When the order is no longer at the
-- status and version the caller read, it raises SQLSTATE TK002 and the
-- statement rolls back whole: the transaction path decides again.
-- +goose StatementBegin
CREATE FUNCTION payment_succeed(
    p_channel text, p_mchid text, p_out_trade_no text, p_appid text, p_amount_fen bigint, p_currency text,
    n_notification_id text, n_transaction_id text, p_paid_at timestamptz,
    o_id bigint, o_from_status text, o_to_status text, o_version bigint, o_updated_at timestamptz,
    h_actor text, h_reason text, e_event_id text, e_type text, e_body json
) RETURNS text LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    pay payments%ROWTYPE;
    merchant bigint;
BEGIN
    SELECT * INTO pay FROM payments
    WHERE channel = p_channel AND mchid = p_mchid AND out_trade_no = p_out_trade_no
    FOR UPDATE;
    IF NOT FOUND OR pay.order_id <> o_id OR pay.appid <> p_appid OR pay.amount_fen <> p_amount_fen
        OR (p_currency <> '' AND pay.currency <> p_currency)
        OR (pay.status NOT IN ('CREATED', 'CLOSED') AND pay.transaction_id IS DISTINCT FROM n_transaction_id) THEN
        RETURN 'transaction';
    END IF;
    INSERT INTO payment_notifications (channel, notification_id, transaction_id, event_type, order_id, outcome)
    VALUES (p_channel, n_notification_id, n_transaction_id, 'TRANSACTION.SUCCESS', o_id, 'SUCCESS')
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'duplicate';
    END IF;
    UPDATE payments SET status = 'SUCCESS', transaction_id = n_transaction_id, paid_at = p_paid_at, updated_at = now()
    WHERE id = pay.id AND status IN ('CREATED', 'CLOSED');
    IF NOT FOUND THEN
        RETURN 'duplicate'; -- paid by this transaction already (the query got there first)
    END IF;
    UPDATE orders SET status = o_to_status, version = version + 1, updated_at = o_updated_at
    WHERE id = o_id AND status = o_from_status AND version = o_version
    RETURNING merchant_id INTO merchant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment_succeed: order % is no longer % at version %', o_id, o_from_status, o_version
            USING ERRCODE = 'TK002';
    END IF;
    INSERT INTO order_status_history (order_id, from_status, to_status, version, actor, reason)
    VALUES (o_id, o_from_status, o_to_status, o_version + 1, h_actor, h_reason);
    IF e_event_id IS NOT NULL THEN
        INSERT INTO order_events (event_id, merchant_id, order_id, type, body)
        VALUES (e_event_id, merchant, o_id, e_type, e_body);
    END IF;
    RETURN 'applied';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION payment_succeed;
