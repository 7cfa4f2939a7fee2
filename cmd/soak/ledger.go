package main

import (
	"context"
	"fmt"
)

const (
	// invJournalsBalance: every journal of the ledger sums to zero.
	invJournalsBalance = "every_journal_balances"
	// invLedgerMatches: each order's entries in the cash accounts come to
	// what its payments brought in less what its refunds gave back.
	invLedgerMatches = "each_orders_ledger_nets_to_paid_less_refunded"
)

// checkLedger holds the run to invJournalsBalance and invLedgerMatches.
func checkLedger(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `SELECT journal, sum(amount_fen)::bigint FROM ledger_entries GROUP BY journal HAVING sum(amount_fen) <> 0`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var journal string
		var sum int64
		if err := rows.Scan(&journal, &sum); err != nil {
			rows.Close()
			return err
		}
		f.add(invJournalsBalance, 1, fmt.Sprintf("journal %s sums to %d", journal, sum))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = db.Query(ctx, `
		SELECT o.id, m.expected::bigint, m.cash::bigint FROM orders o CROSS JOIN LATERAL (SELECT
		    coalesce((SELECT sum(p.amount_fen) FROM payments p WHERE p.order_id = o.id AND p.status IN ('SUCCESS', 'REFUNDED')), 0)
		  + coalesce((SELECT sum(t.amount_fen) FROM (SELECT DISTINCT ON (f.transaction_id) f.amount_fen FROM refunds f
		              WHERE f.order_id = o.id AND f.transaction_id IS NOT NULL ORDER BY f.transaction_id, f.id) t), 0)
		  - coalesce((SELECT sum(f.amount_fen) FROM refunds f WHERE f.order_id = o.id AND f.status IN ('SUCCESS', 'SETTLED')), 0) AS expected,
		    coalesce((SELECT sum(e.amount_fen) FROM ledger_entries e
		              WHERE e.order_id = o.id AND e.account IN ('wechat_clearing', 'refunds_outside') AND e.kind <> 'fee'), 0) AS cash) m
		WHERE m.expected <> m.cash`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var expected, cash int64
		if err := rows.Scan(&id, &expected, &cash); err != nil {
			return err
		}
		f.add(invLedgerMatches, 1, fmt.Sprintf("order %d: paid less refunded %d fen, its ledger %d", id, expected, cash))
	}
	return rows.Err()
}

// ledgerCounts are the report's figures of the ledger.
func ledgerCounts(ctx context.Context, db querier) (map[string]int, error) {
	var journals, entries, sales int
	err := db.QueryRow(ctx, `SELECT count(DISTINCT journal), count(*), count(DISTINCT journal) FILTER (WHERE kind = 'sale') FROM ledger_entries`).
		Scan(&journals, &entries, &sales)
	if err != nil {
		return nil, fmt.Errorf("ledger counts: %w", err)
	}
	return map[string]int{"ledger_journals": journals, "ledger_entries": entries, "ledger_sales": sales}, nil
}
