-- quote_holds is the one definition of "the quote still holds" for a line:
-- the dish d is still the merchant's, on sale, at the quoted price,
-- packaging fee and options, and its merchant m is still open under the
-- rules (fees, minimum, hours) the cart was quoted with. Every statement
-- that takes stock joins the dish and merchant rows and calls it; it is
-- a single expression of its arguments, so PostgreSQL inlines it and
-- the rows are read, never locked: orders of one dish do not queue on them.
CREATE OR REPLACE FUNCTION quote_holds(
    d dishes, m merchants, q_merchant_id bigint, q_price_fen bigint, q_packaging_fee_fen bigint,
    q_options_version bigint, q_quote_version bigint
) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN d.merchant_id = q_merchant_id AND d.on_sale AND d.price_fen = q_price_fen
    AND d.packaging_fee_fen = q_packaging_fee_fen AND d.options_version = q_options_version
    AND m.id = q_merchant_id AND m.status = 'open' AND m.quote_version = q_quote_version;
