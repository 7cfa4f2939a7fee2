package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/statemachine"
)

// The invariants, each counted in the report (zero when it holds).
const (
	invDuplicateIntent    = "no_two_orders_for_one_intent"
	invAckDiverges        = "one_intent_acknowledged_as_one_order"
	invPurchaseTwoOrders  = "one_purchase_one_order"
	invAckMissing         = "acknowledged_orders_exist"
	invNegativeStock      = "no_negative_stock"
	invStockConserved     = "stock_conserved"
	invRestocksOnce       = "restocks_exactly_once"
	invOversold           = "no_oversold_unit"
	invReservations       = "reservations_match_status"
	invPaidTwice          = "no_order_paid_twice_without_refund"
	invMoneyKept          = "no_money_kept_for_unfulfilled_order"
	invPaidWithoutPayment = "paid_status_has_a_payment"
	invRefundExceeds      = "refunds_within_payment"
	invHistoryPath        = "history_is_a_path_of_the_state_table"
	invStuck              = "nothing_stuck_past_its_deadline"
	invDeadJobs           = "no_dead_jobs"
	invAnomalies          = "no_payment_anomalies"
	invBoardMissed        = "every_paid_order_reached_every_board"
	invBoardRepeated      = "no_board_got_an_event_twice"
	invVoucherBudget      = "vouchers_within_budget"
	invVoucherPerUser     = "vouchers_within_per_user_limit"
	invClaimAcks          = "each_claim_acknowledged_as_one_voucher"
	invVoucherTwoOrders   = "no_voucher_used_by_two_orders"
	invVoucherReleased    = "every_voucher_of_a_cancelled_order_released"
	invPromotionBudget    = "promotion_budgets_to_the_fen"
	invFirstOrderOnce     = "one_first_order_discount_per_customer"
)

var invariantOrder = []string{
	invDuplicateIntent, invAckDiverges, invPurchaseTwoOrders, invAckMissing, invNegativeStock, invStockConserved,
	invRestocksOnce, invOversold, invReservations, invPaidTwice, invMoneyKept, invPaidWithoutPayment, invRefundExceeds,
	invHistoryPath, invStuck, invDeadJobs, invAnomalies, invBoardMissed, invBoardRepeated,
	invVoucherBudget, invVoucherPerUser, invClaimAcks, invVoucherTwoOrders, invVoucherReleased,
	invPromotionBudget, invFirstOrderOnce, invAcceptDeadline, invPrintedOnce, invPickupOnce, invSlotsConserved,
	invShippedOnce, invJournalsBalance, invLedgerMatches, invAfterSaleRefundedOnce, invSharingSplits,
	invOneActiveDelivery, invDeliveryForward, invCourierFeesLedger, invCompletedDelivered, invCourierTruth,
}

// querier is the database the checker reads (a pool: PostgreSQL may
// have been restarted under it).
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// deadline settings the stuck check needs.
type deadlines struct {
	grace        time.Duration // how late a deadline job may run
	autoComplete time.Duration
	// stopped is when the instances stopped: nothing moves after it, so
	// what was still open is measured from then, not from the check's
	// clock (the boards' check and the checks before it take a while).
	// Zero means now.
	stopped time.Time
}

// asOf is the time the open work is measured from.
func (dl deadlines) asOf() time.Time {
	if dl.stopped.IsZero() {
		return time.Now()
	}
	return dl.stopped
}

// findings are the checker's results.
type findings struct {
	violations map[string]int
	examples   map[string][]string
	deadJobs   []deadJob
	// retrying lists jobs that failed at least once and are not done:
	// not a violation, but where to look when something is stuck.
	retrying []deadJob
}

type deadJob struct {
	ID     int64  `json:"id"`
	Kind   string `json:"kind"`
	Errors string `json:"last_error"`
}

func (f *findings) add(inv string, n int, example string) {
	f.violations[inv] += n
	if example != "" && len(f.examples[inv]) < 5 {
		f.examples[inv] = append(f.examples[inv], example)
	}
}

