-- order_place writes a new order in one statement: the order, its stock
-- reservations, items, first history row and the submit's idempotency
-- record, then its stock, each line (in ascending dish order) from a
-- shard that has its units and that no other transaction holds. It is the
-- same rows as the api's transaction path (order/place.go), in one round
-- trip and one transaction.
--
-- It returns true when it placed the order, false when an order with the
-- id or the (user, intent digest) exists (nothing written: the caller
-- reads that order the usual way). With a voucher (o_voucher_id), the
-- order takes it last: from unused to held by this order, if no other
-- transaction holds its row. Before it, each promotion with a budget
-- (b_*) takes what it gives from a free shard of its budget, and a
-- new-customer discount (n_scope: the merchant, or 0 for the platform)
-- claims the customer's first order in its scope. When a line finds no free shard with its
-- units at the quoted terms (quote_holds), a budget no free shard with
-- enough, a new-customer claim that is taken or in flight, or the voucher
-- is held, used or expired, it raises SQLSTATE TK001 and the statement rolls back
-- whole: the caller runs the transaction path, which waits for busy
-- rows, gathers thin stock and explains refusals. A record of the same key committed first fails the record's
-- insert (idempotency_records_user_key_key) and rolls it all back too.
--
-- Changing what an order is means changing this function, the queries of
-- db/queries/orders.sql and the Go renderer (order.orderFromRow).
CREATE OR REPLACE FUNCTION order_place(
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
) RETURNS boolean LANGUAGE plpgsql
-- Its statements' plans are made once per connection: a custom plan per
-- call (PL/pgSQL's default while the generic one looks dearer, as it does
-- for the arrays) is planning work on every order.
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
                        items_total_fen, packaging_fee_fen, delivery_fee_fen, total_fen, address, remark,
                        pay_deadline, created_at, updated_at, voucher_id, discount_fen, platform_discount_fen,
                        merchant_discount_fen, promotions)
    VALUES (o_id, o_user_id, o_merchant_id, o_intent_digest, o_content_digest, o_intent_seq, o_digest_alg,
            'PENDING_PAYMENT', o_items_total_fen, o_packaging_fee_fen, o_delivery_fee_fen, o_total_fen, o_address,
            o_remark, o_pay_deadline, o_created_at, o_created_at, o_voucher_id, o_discount_fen,
            o_platform_discount_fen, o_merchant_discount_fen, o_promotions)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO stock_reservations (order_id, dish_id, qty)
    SELECT o_id, d, q FROM unnest(s_dish_id, s_qty) AS l(d, q);
    INSERT INTO order_items (order_id, line, dish_id, name, qty, unit_price_fen, line_total_fen, options, packaging_fee_fen,
                             discount_fen)
    SELECT o_id, (n - 1)::smallint, d, nm, q, p, p * q, opt, f, dc
    FROM unnest(i_dish_id, i_name, i_qty, i_unit_price_fen, i_options, i_packaging_fee_fen, i_discount_fen)
        WITH ORDINALITY AS i(d, nm, q, p, opt, f, dc, n);
    INSERT INTO order_status_history (order_id, from_status, to_status, version, actor, reason)
    VALUES (o_id, NULL, 'PENDING_PAYMENT', 1, h_actor, 'placed');
    INSERT INTO idempotency_records (user_id, key, fingerprint, digest_alg, order_id, status_code, headers, body, expires_at)
    VALUES (o_user_id, r_key, r_fingerprint, r_digest_alg, o_id, r_status_code, r_headers, r_body, r_expires_at);
    FOR n IN 1 .. coalesce(array_length(s_dish_id, 1), 0) LOOP
        -- As StockTakeFree (db/queries/dish_stock.sql), its pick run once.
        WITH pick AS MATERIALIZED (
            SELECT ds.dish_id, ds.shard FROM dish_stock ds
            JOIN dishes d ON d.id = ds.dish_id
            JOIN merchants m ON m.id = d.merchant_id
            WHERE ds.dish_id = s_dish_id[n] AND ds.units >= s_qty[n]
              AND quote_holds(d, m, o_merchant_id, s_price_fen[n], s_packaging_fee_fen[n], s_options_version[n],
                              m_quote_version)
            ORDER BY ds.shard < s_start[n], ds.shard
            LIMIT 1
            FOR UPDATE OF ds SKIP LOCKED
        )
        UPDATE dish_stock s SET units = s.units - s_qty[n]
        FROM pick
        WHERE s.dish_id = pick.dish_id AND s.shard = pick.shard;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'order_place: dish % has no free shard with % units at the quoted terms', s_dish_id[n], s_qty[n]
                USING ERRCODE = 'TK001';
        END IF;
    END LOOP;
    FOR n IN 1 .. coalesce(array_length(b_promotion_id, 1), 0) LOOP
        -- As PromotionBudgetTakeFree (db/queries/promotions.sql): what the
        -- order gets from a promotion with a budget, from one shard that
        -- has it and that no other transaction holds. The search starts at
        -- a shard of this backend's: the orders committed together (one
        -- transaction on one backend) come back to the shard the first of
        -- them locked, so a group holds one shard, not one per order, and
        -- groups on other backends start elsewhere.
        WITH pick AS MATERIALIZED (
            SELECT shard FROM promotion_budget
            WHERE promotion_id = b_promotion_id[n] AND remaining >= b_amount_fen[n]
            ORDER BY shard < (pg_backend_pid() % 16)::smallint, shard
            LIMIT 1
            FOR UPDATE SKIP LOCKED
        )
        UPDATE promotion_budget b SET remaining = b.remaining - b_amount_fen[n]
        FROM pick
        WHERE b.promotion_id = b_promotion_id[n] AND b.shard = pick.shard;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'order_place: promotion % has no free shard with % fen of budget', b_promotion_id[n], b_amount_fen[n]
                USING ERRCODE = 'TK001';
        END IF;
    END LOOP;
    IF n_scope IS NOT NULL THEN
        -- The customer's first order in the scope, without waiting: the
        -- lock is the one every claim of (user, scope) takes first
        -- (PromotionNewCustomerLock), so a claim it finds is committed.
        IF NOT pg_try_advisory_xact_lock(new_customer_lock_key(o_user_id, n_scope)) THEN
            RAISE EXCEPTION 'order_place: a new-customer claim of user % is in flight', o_user_id USING ERRCODE = 'TK001';
        END IF;
        INSERT INTO new_customer_claims (user_id, scope, order_id) VALUES (o_user_id, n_scope, o_id)
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'order_place: user % is not new in scope %', o_user_id, n_scope USING ERRCODE = 'TK001';
        END IF;
    END IF;
    IF o_voucher_id IS NOT NULL THEN
        -- As VoucherTake (db/queries/vouchers.sql), without waiting for a
        -- row another transaction holds: the row is locked only if it is
        -- free, then marked held by this order.
        PERFORM FROM vouchers
        WHERE id = o_voucher_id AND user_id = o_user_id AND order_id IS NULL AND valid_until > o_created_at
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'order_place: voucher % is held, used or expired', o_voucher_id USING ERRCODE = 'TK001';
        END IF;
        UPDATE vouchers SET order_id = o_id, used_at = o_created_at WHERE id = o_voucher_id;
    END IF;
    RETURN true;
END
$$;
