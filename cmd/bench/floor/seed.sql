-- 50 merchants of 20 dishes (dish id = merchant * 20 + n, n 1..20) with
-- stock no run sells; a million pending orders for the payments.
INSERT INTO dishes (id, merchant_id, price_fen, stock)
SELECT m * 20 + n, m, 1000 + n, 1000000000000 FROM generate_series(0, 49) m, generate_series(1, 20) n;
INSERT INTO orders (id, user_id, digest, merchant_id, status, total_fen)
SELECT i, i, int8send(i), i % 50, 'PENDING', 3000 FROM generate_series(1, 1000000) i;
VACUUM ANALYZE;
