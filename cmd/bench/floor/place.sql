-- One order of two dishes of one merchant: the stock taken (dishes in
-- ascending id, so concurrent orders never deadlock), the order inserted
-- once per (user, digest), its two lines, one event for the outbox.
\set m random(0, 49)
\set a random(1, 19)
\set b random(:a + 1, 20)
\set id random(2000000, 9000000000000000000)
\set user random(1, 10000000)
BEGIN;
UPDATE dishes SET stock = stock - 1 WHERE id = :m * 20 + :a AND stock >= 1;
UPDATE dishes SET stock = stock - 2 WHERE id = :m * 20 + :b AND stock >= 2;
INSERT INTO orders (id, user_id, digest, merchant_id, status, total_fen)
VALUES (:id, :user, int8send(:id), :m, 'PENDING', 3000) ON CONFLICT (user_id, digest) DO NOTHING;
INSERT INTO order_items (order_id, line, dish_id, qty) VALUES (:id, 0, :m * 20 + :a, 1), (:id, 1, :m * 20 + :b, 2);
INSERT INTO outbox (order_id, kind) VALUES (:id, 'placed');
COMMIT;
