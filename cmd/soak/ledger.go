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
	// invSharingSplits: in the service-provider mode, each order whose
	// payment was shared: what the platform kept (shared less returned)
	// plus what the merchant kept (unfrozen plus returned less refunds
	// taken from it) is what was paid less refunds, nothing stays frozen,
	// and the platform's part is what its successful shares and returns
	// say; no share or return failed, or is left unfinished for longer
	// than one takes (30 s in the run's compressed time).
	invSharingSplits = "each_orders_shared_plus_settled_is_paid_less_refunded"
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
		              WHERE e.order_id = o.id AND e.account IN ('wechat_clearing', 'refunds_outside', 'platform_shared', 'merchant_settled')
		              AND e.kind <> 'fee'), 0) AS cash) m
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

// checkSharing holds the run to invSharingSplits.
func checkSharing(ctx context.Context, db querier, dl deadlines, f *findings) error {
	rows, err := db.Query(ctx, `
		SELECT o.id, m.paid_less_refunded::bigint, m.shared::bigint, m.settled::bigint, m.frozen::bigint, m.by_requests::bigint
		FROM orders o CROSS JOIN LATERAL (SELECT
		    coalesce((SELECT sum(p.amount_fen) FROM payments p WHERE p.order_id = o.id AND p.profit_sharing AND p.status IN ('SUCCESS', 'REFUNDED')), 0)
		  - coalesce((SELECT sum(r.amount_fen) FROM refunds r JOIN payments p ON p.id = r.payment_id
		              WHERE r.order_id = o.id AND p.profit_sharing AND r.transaction_id IS NULL AND r.status = 'SUCCESS'), 0) AS paid_less_refunded,
		    coalesce((SELECT sum(e.amount_fen) FROM ledger_entries e WHERE e.order_id = o.id AND e.account = 'platform_shared'), 0) AS shared,
		    coalesce((SELECT sum(e.amount_fen) FROM ledger_entries e WHERE e.order_id = o.id AND e.account = 'merchant_settled'), 0) AS settled,
		    coalesce((SELECT sum(e.amount_fen) FROM ledger_entries e JOIN payments p ON p.id = e.payment_id
		              WHERE e.order_id = o.id AND p.profit_sharing AND e.account = 'wechat_clearing' AND e.kind <> 'receipt'), 0) AS frozen,
		    coalesce((SELECT sum(CASE s.kind WHEN 'share' THEN s.amount_fen ELSE -s.amount_fen END) FROM profit_sharings s
		              WHERE s.order_id = o.id AND s.status = 'SUCCESS'), 0) AS by_requests) m
		WHERE EXISTS (SELECT 1 FROM profit_sharings s WHERE s.order_id = o.id AND s.kind = 'share' AND s.status = 'SUCCESS')
		  AND (m.shared + m.settled <> m.paid_less_refunded OR m.frozen <> 0 OR m.shared <> m.by_requests)`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, want, shared, settled, frozen, byRequests int64
		if err := rows.Scan(&id, &want, &shared, &settled, &frozen, &byRequests); err != nil {
			rows.Close()
			return err
		}
		f.add(invSharingSplits, 1, fmt.Sprintf("order %d: paid less refunded %d, the platform kept %d and the merchant %d, %d still frozen; the requests say the platform kept %d",
			id, want, shared, settled, frozen, byRequests))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// Unfinished: failed, or open for longer than a share or return takes
	// before the instances stopped (a deadline's share the sweep recorded
	// in the last seconds before they stopped is not stuck).
	rows, err = db.Query(ctx, `SELECT out_no, kind, status FROM profit_sharings
		WHERE status = 'FAILED' OR (status IN ('PENDING', 'PROCESSING') AND updated_at < $1::timestamptz - interval '30 seconds')`, dl.asOf())
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var no, kind, status string
		if err := rows.Scan(&no, &kind, &status); err != nil {
			return err
		}
		f.add(invSharingSplits, 1, fmt.Sprintf("%s %s left %s", kind, no, status))
	}
	return rows.Err()
}

// sharingCounts are the report's figures of profit sharing.
func sharingCounts(ctx context.Context, db querier) (map[string]int, error) {
	var shares, returns, deadline, commission int
	err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE kind = 'share' AND status = 'SUCCESS'),
		count(*) FILTER (WHERE kind = 'return' AND status = 'SUCCESS'),
		count(*) FILTER (WHERE kind = 'share' AND status = 'SUCCESS' AND cause = 'deadline'),
		coalesce(sum(amount_fen) FILTER (WHERE kind = 'share' AND status = 'SUCCESS'), 0)::integer
		FROM profit_sharings`).Scan(&shares, &returns, &deadline, &commission)
	if err != nil {
		return nil, fmt.Errorf("sharing counts: %w", err)
	}
	return map[string]int{"shares": shares, "share_returns": returns, "shares_at_deadline": deadline, "commission_shared_fen": commission}, nil
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
