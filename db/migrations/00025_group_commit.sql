-- +goose Up
-- Group commit (db.Group; docs/performance.md, change 7): the api sends
-- the one-statement changes that arrive while earlier ones are being
-- committed as one pipeline, one statement each, in one implicit
-- transaction: one round trip and one commit for the group. These two
-- functions are order_place and payment_succeed for a change committed
-- with others: each runs in a subtransaction that catches the error that
-- concerns its own change alone, so that the change's rows are undone
-- and its neighbours' kept, and answers it as an outcome; the api then
-- makes that change by its statement-by-statement path. Any other error
-- fails the whole group, and the api makes each of its changes alone.
-- A group holds at most 64 changes: more subtransactions than that
-- overflow each backend's cache of them and slow every snapshot.
--
-- order_place_grouped returns 1 when placed, 0 when the order exists (nothing written), -1
-- when a line found no free shard at the quoted terms (nothing written).
-- +goose StatementBegin
CREATE FUNCTION order_place_grouped(
    o_id bigint, o_user_id bigint, o_merchant_id bigint, o_intent_digest bytea, o_content_digest bytea,
    o_intent_seq integer, o_digest_alg text, o_items_total_fen bigint, o_packaging_fee_fen bigint,
    o_delivery_fee_fen bigint, o_total_fen bigint, o_address jsonb, o_remark text,
    o_pay_deadline timestamptz, o_created_at timestamptz,
    i_dish_id bigint[], i_name text[], i_qty integer[], i_unit_price_fen bigint[], i_options jsonb[],
    i_packaging_fee_fen bigint[],
    s_dish_id bigint[], s_qty integer[], s_price_fen bigint[], s_packaging_fee_fen bigint[],
    s_options_version bigint[], s_start smallint[], m_quote_version bigint,
    h_actor text,
    r_key text, r_fingerprint bytea, r_digest_alg text, r_status_code integer, r_headers jsonb,
    r_body bytea, r_expires_at timestamptz
) RETURNS smallint LANGUAGE plpgsql
AS $$
BEGIN
    IF order_place(o_id, o_user_id, o_merchant_id, o_intent_digest, o_content_digest, o_intent_seq, o_digest_alg,
                   o_items_total_fen, o_packaging_fee_fen, o_delivery_fee_fen, o_total_fen, o_address, o_remark,
                   o_pay_deadline, o_created_at,
                   i_dish_id, i_name, i_qty, i_unit_price_fen, i_options, i_packaging_fee_fen,
                   s_dish_id, s_qty, s_price_fen, s_packaging_fee_fen, s_options_version, s_start, m_quote_version,
                   h_actor, r_key, r_fingerprint, r_digest_alg, r_status_code, r_headers, r_body, r_expires_at) THEN
        RETURN 1;
    END IF;
    RETURN 0;
EXCEPTION WHEN SQLSTATE 'TK001' THEN
    RETURN -1;
END
$$;
-- +goose StatementEnd

-- payment_succeed_grouped returns payment_succeed's outcome (applied,
-- duplicate, transaction), or moved when the order moved since it was
-- read (payment_succeed's TK002; nothing written).
-- +goose StatementBegin
CREATE FUNCTION payment_succeed_grouped(
    p_channel text, p_mchid text, p_out_trade_no text, p_appid text, p_amount_fen bigint, p_currency text,
    n_notification_id text, n_transaction_id text, p_paid_at timestamptz,
    o_id bigint, o_from_status text, o_to_status text, o_version bigint, o_updated_at timestamptz,
    h_actor text, h_reason text, e_event_id text, e_type text, e_body json
) RETURNS text LANGUAGE plpgsql
AS $$
BEGIN
    RETURN payment_succeed(p_channel, p_mchid, p_out_trade_no, p_appid, p_amount_fen, p_currency,
                           n_notification_id, n_transaction_id, p_paid_at,
                           o_id, o_from_status, o_to_status, o_version, o_updated_at,
                           h_actor, h_reason, e_event_id, e_type, e_body);
EXCEPTION WHEN SQLSTATE 'TK002' THEN
    RETURN 'moved';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION payment_succeed_grouped;
DROP FUNCTION order_place_grouped;
