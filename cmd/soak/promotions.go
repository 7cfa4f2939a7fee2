package main

import (
	"context"
	"fmt"
	"time"
)

// promotionsOf are the promotions the soak's merchants run: the first a
// spend-and-save with a budget that runs out part way through the run
// (then carts are told it is spent), the second a first-order discount
// at it, the third free delivery above a total that does not stack (so
// a voucher spent there skips it).
func promotionsOf(i int, run time.Duration) []map[string]any {
	switch i {
	case 0:
		return []map[string]any{{"kind": "spend_save", "name": "soak spend and save", "funded_by": "merchant",
			"tiers":      []map[string]int64{{"threshold_fen": 2000, "off_fen": 200}, {"threshold_fen": 4000, "off_fen": 500}},
			"budget_fen": 40_000 * max(1, int64(run/time.Minute))}}
	case 1:
		return []map[string]any{{"kind": "new_customer", "name": "soak first order", "funded_by": "merchant",
			"new_customer_scope": "merchant", "tiers": []map[string]int64{{"threshold_fen": 0, "off_fen": 600}}}}
	default:
		return []map[string]any{{"kind": "free_delivery", "name": "soak free delivery", "funded_by": "merchant",
			"stackable": false, "tiers": []map[string]int64{{"threshold_fen": 3000, "off_fen": 0}}}}
	}
}

// givenBack is whether an order gave back what it took from discounts:
// cancelled, or refunded before the merchant accepted it (the state
// table's release rows).
const givenBack = `(o.status = 'CANCELLED' OR (o.status IN ('REFUNDING', 'REFUNDED') AND NOT EXISTS (
    SELECT 1 FROM order_status_history h WHERE h.order_id = o.id AND h.to_status = 'ACCEPTED')))`

// checkPromotions holds promotions to their budgets and first-order
// discounts to one per customer: what each budget has left plus what the
// orders that kept their promotion got is the budget, to the fen (so no
// budget is overspent and every cancelled order's part came back); and a
// customer's first-order claim in a scope is the one order that kept
// that discount.
func checkPromotions(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `
		SELECT p.id, p.budget_fen,
		       (SELECT coalesce(sum(b.remaining), 0) FROM promotion_budget b WHERE b.promotion_id = p.id)::bigint,
		       (SELECT coalesce(sum((g ->> 'amount_fen')::bigint), 0) FROM orders o, jsonb_array_elements(o.promotions) g
		        WHERE g ->> 'promotion_id' = p.id::text AND NOT `+givenBack+`)::bigint
		FROM promotions p WHERE p.budget_fen IS NOT NULL`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, budget, left, kept int64
		if err := rows.Scan(&id, &budget, &left, &kept); err != nil {
			rows.Close()
			return err
		}
		if left+kept != budget {
			f.add(invPromotionBudget, 1, fmt.Sprintf("promotion %d: budget %d fen, %d left and %d kept by orders", id, budget, left, kept))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = db.Query(ctx, `
		WITH kept AS (
		    SELECT o.user_id, CASE WHEN p.new_customer_scope = 'platform' THEN 0 ELSE o.merchant_id END AS scope, o.id
		    FROM orders o, jsonb_array_elements(o.promotions) g, promotions p
		    WHERE g ->> 'kind' = 'new_customer' AND p.id = (g ->> 'promotion_id')::bigint AND NOT `+givenBack+`
		)
		SELECT coalesce(k.user_id, c.user_id), coalesce(k.scope, c.scope), array_agg(DISTINCT k.id) FILTER (WHERE k.id IS NOT NULL),
		       max(c.order_id)
		FROM kept k FULL JOIN new_customer_claims c ON c.user_id = k.user_id AND c.scope = k.scope
		GROUP BY 1, 2`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var user, scope int64
		var kept []int64
		var claim *int64
		if err := rows.Scan(&user, &scope, &kept, &claim); err != nil {
			return err
		}
		if len(kept) > 1 || (len(kept) == 1) != (claim != nil) || (claim != nil && kept[0] != *claim) {
			f.add(invFirstOrderOnce, 1, fmt.Sprintf("customer %d in scope %d: orders %v kept a first-order discount, the claim names %v", user, scope, kept, claim))
		}
	}
	return rows.Err()
}

// discountCounts are what the run's orders got off, as the database has
// it at the end, for the report: the orders that got each kind of
// promotion or a voucher and kept it, those that gave it back, and what
// is left of the promotions' budgets. A soak whose orders got no
// discount proves nothing about discounts.
func discountCounts(ctx context.Context, db querier) (map[string]int, error) {
	rows, err := db.Query(ctx, `
		SELECT 'orders_kept_' || (g ->> 'kind'), count(*) FILTER (WHERE NOT `+givenBack+`),
		       'orders_gave_back_' || (g ->> 'kind'), count(*) FILTER (WHERE `+givenBack+`)
		FROM orders o, jsonb_array_elements(o.promotions) g GROUP BY g ->> 'kind'
		UNION ALL
		SELECT 'orders_kept_voucher', count(*) FILTER (WHERE NOT `+givenBack+`),
		       'orders_gave_back_voucher', count(*) FILTER (WHERE `+givenBack+`)
		FROM orders o WHERE o.voucher_id IS NOT NULL
		UNION ALL
		SELECT 'promotion_budget_fen', coalesce(sum(budget_fen), 0),
		       'promotion_budget_left_fen', (SELECT coalesce(sum(remaining), 0) FROM promotion_budget)
		FROM promotions WHERE budget_fen IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k1, k2 string
		var n1, n2 int64
		if err := rows.Scan(&k1, &n1, &k2, &n2); err != nil {
			return nil, err
		}
		out[k1], out[k2] = int(n1), int(n2)
	}
	return out, rows.Err()
}