// check evaluates every invariant against the database (db is a direct
// connection, not through the fault proxies), the client's
// acknowledgements and the stock each dish was seeded with.
func check(ctx context.Context, db querier, acks []ack, initialStock map[int64]int64, rs *restocks, cl *claims, dl deadlines) (findings, error) {
	f := findings{violations: map[string]int{}, examples: map[string][]string{}}
	for _, inv := range invariantOrder {
		f.violations[inv] = 0
	}
	steps := []func(context.Context, querier, *findings) error{
		checkIntents,
		func(ctx context.Context, db querier, f *findings) error { return checkAcks(ctx, db, acks, f) },
		func(ctx context.Context, db querier, f *findings) error {
			return checkStock(ctx, db, initialStock, f)
		},
		func(ctx context.Context, db querier, f *findings) error { return checkRestocks(ctx, db, rs, f) },
		checkVouchers,
		func(ctx context.Context, db querier, f *findings) error { return checkClaims(ctx, db, cl, f) },
		checkRedemptions,
		checkPromotions,
		checkReservations,
		checkPayments,
		checkHistories,
		checkAcceptDeadlines,
		checkPickupNumbers,
		checkSlots,
		func(ctx context.Context, db querier, f *findings) error { return checkStuck(ctx, db, dl, f) },
		checkJobs,
		checkAnomalies,
		checkLedger,
		func(ctx context.Context, db querier, f *findings) error { return checkSharing(ctx, db, dl, f) },
		func(ctx context.Context, db querier, f *findings) error { return checkAfterSales(ctx, db, dl, f) },
	}
	for _, step := range steps {
		if err := step(ctx, db, &f); err != nil {
			return f, err
		}
	}
	return f, nil
}

func checkIntents(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `SELECT user_id, encode(intent_digest, 'hex'), count(*) FROM orders GROUP BY 1, 2 HAVING count(*) > 1`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var user, n int64
		var digest string
		if err := rows.Scan(&user, &digest, &n); err != nil {
			return err
		}
		f.add(invDuplicateIntent, int(n-1), fmt.Sprintf("user %d digest %s: %d orders", user, digest, n))
	}
	return rows.Err()
}

