-- +goose Up
-- payment_settle is payment_succeed (migration 00021) without the read
-- before it: it moves the order it finds under the payment's lock from
-- the status the state table names for a payment, and renders the
-- order's event itself, from the order as it writes it. A callback is
-- then one round trip, not two (docs/performance.md, second round).
--
-- The event is the one the api renders (webhook.Event around order.Order,
-- internal/order): the same keys and values, ids as strings and times as
-- Go writes them (json_time); TestSettledEventIsTheOneTheAPIRenders holds
-- the two together.
--
-- payment_succeed and payment_succeed_grouped stay beside them: instances
-- of the previous release, still running during a rolling deploy, call
-- them. A later migration drops them.

-- json_time is t as Go's encoding/json writes a UTC time.Time: RFC 3339
-- with the fraction's trailing zeros cut, and none when it is zero.
-- +goose StatementBegin
CREATE FUNCTION json_time(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
    || rtrim(rtrim(to_char(t AT TIME ZONE 'UTC', '.US'), '0'), '.') || 'Z';
-- +goose StatementEnd

-- order_event_json is the outbox body of event e_type of the order o, as
-- written: the event's envelope and the order's snapshot with its lines.
-- PL/pgSQL, not SQL: a session keeps its plans, where a SQL function
-- called from another function is planned again at every call (0.3 ms
-- here, more than the rest of payment_settle); and the lines are read
-- apart, so that the object is a simple expression and not a query with
-- a subquery (40 µs a call against 120, measured in a loop of 2,000).
-- +goose StatementBegin
CREATE FUNCTION order_event_json(o orders, e_type text) RETURNS json
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    items json;
BEGIN
    SELECT coalesce(json_agg(json_build_object(
            'line', i.line,
            'dish_id', i.dish_id::text,
            'name', i.name,
            'options', i.options,
            'qty', i.qty,
            'unit_price_fen', i.unit_price_fen,
            'line_total_fen', i.line_total_fen,
            'packaging_fee_fen', i.packaging_fee_fen,
            'refunded_qty', i.refunded_qty
        ) ORDER BY i.line), '[]')
    INTO items
    FROM order_items i WHERE i.order_id = o.id;
    RETURN json_build_object(
        'id', o.id || ':' || e_type || ':' || o.version,
        'type', e_type,
        'order_id', o.id::text,
        'merchant_id', o.merchant_id::text,
        'status', o.status,
        'version', o.version,
        'occurred_at', json_time(o.updated_at),
        'order', json_build_object(
            'id', o.id::text,
            'user_id', o.user_id::text,
            'merchant_id', o.merchant_id::text,
            'status', o.status,
            'items', items,
            'items_total_fen', o.items_total_fen,
            'packaging_fee_fen', o.packaging_fee_fen,
            'delivery_fee_fen', o.delivery_fee_fen,
            'total_fen', o.total_fen,
            -- order.Address: its three fields always, the location when set.
            'address', jsonb_build_object(
                    'name', coalesce(o.address ->> 'name', ''),
                    'phone', coalesce(o.address ->> 'phone', ''),
                    'detail', coalesce(o.address ->> 'detail', ''))
                || CASE WHEN jsonb_typeof(o.address -> 'location') = 'object'
                    THEN jsonb_build_object('location', o.address -> 'location') ELSE '{}' END,
            'remark', o.remark,
            'version', o.version,
            'pay_deadline', json_time(o.pay_deadline),
            'created_at', json_time(o.created_at),
            'updated_at', json_time(o.updated_at)));
END
$$;
-- +goose StatementEnd

-- payment_settle applies a successful payment in one statement: the
-- notification, the payment marked paid, its order moved from o_from_status
-- to o_to_status (the state table's, for a payment), the history row and,
-- when e_type is not null, the outbox event. It returns what
-- payment_succeed returns: 'applied'; 'duplicate' (nothing else changed);
-- 'transaction', having written nothing, when the payment is not the one
-- the caller describes; and raises TK002, the statement rolling back whole,
-- when the order is not at o_from_status: the transaction path decides.
-- +goose StatementBegin
CREATE FUNCTION payment_settle(
    p_channel text, p_mchid text, p_out_trade_no text, p_appid text, p_amount_fen bigint, p_currency text,
    n_notification_id text, n_transaction_id text, p_paid_at timestamptz,
    o_from_status text, o_to_status text, o_updated_at timestamptz,
    h_actor text, h_reason text, e_type text
) RETURNS text LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    pay payments%ROWTYPE;
    o orders%ROWTYPE;
BEGIN
    SELECT * INTO pay FROM payments
    WHERE channel = p_channel AND mchid = p_mchid AND out_trade_no = p_out_trade_no
    FOR UPDATE;
    IF NOT FOUND OR pay.appid <> p_appid OR pay.amount_fen <> p_amount_fen
        OR (p_currency <> '' AND pay.currency <> p_currency)
        OR (pay.status NOT IN ('CREATED', 'CLOSED') AND pay.transaction_id IS DISTINCT FROM n_transaction_id) THEN
        RETURN 'transaction';
    END IF;
    INSERT INTO payment_notifications (channel, notification_id, transaction_id, event_type, order_id, outcome)
    VALUES (p_channel, n_notification_id, n_transaction_id, 'TRANSACTION.SUCCESS', pay.order_id, 'SUCCESS')
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
    WHERE id = pay.order_id AND status = o_from_status
    RETURNING * INTO o;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment_settle: order % is not %', pay.order_id, o_from_status
            USING ERRCODE = 'TK002';
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
-- +goose StatementEnd

-- payment_settle_grouped is payment_settle for a payment committed with
-- others (as payment_succeed_grouped, migration 00025): moved for TK002,
-- with nothing of this payment written.
-- +goose StatementBegin
CREATE FUNCTION payment_settle_grouped(
    p_channel text, p_mchid text, p_out_trade_no text, p_appid text, p_amount_fen bigint, p_currency text,
    n_notification_id text, n_transaction_id text, p_paid_at timestamptz,
    o_from_status text, o_to_status text, o_updated_at timestamptz,
    h_actor text, h_reason text, e_type text
) RETURNS text LANGUAGE plpgsql
AS $$
BEGIN
    RETURN payment_settle(p_channel, p_mchid, p_out_trade_no, p_appid, p_amount_fen, p_currency,
                          n_notification_id, n_transaction_id, p_paid_at,
                          o_from_status, o_to_status, o_updated_at, h_actor, h_reason, e_type);
EXCEPTION WHEN SQLSTATE 'TK002' THEN
    RETURN 'moved';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION payment_settle_grouped;
DROP FUNCTION payment_settle;
DROP FUNCTION order_event_json;
DROP FUNCTION json_time;
