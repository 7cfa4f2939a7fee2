-- A pickup order is committed with its number: the placement inserts it
-- without one and takes the number last (PickupNumberAssign), so the
-- check is deferred to the commit, where it reads the row as it is then.
CREATE OR REPLACE FUNCTION orders_pickup_numbered() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM orders WHERE id = NEW.id AND pickup_no IS NULL) THEN
        RAISE EXCEPTION 'pickup order % has no pickup number', NEW.id USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END
$$;

-- A constraint trigger cannot be replaced in place: it is dropped and
-- created again (in the same transaction) when this file changes.
DROP TRIGGER IF EXISTS orders_pickup_numbered ON orders;
CREATE CONSTRAINT TRIGGER orders_pickup_numbered AFTER INSERT ON orders
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.fulfilment = 'pickup') EXECUTE FUNCTION orders_pickup_numbered();
