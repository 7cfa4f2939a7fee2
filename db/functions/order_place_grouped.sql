-- order_place_grouped is order_place for an order committed with others
-- in one group (db.Group: one pipeline, one implicit transaction). It runs
-- order_place in a subtransaction that catches the one error that
-- concerns this order alone, so that its rows are undone and its
-- neighbours' kept, and answers 1 when placed, 0 when the order exists,
-- -1 when a line found no free shard at the quoted terms or the voucher,
-- a budget or a new-customer claim was not free (nothing written in the last two). Any other error fails the whole group, and
-- the api places each of its orders alone. A group holds at most 64
-- orders: more subtransactions overflow each backend's cache of them.
CREATE OR REPLACE FUNCTION order_place_grouped(
    o_id bigint, o_user_id bigint, o_merchant_id bigint, o_intent_digest bytea, o_content_digest bytea,
    o_intent_seq integer, o_digest_alg text, o_items_total_fen bigint, o_packaging_fee_fen bigint,
    o_delivery_fee_fen bigint, o_total_fen bigint, o_address jsonb, o_remark text,
    o_pay_deadline timestamptz, o_created_at timestamptz,
    o_voucher_id bigint, o_discount_fen bigint, o_platform_discount_fen bigint, o_merchant_discount_fen bigint,
    i_dish_id bigint[], i_name text[], i_qty integer[], i_unit_price_fen bigint[], i_options jsonb[],
    i_packaging_fee_fen bigint[], i_discount_fen bigint[],
    s_dish_id bigint[], s_qty integer[], s_price_fen bigint[], s_packaging_fee_fen bigint[],
    s_options_version bigint[], s_start smallint[], m_quote_version bigint,
    h_actor text,
    r_key text, r_fingerprint bytea, r_digest_alg text, r_status_code integer, r_headers jsonb,
    r_body bytea, r_expires_at timestamptz,
    o_promotions jsonb, b_promotion_id bigint[], b_amount_fen bigint[], n_scope bigint
) RETURNS smallint LANGUAGE plpgsql
AS $$
BEGIN
    IF order_place(o_id, o_user_id, o_merchant_id, o_intent_digest, o_content_digest, o_intent_seq, o_digest_alg,
                   o_items_total_fen, o_packaging_fee_fen, o_delivery_fee_fen, o_total_fen, o_address, o_remark,
                   o_pay_deadline, o_created_at,
                   o_voucher_id, o_discount_fen, o_platform_discount_fen, o_merchant_discount_fen,
                   i_dish_id, i_name, i_qty, i_unit_price_fen, i_options, i_packaging_fee_fen, i_discount_fen,
                   s_dish_id, s_qty, s_price_fen, s_packaging_fee_fen, s_options_version, s_start, m_quote_version,
                   h_actor, r_key, r_fingerprint, r_digest_alg, r_status_code, r_headers, r_body, r_expires_at,
                   o_promotions, b_promotion_id, b_amount_fen, n_scope) THEN
        RETURN 1::smallint;
    END IF;
    RETURN 0::smallint;
EXCEPTION WHEN SQLSTATE 'TK001' THEN
    RETURN -1::smallint;
END
$$;
