-- +goose Up
-- An order's rows named their user, merchant and dishes through foreign
-- keys. Those rows are never deleted (a dish goes off sale, a merchant
-- closes), and a placement already requires the merchant open and each
-- dish on sale at the quoted terms in the statement that takes its stock,
-- so the keys checked nothing a placement had not: they only cost, on
-- every order, a referential query per row and a KEY SHARE lock on the
-- user's, the merchant's and each dish's row, which every concurrent
-- order of the merchant shares (a new multixact each time). Without them
-- order_place runs 5-8% faster at 4 connections and 12% at 12
-- (docs/performance.md). A delete of a row that orders name is refused
-- by a trigger instead, paid by the delete, which never happens; unlike
-- the key it does not see orders not yet committed.
ALTER TABLE orders DROP CONSTRAINT orders_user_id_fkey, DROP CONSTRAINT orders_merchant_id_fkey;
ALTER TABLE order_items DROP CONSTRAINT order_items_dish_id_fkey;
ALTER TABLE stock_reservations DROP CONSTRAINT stock_reservations_dish_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION refuse_delete_named_by_orders() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_TABLE_NAME = 'users' AND EXISTS (SELECT 1 FROM orders WHERE user_id = OLD.id))
        OR (TG_TABLE_NAME = 'merchants' AND EXISTS (SELECT 1 FROM orders WHERE merchant_id = OLD.id))
        OR (TG_TABLE_NAME = 'dishes' AND EXISTS (SELECT 1 FROM order_items WHERE dish_id = OLD.id)) THEN
        RAISE EXCEPTION '% % is named by orders and is kept', TG_TABLE_NAME, OLD.id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN OLD;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER users_named_by_orders BEFORE DELETE ON users FOR EACH ROW EXECUTE FUNCTION refuse_delete_named_by_orders();
CREATE TRIGGER merchants_named_by_orders BEFORE DELETE ON merchants FOR EACH ROW EXECUTE FUNCTION refuse_delete_named_by_orders();
CREATE TRIGGER dishes_named_by_orders BEFORE DELETE ON dishes FOR EACH ROW EXECUTE FUNCTION refuse_delete_named_by_orders();

-- +goose Down
DROP TRIGGER dishes_named_by_orders ON dishes;
DROP TRIGGER merchants_named_by_orders ON merchants;
DROP TRIGGER users_named_by_orders ON users;
DROP FUNCTION refuse_delete_named_by_orders;
ALTER TABLE stock_reservations ADD CONSTRAINT stock_reservations_dish_id_fkey FOREIGN KEY (dish_id) REFERENCES dishes (id);
ALTER TABLE order_items ADD CONSTRAINT order_items_dish_id_fkey FOREIGN KEY (dish_id) REFERENCES dishes (id);
ALTER TABLE orders ADD CONSTRAINT orders_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id),
    ADD CONSTRAINT orders_user_id_fkey FOREIGN KEY (user_id) REFERENCES users (id);
