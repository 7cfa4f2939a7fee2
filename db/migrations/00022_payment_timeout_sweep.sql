-- +goose Up
-- An order no longer writes its payment-timeout job when it is placed: a
-- sweep (order.payment_timeout_sweep, every
-- TAKEOUT_ORDER_TIMEOUT_SWEEP_INTERVAL) queues the job of each order still
-- waiting for payment past its deadline that has none. Most orders are
-- paid first, so most never get one: the placement writes one row and
-- seven index entries (two of them GIN) fewer, and no job runs at each
-- paid order's deadline only to find it paid (docs/performance.md).
--
-- The sweep finds due orders through this partial index, which holds only
-- the orders waiting for payment.
CREATE INDEX orders_pending_pay_deadline_idx ON orders (pay_deadline) WHERE status = 'PENDING_PAYMENT';

-- order_place as in migration 00019, without the job. The old function
-- (with the job's two arguments) stays beside it: instances of the
-- previous release, still running during a rolling deploy, call it, and
-- the jobs they write are ones the sweep sees. A later migration drops it.
-- +goose StatementBegin
CREATE FUNCTION order_place(
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
) RETURNS boolean LANGUAGE plpgsql
-- Its statements' plans are made once per connection: a custom plan per
-- call (PL/pgSQL's default while the generic one looks dearer, as it does
-- for the arrays) is planning work on every order.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    taken smallint;
BEGIN
    INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
                        items_total_fen, packaging_fee_fen, delivery_fee_fen, total_fen, address, remark,
                        pay_deadline, created_at, updated_at)
    VALUES (o_id, o_user_id, o_merchant_id, o_intent_digest, o_content_digest, o_intent_seq, o_digest_alg,
            'PENDING_PAYMENT', o_items_total_fen, o_packaging_fee_fen, o_delivery_fee_fen, o_total_fen, o_address,
            o_remark, o_pay_deadline, o_created_at, o_created_at)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO stock_reservations (order_id, dish_id, qty)
    SELECT o_id, d, q FROM unnest(s_dish_id, s_qty) AS l(d, q);
    INSERT INTO order_items (order_id, line, dish_id, name, qty, unit_price_fen, line_total_fen, options, packaging_fee_fen)
    SELECT o_id, (n - 1)::smallint, d, nm, q, p, p * q, opt, f
    FROM unnest(i_dish_id, i_name, i_qty, i_unit_price_fen, i_options, i_packaging_fee_fen)
        WITH ORDINALITY AS i(d, nm, q, p, opt, f, n);
    INSERT INTO order_status_history (order_id, from_status, to_status, version, actor, reason)
    VALUES (o_id, NULL, 'PENDING_PAYMENT', 1, h_actor, 'placed');
    INSERT INTO idempotency_records (user_id, key, fingerprint, digest_alg, order_id, status_code, headers, body, expires_at)
    VALUES (o_user_id, r_key, r_fingerprint, r_digest_alg, o_id, r_status_code, r_headers, r_body, r_expires_at);
    FOR n IN 1 .. coalesce(array_length(s_dish_id, 1), 0) LOOP
        -- As StockTakeFree: a shard with the units that no one holds, the
        -- dish and merchant still as quoted.
        UPDATE dish_stock s SET units = s.units - s_qty[n]
        FROM (
            SELECT ds.dish_id, ds.shard FROM dish_stock ds
            JOIN dishes d ON d.id = ds.dish_id
            WHERE ds.dish_id = s_dish_id[n] AND ds.units >= s_qty[n]
              AND d.merchant_id = o_merchant_id AND d.price_fen = s_price_fen[n]
              AND d.packaging_fee_fen = s_packaging_fee_fen[n] AND d.options_version = s_options_version[n] AND d.on_sale
              AND EXISTS (SELECT 1 FROM merchants m
                          WHERE m.id = o_merchant_id AND m.status = 'open' AND m.quote_version = m_quote_version)
            ORDER BY ds.shard < s_start[n], ds.shard
            LIMIT 1
            FOR UPDATE OF ds SKIP LOCKED
        ) pick
        WHERE s.dish_id = pick.dish_id AND s.shard = pick.shard
        RETURNING s.shard INTO taken;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'order_place: dish % has no free shard with % units at the quoted terms', s_dish_id[n], s_qty[n]
                USING ERRCODE = 'TK001';
        END IF;
    END LOOP;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION order_place(bigint, bigint, bigint, bytea, bytea, integer, text, bigint, bigint, bigint, bigint, jsonb, text,
    timestamptz, timestamptz, bigint[], text[], integer[], bigint[], jsonb[], bigint[], bigint[], integer[], bigint[],
    bigint[], bigint[], smallint[], bigint, text, text, bytea, text, integer, jsonb, bytea, timestamptz);
DROP INDEX orders_pending_pay_deadline_idx;
