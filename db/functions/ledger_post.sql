-- ledger_post writes one journal: the entries of one money movement, in
-- the accounts named, with their amounts (debits positive, credits
-- negative). It refuses a journal that does not balance; zero amounts are
-- left out; a journal posted before writes nothing more (its name and
-- account are unique).
CREATE OR REPLACE FUNCTION ledger_post(
    j_name text, j_kind text, j_order_id bigint, j_merchant_id bigint, j_payment_id bigint, j_refund_id bigint,
    j_ref text, j_accounts text[], j_amounts bigint[]
) RETURNS void LANGUAGE plpgsql
AS $$
DECLARE
    total bigint;
BEGIN
    IF cardinality(j_accounts) <> cardinality(j_amounts) THEN
        RAISE EXCEPTION 'ledger_post %: % accounts, % amounts', j_name, cardinality(j_accounts), cardinality(j_amounts);
    END IF;
    SELECT coalesce(sum(a), 0)::bigint INTO total FROM unnest(j_amounts) AS a;
    IF total <> 0 THEN
        RAISE EXCEPTION 'ledger_post %: the entries sum to %, not 0', j_name, total USING ERRCODE = 'TK010';
    END IF;
    INSERT INTO ledger_entries (journal, kind, account, amount_fen, order_id, merchant_id, payment_id, refund_id, ref)
    SELECT j_name, j_kind, a.account, a.amount, j_order_id, j_merchant_id, j_payment_id, j_refund_id, j_ref
    FROM unnest(j_accounts, j_amounts) AS a(account, amount)
    WHERE a.amount <> 0
    ON CONFLICT (journal, account) DO NOTHING;
END
$$;
