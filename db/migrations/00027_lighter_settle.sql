-- +goose Up
-- A payment success committed with others (payment_settle_grouped) ran
-- payment_settle in a subtransaction, only to undo the notification and
-- the payment it had written when the order turned out not to be waiting
-- for payment. It now reads the order's status under the lock it takes on
-- the payment, before it writes anything, and answers moved without a
-- subtransaction; payment_settle raises TK002 on that answer, as before.
-- The outcomes are the ones migration 00026 gave, but for one: a payment
-- not yet paid whose order moved answers moved before its notification
-- is looked at, where it could answer duplicate; the api's transaction
-- path, which moved sends it to, answers the same (docs/performance.md,
-- change 11).
--
-- The rows an order writes about itself named it by a foreign key: its
-- lines, its stock reservations and its history. They are written in the
-- statement that writes the order, or under the lock of the order they
-- move, and orders are never deleted, so the keys checked nothing: they
-- cost a referential query and a KEY SHARE lock of the order for every
-- line, reservation and transition. A delete of an order is refused by a
-- trigger instead.
ALTER TABLE order_status_history DROP CONSTRAINT order_status_history_order_id_fkey;
ALTER TABLE order_items DROP CONSTRAINT order_items_order_id_fkey;
ALTER TABLE stock_reservations DROP CONSTRAINT stock_reservations_order_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION refuse_delete_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'order % is kept', OLD.id USING ERRCODE = 'foreign_key_violation';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER orders_kept BEFORE DELETE ON orders FOR EACH ROW EXECUTE FUNCTION refuse_delete_order();

-- A transition's history row and a payment's notification are found by
-- their natural keys, never by their ids: those keys become the primary
-- keys, and the index of the ids, which only cost an insertion into it on
-- every transition and every notification, goes. (The ids stay, in their
-- columns.) The notification's key keeps its name, which instances of the
-- previous release check at start and in /readyz (db.RequiredUniqueIndexes).
ALTER TABLE order_status_history DROP CONSTRAINT order_status_history_pkey,
    DROP CONSTRAINT order_status_history_order_version_key,
    ADD CONSTRAINT order_status_history_pkey PRIMARY KEY (order_id, version);
ALTER TABLE payment_notifications DROP CONSTRAINT payment_notifications_pkey,
    DROP CONSTRAINT payment_notifications_channel_id_key,
    ADD CONSTRAINT payment_notifications_channel_id_key PRIMARY KEY (channel, notification_id);

-- json_time calls to_char, which is stable: declared immutable, it could
-- not be inlined, and each of an event's four times ran as a SQL function
-- of its own (an executor started for each). Stable, it is inlined into
-- order_event_json's expression.
ALTER FUNCTION json_time(timestamptz) STABLE;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payment_settle_grouped(
    p_channel text, p_mchid text, p_out_trade_no text, p_appid text, p_amount_fen bigint, p_currency text,
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
    pay_amount_fen bigint;
    pay_currency text;
    pay_status text;
    pay_transaction_id text;
    o_status text;
    o orders%ROWTYPE;
BEGIN
    -- The payment and its order, both locked (in that order, as before).
    SELECT p.id, p.order_id, p.appid, p.amount_fen, p.currency, p.status, p.transaction_id, od.status
    INTO pay_id, pay_order_id, pay_appid, pay_amount_fen, pay_currency, pay_status, pay_transaction_id, o_status
    FROM payments p JOIN orders od ON od.id = p.order_id
    WHERE p.channel = p_channel AND p.mchid = p_mchid AND p.out_trade_no = p_out_trade_no
    FOR UPDATE;
    IF NOT FOUND OR pay_appid <> p_appid OR pay_amount_fen <> p_amount_fen
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
    UPDATE orders SET status = o_to_status, version = version + 1, updated_at = o_updated_at
    WHERE id = pay_order_id AND status = o_from_status
    RETURNING * INTO o;
    IF NOT FOUND THEN -- not after the check above, under the lock; kept as the guard it was
        RAISE EXCEPTION 'payment_settle: order % is not %', pay_order_id, o_from_status
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payment_settle(
    p_channel text, p_mchid text, p_out_trade_no text, p_appid text, p_amount_fen bigint, p_currency text,
    n_notification_id text, n_transaction_id text, p_paid_at timestamptz,
    o_from_status text, o_to_status text, o_updated_at timestamptz,
    h_actor text, h_reason text, e_type text
) RETURNS text LANGUAGE plpgsql
AS $$
DECLARE
    outcome text;
BEGIN
    outcome := payment_settle_grouped(p_channel, p_mchid, p_out_trade_no, p_appid, p_amount_fen, p_currency,
                                      n_notification_id, n_transaction_id, p_paid_at,
                                      o_from_status, o_to_status, o_updated_at, h_actor, h_reason, e_type);
    IF outcome = 'moved' THEN
        RAISE EXCEPTION 'payment_settle: the order of % is not %', p_out_trade_no, o_from_status
            USING ERRCODE = 'TK002';
    END IF;
    RETURN outcome;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER FUNCTION json_time(timestamptz) IMMUTABLE;
ALTER TABLE payment_notifications DROP CONSTRAINT payment_notifications_channel_id_key,
    ADD CONSTRAINT payment_notifications_pkey PRIMARY KEY (id),
    ADD CONSTRAINT payment_notifications_channel_id_key UNIQUE (channel, notification_id);
ALTER TABLE order_status_history DROP CONSTRAINT order_status_history_pkey,
    ADD CONSTRAINT order_status_history_pkey PRIMARY KEY (id),
    ADD CONSTRAINT order_status_history_order_version_key UNIQUE (order_id, version);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payment_settle(
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
        RETURN 'duplicate';
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payment_settle_grouped(
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
DROP TRIGGER orders_kept ON orders;
DROP FUNCTION refuse_delete_order;
ALTER TABLE stock_reservations ADD CONSTRAINT stock_reservations_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders (id);
ALTER TABLE order_items ADD CONSTRAINT order_items_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders (id);
ALTER TABLE order_status_history ADD CONSTRAINT order_status_history_order_id_fkey FOREIGN KEY (order_id) REFERENCES orders (id);
