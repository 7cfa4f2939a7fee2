-- An order's lines, reservations and history name it without foreign
-- keys (they are written with the order or under its lock, and orders are
-- never deleted); a delete of an order is refused here instead.
CREATE OR REPLACE FUNCTION refuse_delete_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'order % is kept', OLD.id USING ERRCODE = 'foreign_key_violation';
END
$$;

CREATE OR REPLACE TRIGGER orders_kept BEFORE DELETE ON orders
    FOR EACH ROW EXECUTE FUNCTION refuse_delete_order();
