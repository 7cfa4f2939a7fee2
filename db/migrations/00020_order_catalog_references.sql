-- +goose Up
-- An order's rows named their user, merchant and dishes through foreign
-- keys. Those rows are never deleted (a dish goes off sale, a merchant
-- closes), and a placement already requires the merchant open and each
-- dish on sale at the quoted terms in the statement that takes its stock,
-- so the keys checked nothing a placement had not: they only cost, on
-- every order, a referential query per row and a KEY SHARE lock on the
-- user's, the merchant's and each dish's row, which every concurrent
-- order of the merchant shares (a new multixact each time). A delete of
-- a row that orders name is refused by a trigger instead
-- (db/functions/refuse_delete_named_by_orders.sql).
ALTER TABLE orders DROP CONSTRAINT orders_user_id_fkey, DROP CONSTRAINT orders_merchant_id_fkey;
ALTER TABLE order_items DROP CONSTRAINT order_items_dish_id_fkey;
ALTER TABLE stock_reservations DROP CONSTRAINT stock_reservations_dish_id_fkey;

-- +goose Down
ALTER TABLE stock_reservations ADD CONSTRAINT stock_reservations_dish_id_fkey FOREIGN KEY (dish_id) REFERENCES dishes (id);
ALTER TABLE order_items ADD CONSTRAINT order_items_dish_id_fkey FOREIGN KEY (dish_id) REFERENCES dishes (id);
ALTER TABLE orders ADD CONSTRAINT orders_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id),
    ADD CONSTRAINT orders_user_id_fkey FOREIGN KEY (user_id) REFERENCES users (id);