// checkAcks: every order a 2xx answer named exists; the answers for one
// intent digest all name one order; one purchase (a user's one decision
// to buy, however often retried) got one order, unless its first order
// was cancelled before a later retry legitimately placed a new one.
func checkAcks(ctx context.Context, db querier, acks []ack, f *findings) error {
	ids := map[int64]bool{}
	byDigest := map[string]map[string]bool{}
	byPurchase := map[int64][]string{}
	for _, a := range acks {
		id, err := strconv.ParseInt(a.order, 10, 64)
		if err != nil {
			f.add(invAckMissing, 1, "unparsable order id "+a.order)
			continue
		}
		ids[id] = true
		if byDigest[a.digest] == nil {
			byDigest[a.digest] = map[string]bool{}
		}
		byDigest[a.digest][a.order] = true
		if !contains(byPurchase[a.purchase], a.order) {
			byPurchase[a.purchase] = append(byPurchase[a.purchase], a.order)
		}
	}
	list := make([]int64, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	type orderFacts struct {
		created   time.Time
		cancelled *time.Time
	}
	facts := map[string]orderFacts{}
	rows, err := db.Query(ctx, `SELECT o.id, o.created_at,
	    (SELECT min(h.created_at) FROM order_status_history h WHERE h.order_id = o.id AND h.to_status = 'CANCELLED')
	  FROM orders o WHERE o.id = ANY($1)`, list)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var of orderFacts
		if err := rows.Scan(&id, &of.created, &of.cancelled); err != nil {
			return err
		}
		facts[strconv.FormatInt(id, 10)] = of
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for id := range ids {
		if _, ok := facts[strconv.FormatInt(id, 10)]; !ok {
			f.add(invAckMissing, 1, fmt.Sprintf("order %d acknowledged, not in the database", id))
		}
	}
	for digest, orders := range byDigest {
		if len(orders) > 1 {
			f.add(invAckDiverges, len(orders)-1, fmt.Sprintf("digest %s answered as %v", digest, keys(orders)))
		}
	}
	for pid, orders := range byPurchase {
		for i := 1; i < len(orders); i++ {
			prev, cur := facts[orders[i-1]], facts[orders[i]]
			if prev.cancelled != nil && !cur.created.Before(*prev.cancelled) {
				continue // a re-order after a cancel is a new intent
			}
			f.add(invPurchaseTwoOrders, 1, fmt.Sprintf("purchase %d acknowledged as %v", pid, orders))
		}
	}
	return nil
}

func checkStock(ctx context.Context, db querier, initial map[int64]int64, f *findings) error {
	// A dish's stock is the sum of its shards; each shard must stay at or
	// above zero on its own. Its ledger (every restock, in the restock's
	// transaction) must add up to what is for sale plus every unreleased
	// reservation, and open with what the dish was seeded with; no more
	// units may be sold than were ever put on hand.
	rows, err := db.Query(ctx, `SELECT d.id, d.stock, (SELECT coalesce(min(s.units), 0) FROM dish_stock s WHERE s.dish_id = d.id),
	    coalesce(sum(r.qty) FILTER (WHERE r.released_at IS NULL), 0),
	    -- Sold: units that left with their order, or that an order may
	    -- still take (not given back, by its end or by a partial refund).
	    coalesce(sum(r.qty) FILTER (WHERE r.consumed_at IS NOT NULL
	      OR (r.released_at IS NULL AND o.status NOT IN ('CANCELLED', 'REFUNDING', 'REFUNDED'))), 0),
	    (SELECT coalesce(sum(a.delta), 0) FROM stock_adjustments a WHERE a.dish_id = d.id),
	    (SELECT coalesce(sum(greatest(a.delta, 0)), 0) FROM stock_adjustments a WHERE a.dish_id = d.id),
	    (SELECT coalesce(sum(a.delta), -1) FROM stock_adjustments a WHERE a.dish_id = d.id AND a.kind = 'opening')
	  FROM dishes_with_stock d LEFT JOIN stock_reservations r ON r.dish_id = d.id LEFT JOIN orders o ON o.id = r.order_id
	  GROUP BY d.id, d.stock`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, stock, lowest, held, sold, ledger, supplied, opening int64
		if err := rows.Scan(&id, &stock, &lowest, &held, &sold, &ledger, &supplied, &opening); err != nil {
			return err
		}
		init, known := initial[id]
		if !known {
			f.add(invStockConserved, 1, fmt.Sprintf("dish %d was not seeded", id))
			continue
		}
		if stock < 0 || lowest < 0 {
			f.add(invNegativeStock, 1, fmt.Sprintf("dish %d stock %d, lowest shard %d", id, stock, lowest))
		}
		if opening != init {
			f.add(invStockConserved, 1, fmt.Sprintf("dish %d: seeded %d, its ledger opens with %d", id, init, opening))
		}
		if stock+held != ledger {
			f.add(invStockConserved, 1, fmt.Sprintf("dish %d: ledger %d, stock %d + held %d = %d", id, ledger, stock, held, stock+held))
		}
		if sold > supplied {
			f.add(invOversold, int(sold-supplied), fmt.Sprintf("dish %d: %d units sold of %d ever put on hand", id, sold, supplied))
		}
	}
	return rows.Err()
}

// checkRestocks: every stock adjustment the restocker was told happened
// is in the ledger once, and none it never sent is: a retried delivery is
// counted once.
func checkRestocks(ctx context.Context, db querier, rs *restocks, f *findings) error {
	if rs == nil {
		return nil
	}
	var n, sum int64
	if err := db.QueryRow(ctx, `SELECT count(*), coalesce(sum(delta), 0) FROM stock_adjustments WHERE dish_id = $1 AND kind = 'delta'`, rs.dish).Scan(&n, &sum); err != nil {
		return err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var ackedSum int64
	for k := range rs.acked {
		ackedSum += int64(rs.sent[k])
	}
	switch {
	case n < int64(len(rs.acked)) || n > int64(len(rs.sent)):
		f.add(invRestocksOnce, 1, fmt.Sprintf("dish %d: %d adjustments in the ledger; %d acknowledged of %d sent", rs.dish, n, len(rs.acked), len(rs.sent)))
	case len(rs.acked) == len(rs.sent) && sum != ackedSum:
		f.add(invRestocksOnce, 1, fmt.Sprintf("dish %d: adjustments add up to %d in the ledger, %d acknowledged", rs.dish, sum, ackedSum))
	}
	return nil
}

// checkReservations: an order holds its stock exactly while it may still
// be fulfilled, and every item has its reservation.
func checkReservations(ctx context.Context, db querier, f *findings) error {
	// An order holds what it has not given back while it may still be
	// fulfilled (a partial refund may put units back on sale), its units
	// leave with it when dispatched, and an ended order holds none.
	rows, err := db.Query(ctx, `WITH given AS (
	    SELECT order_id, dish_id, sum(qty) AS qty, sum(restocked_qty) AS restocked FROM order_items GROUP BY order_id, dish_id)
	  SELECT o.id, o.status, r.released_at IS NOT NULL
	  FROM stock_reservations r JOIN orders o ON o.id = r.order_id JOIN given g ON g.order_id = r.order_id AND g.dish_id = r.dish_id
	  WHERE (r.consumed_at IS NOT NULL AND (r.released_at IS NOT NULL OR o.status NOT IN ('DELIVERING', 'COMPLETED', 'REFUNDED')))
	     OR (r.consumed_at IS NULL AND r.released_at IS NULL AND o.status IN ('DELIVERING', 'COMPLETED', 'CANCELLED', 'REFUNDING', 'REFUNDED'))
	     OR (o.status IN ('PENDING_PAYMENT', 'PAID', 'ACCEPTED', 'READY') AND r.released_at IS NULL AND r.qty <> g.qty - g.restocked)
	     OR (o.status IN ('PENDING_PAYMENT', 'PAID', 'ACCEPTED', 'READY') AND r.released_at IS NOT NULL AND g.restocked <> g.qty)
	  UNION ALL
	  SELECT i.order_id, 'item without reservation', false
	  FROM order_items i LEFT JOIN stock_reservations r ON r.order_id = i.order_id AND r.dish_id = i.dish_id
	  WHERE r.order_id IS NULL`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var status string
		var released bool
		if err := rows.Scan(&id, &status, &released); err != nil {
			return err
		}
		f.add(invReservations, 1, fmt.Sprintf("order %d %s released=%v", id, status, released))
	}
	return rows.Err()
}

// checkPayments: money taken is kept once per fulfilled order and given
// back for everything else.
func checkPayments(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `WITH paid AS (
	    SELECT p.order_id, p.id,
	           -- Given back for good: all of it, maybe over several partial refunds.
	           (SELECT coalesce(sum(r.amount_fen), 0) FROM refunds r WHERE r.payment_id = p.id AND r.transaction_id IS NULL
	              AND r.status IN ('SUCCESS', 'SETTLED')) >= p.amount_fen AS refunded
	    FROM payments p WHERE p.transaction_id IS NOT NULL)
	  SELECT o.id, o.status, count(paid.id) FILTER (WHERE NOT paid.refunded)
	  FROM orders o LEFT JOIN paid ON paid.order_id = o.id GROUP BY o.id, o.status`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, kept int64
		var status string
		if err := rows.Scan(&id, &status, &kept); err != nil {
			return err
		}
		switch {
		case kept > 1:
			f.add(invPaidTwice, 1, fmt.Sprintf("order %d %s keeps %d payments", id, status, kept))
		case kept > 0 && (status == "CANCELLED" || status == "REFUNDED"):
			f.add(invMoneyKept, 1, fmt.Sprintf("order %d %s keeps a payment", id, status))
		case kept == 0 && (status == "PAID" || status == "ACCEPTED" || status == "READY" || status == "DELIVERING" || status == "COMPLETED"):
			f.add(invPaidWithoutPayment, 1, fmt.Sprintf("order %d %s has no kept payment", id, status))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// Money owed and stuck: a refund that failed at the platform and that
	// nobody retried or settled.
	rows, err = db.Query(ctx, `SELECT out_refund_no, order_id FROM refunds WHERE status = 'FAILED'`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var no string
		var orderID int64
		if err := rows.Scan(&no, &orderID); err != nil {
			return err
		}
		f.add(invMoneyKept, 1, fmt.Sprintf("refund %s of order %d failed and waits for an operator", no, orderID))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = db.Query(ctx, `SELECT p.id, p.amount_fen, sum(r.amount_fen), count(*)
	  FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE r.status NOT IN ('FAILED', 'RETRIED') AND r.transaction_id IS NULL
	  GROUP BY p.id, p.amount_fen HAVING sum(r.amount_fen) > p.amount_fen`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, amount, refunded, n int64
		if err := rows.Scan(&id, &amount, &refunded, &n); err != nil {
			return err
		}
		f.add(invRefundExceeds, 1, fmt.Sprintf("payment %d of %d refunded %d in %d refunds", id, amount, refunded, n))
	}
	return rows.Err()
}

// checkHistories: each order's history starts at PENDING_PAYMENT, moves
// only along the state table by allowed actors, one version at a time,
// and ends at the order's status and version.
func checkHistories(ctx context.Context, db querier, f *findings) error {
	type edge struct{ from, to statemachine.Status }
	allowed := map[edge]map[statemachine.Actor]bool{}
	for _, t := range statemachine.Table() {
		e := edge{t.From, t.To}
		if allowed[e] == nil {
			allowed[e] = map[statemachine.Actor]bool{}
		}
		for _, a := range t.Actors {
			allowed[e][a] = true
		}
	}
	rows, err := db.Query(ctx, `SELECT o.id, o.status, o.version, h.from_status, h.to_status, h.version, h.actor
	  FROM orders o LEFT JOIN order_status_history h ON h.order_id = o.id ORDER BY o.id, h.version`)
	if err != nil {
		return err
	}
	var (
		cur               int64 = -1
		curStatus, last   string
		curVersion, lastV int64
		broken            string
	)
	finish := func() {
		if cur < 0 {
			return
		}
		if broken == "" && (last != curStatus || lastV != curVersion) {
			broken = fmt.Sprintf("ends at %s v%d, order is %s v%d", last, lastV, curStatus, curVersion)
		}
		if broken != "" {
			f.add(invHistoryPath, 1, fmt.Sprintf("order %d: %s", cur, broken))
		}
	}
	for rows.Next() {
		var id, version int64
		var status string
		var from, to, actor *string
		var hv *int64
		if err := rows.Scan(&id, &status, &version, &from, &to, &hv, &actor); err != nil {
			return err
		}
		if id != cur {
			finish()
			cur, curStatus, curVersion, last, lastV, broken = id, status, version, "", 0, ""
		}
		if broken != "" {
			continue
		}
		if to == nil {
			broken = "no history"
			continue
		}
		switch {
		case lastV == 0:
			if from != nil || *to != string(statemachine.PendingPayment) || *hv != 1 {
				broken = fmt.Sprintf("starts %v -> %s v%d", deref(from), *to, *hv)
			}
		case from == nil || *from != last || *hv != lastV+1:
			broken = fmt.Sprintf("v%d %s -> %s after v%d %s", *hv, deref(from), *to, lastV, last)
		default:
			actors, ok := allowed[edge{statemachine.Status(*from), statemachine.Status(*to)}]
			kind, _, _ := strings.Cut(deref(actor), ":")
			if !ok {
				broken = fmt.Sprintf("%s -> %s is not in the state table", *from, *to)
			} else if !actors[statemachine.Actor(kind)] {
				broken = fmt.Sprintf("%s -> %s by %s", *from, *to, deref(actor))
			}
		}
		last, lastV = *to, *hv
	}
	if err := rows.Err(); err != nil {
		return err
	}
	finish()
	return nil
}

// checkStuck: nothing waits past its deadline once the settle period is
// over: unpaid orders past the pay deadline are cancelled, paid ones past
// their accept deadline moved on, refunds finish,
// forgotten deliveries auto-complete, cancelled orders' payments close.
func checkStuck(ctx context.Context, db querier, dl deadlines, f *findings) error {
	rows, err := db.Query(ctx, `
	  SELECT 'order ' || id || ' PENDING_PAYMENT past its pay deadline' FROM orders
	   WHERE status = 'PENDING_PAYMENT' AND pay_deadline < $3::timestamptz - $1::interval
	  UNION ALL
	  SELECT 'order ' || id || ' PAID past its accept deadline ' || accept_by FROM orders
	   WHERE status = 'PAID' AND accept_by < $3::timestamptz - $1::interval
	  UNION ALL
	  SELECT 'accept deadline of order ' || order_id || ' due at ' || accept_by || ' never swept' FROM order_accept_deadlines
	   WHERE accept_by < $3::timestamptz - $1::interval
	  UNION ALL
	  SELECT 'order ' || id || ' REFUNDING since ' || updated_at FROM orders
	   WHERE status = 'REFUNDING' AND updated_at < $3::timestamptz - $1::interval
	  UNION ALL
	  SELECT 'order ' || id || ' DELIVERING past auto-complete' FROM orders
	   WHERE status = 'DELIVERING' AND updated_at < $3::timestamptz - $1::interval - $2::interval
	  UNION ALL
	  SELECT 'refund ' || id || ' ' || status || ' since ' || created_at FROM refunds
	   WHERE status IN ('PENDING', 'PROCESSING') AND created_at < $3::timestamptz - $1::interval
	  UNION ALL
	  SELECT 'payment ' || p.id || ' open on cancelled order ' || o.id FROM payments p JOIN orders o ON o.id = p.order_id
	   WHERE p.status = 'CREATED' AND o.status = 'CANCELLED' AND o.updated_at < $3::timestamptz - $1::interval`,
		dl.grace.String(), dl.autoComplete.String(), dl.asOf())
	if err != nil {
		return err
	}
	for rows.Next() {
		var what string
		if err := rows.Scan(&what); err != nil {
			return err
		}
		f.add(invStuck, 1, what)
	}
	return rows.Err()
}

// checkAnomalies: the soak never sends a mismatching payment, so any
// anomaly row is a fault of ours.
func checkAnomalies(ctx context.Context, db querier, f *findings) error {
	var anomalies int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM payment_anomalies`).Scan(&anomalies); err != nil {
		return err
	}
	f.add(invAnomalies, anomalies, "")
	return nil
}

func checkJobs(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `SELECT id, kind, coalesce(errors[array_length(errors, 1)]->>'error', '')
	  FROM river_job WHERE state = 'discarded' ORDER BY id`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var j deadJob
		if err := rows.Scan(&j.ID, &j.Kind, &j.Errors); err != nil {
			return err
		}
		f.deadJobs = append(f.deadJobs, j)
		f.add(invDeadJobs, 1, fmt.Sprintf("job %d %s: %s", j.ID, j.Kind, j.Errors))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = db.Query(ctx, `SELECT id, kind || ' ' || state || ' attempt ' || attempt || ' next ' || scheduled_at,
	    coalesce(errors[array_length(errors, 1)]->>'error', '')
	  FROM river_job WHERE state NOT IN ('completed', 'discarded', 'cancelled') AND attempt > 0 ORDER BY id LIMIT 50`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var j deadJob
		if err := rows.Scan(&j.ID, &j.Kind, &j.Errors); err != nil {
			return err
		}
		f.retrying = append(f.retrying, j)
	}
	return rows.Err()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
