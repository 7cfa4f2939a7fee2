-- new_customer_lock_key is the advisory lock every claim of a customer's
-- first order in a scope takes before it looks for a claim (order_place
-- tries it and leaves to the transaction path when it is held; the
-- transaction path waits for it), so that a claim either finds the
-- other's row committed or is the first. A collision of two keys only
-- sends a placement to the transaction path.
CREATE OR REPLACE FUNCTION new_customer_lock_key(user_id bigint, scope bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN hashtextextended('new_customer:' || user_id || ':' || scope, 0);
