-- Orders name their user, merchant and dishes without foreign keys (a
-- key would lock those rows on every order); a delete of a row that
-- orders name is refused here instead, paid by the delete, which never
-- happens. Unlike a key it does not see orders not yet committed.
CREATE OR REPLACE FUNCTION refuse_delete_named_by_orders() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_TABLE_NAME = 'users' AND EXISTS (SELECT 1 FROM orders WHERE user_id = OLD.id))
        OR (TG_TABLE_NAME = 'merchants' AND EXISTS (SELECT 1 FROM orders WHERE merchant_id = OLD.id))
        OR (TG_TABLE_NAME = 'dishes' AND EXISTS (SELECT 1 FROM order_items WHERE dish_id = OLD.id)) THEN
        RAISE EXCEPTION '% % is named by orders and is kept', TG_TABLE_NAME, OLD.id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN OLD;
END
$$;

CREATE OR REPLACE TRIGGER users_named_by_orders BEFORE DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION refuse_delete_named_by_orders();
CREATE OR REPLACE TRIGGER merchants_named_by_orders BEFORE DELETE ON merchants
    FOR EACH ROW EXECUTE FUNCTION refuse_delete_named_by_orders();
CREATE OR REPLACE TRIGGER dishes_named_by_orders BEFORE DELETE ON dishes
    FOR EACH ROW EXECUTE FUNCTION refuse_delete_named_by_orders();
