-- dishes_with_stock is a dish with its stock on hand (the sum of its
-- shards) and the units held by unpaid and unfinished orders.
CREATE OR REPLACE VIEW dishes_with_stock AS
SELECT d.id, d.merchant_id, d.name, d.price_fen,
       (SELECT coalesce(sum(s.units), 0) FROM dish_stock s WHERE s.dish_id = d.id)::integer AS stock,
       d.on_sale, d.version, d.created_at, d.updated_at,
       (SELECT coalesce(sum(r.qty), 0) FROM stock_reservations r
        WHERE r.dish_id = d.id AND r.released_at IS NULL AND r.consumed_at IS NULL)::integer AS held,
       d.category_id, d.position, d.image_url, d.packaging_fee_fen, d.options_version
FROM dishes d;
