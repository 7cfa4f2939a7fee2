package main

import (
	"context"
	"fmt"
	"time"
)

// acceptRuleOf is the accept deadline of the soak's merchant i: the
// first rejects (and refunds) what its staff leave, the second accepts
// it, the third has no deadline (its untouched orders wait, as before
// the deadline existed). The deadlines are short, so that they fire
// throughout even a quick run.
func acceptRuleOf(i int) (within int, then string) {
	switch i {
	case 0:
		return 15, "reject"
	case 1:
		return 20, "accept"
	}
	return 0, "reject"
}

// invAcceptDeadline: the system moved an order on at its accept deadline
// at most once, never before it, out of PAID, to what the order's rule
// says (ACCEPTED or REFUNDING), and the order records that it did.
const invAcceptDeadline = "each_accept_deadline_applied_once_after_it"

// checkAcceptDeadlines holds the accept deadline's history rows to the
// orders' own record of them. (A paid order left past its deadline is
// checkStuck's; one outcome per order is checkHistories' path.)
func checkAcceptDeadlines(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `
		SELECT o.id, o.accept_by, coalesce(o.accept_then, ''), o.accept_deadline_applied, count(h.id),
		       coalesce(min(h.from_status), ''), coalesce(min(h.to_status), ''), min(h.created_at)
		FROM orders o LEFT JOIN order_status_history h ON h.order_id = o.id AND h.actor = 'system:accept-deadline'
		WHERE o.accept_deadline_applied OR h.id IS NOT NULL
		GROUP BY o.id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	want := map[string]string{"accept": "ACCEPTED", "reject": "REFUNDING"}
	for rows.Next() {
		var (
			id       int64
			by, at   *time.Time
			then     string
			applied  bool
			n        int
			from, to string
		)
		if err := rows.Scan(&id, &by, &then, &applied, &n, &from, &to, &at); err != nil {
			return err
		}
		var broken string
		switch {
		case n != 1:
			broken = fmt.Sprintf("%d history rows by the deadline", n)
		case !applied:
			broken = "a history row by the deadline, and the order does not record it"
		case by == nil || at.Before(*by):
			broken = fmt.Sprintf("moved on at %v, its deadline %v", at, by)
		case from != "PAID" || to != want[then]:
			broken = fmt.Sprintf("%s -> %s by its rule %q", from, to, then)
		}
		if broken != "" {
			f.add(invAcceptDeadline, 1, fmt.Sprintf("order %d: %s", id, broken))
		}
	}
	return rows.Err()
}

// acceptDeadlineCounts are, for the report, the orders moved on at their
// deadline by each rule: a run whose deadlines never fired proves
// nothing about them.
func acceptDeadlineCounts(ctx context.Context, db querier) (map[string]int, error) {
	var accepted, rejected, withDeadline int64
	if err := db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE accept_deadline_applied AND accept_then = 'accept'),
		       count(*) FILTER (WHERE accept_deadline_applied AND accept_then = 'reject'),
		       count(*) FILTER (WHERE accept_by IS NOT NULL)
		FROM orders`).Scan(&accepted, &rejected, &withDeadline); err != nil {
		return nil, err
	}
	return map[string]int{"orders_accepted_at_their_deadline": int(accepted), "orders_rejected_at_their_deadline": int(rejected),
		"orders_paid_with_an_accept_deadline": int(withDeadline)}, nil
}
