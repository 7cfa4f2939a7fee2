-- One payment callback: the notification's transaction recorded once,
-- the order moved from PENDING to PAID only from PENDING, one event.
\set id random(1, 1000000)
\set txn random(1, 9000000000000000000)
BEGIN;
INSERT INTO payments (transaction_id, order_id) VALUES ('wx' || :txn, :id) ON CONFLICT DO NOTHING;
UPDATE orders SET status = 'PAID' WHERE id = :id AND status = 'PENDING';
INSERT INTO outbox (order_id, kind) VALUES (:id, 'paid');
COMMIT;
