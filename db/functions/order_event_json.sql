-- order_event_json is the outbox body of event e_type of the order o, as
-- written: the event's envelope and the order's snapshot with its lines,
-- the same keys and values as the api renders (webhook.Event around
-- order.Order): ids as strings, times as Go writes them (json_time).
-- TestSettledEventIsTheOneTheAPIRenders holds the two together.
--
-- PL/pgSQL, not SQL: a session keeps its plans, where a SQL function
-- called from another function is planned again at every call; and the
-- lines are read apart, so that the object is a simple expression and
-- not a query with a subquery.
CREATE OR REPLACE FUNCTION order_event_json(o orders, e_type text) RETURNS json
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
            'discount_fen', i.discount_fen,
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
            'voucher_id', o.voucher_id::text,
            'discount_fen', o.discount_fen,
            'platform_discount_fen', o.platform_discount_fen,
            'merchant_discount_fen', o.merchant_discount_fen,
            'promotions', o.promotions,
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
            -- order.AcceptDeadline: null when the order has none.
            'accept_deadline', CASE WHEN o.accept_by IS NOT NULL THEN json_build_object(
                    'accept_by', json_time(o.accept_by),
                    'then', o.accept_then,
                    'applied', o.accept_deadline_applied) END,
            'fulfilment', o.fulfilment,
            -- order.PickupNumber and order.Slot: null when the order has none.
            'pickup', CASE WHEN o.pickup_no IS NOT NULL THEN json_build_object(
                    'number', o.pickup_no,
                    'day', to_char(o.pickup_day, 'YYYY-MM-DD')) END,
            'slot', CASE WHEN o.slot_start IS NOT NULL THEN json_build_object(
                    'start', json_time(o.slot_start),
                    'end', json_time(o.slot_end)) END,
            'created_at', json_time(o.created_at),
            'updated_at', json_time(o.updated_at)));
END
$$;
