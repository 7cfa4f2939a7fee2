package order_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
)

// place submits a fresh one-dish order and returns its id.
func (e benchEnv) place(t testing.TB, seq *atomic.Int64, dish int64) int64 {
	t.Helper()
	n := int(seq.Add(1))
	out, err := e.svc.Submit(context.Background(), e.user, fmt.Sprintf("place-%d", n), e.token(t, n, dish), order.PlacedReply)
	if err != nil || out.Response.Status != 201 {
		t.Fatalf("place: %v %+v", err, out)
	}
	var id int64
	if err := e.pool.QueryRow(context.Background(), "SELECT order_id FROM idempotency_records WHERE key = $1", fmt.Sprintf("place-%d", n)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e benchEnv) status(t testing.TB, id int64) string {
	t.Helper()
	var s string
	if err := e.pool.QueryRow(context.Background(), "SELECT status FROM orders WHERE id = $1", id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func (e benchEnv) stock(t testing.TB, dish int64) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT stock FROM dishes_with_stock WHERE id = $1", dish).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func slug(err error) string {
	if p, ok := problem.As(err); ok {
		return p.Type.Slug
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

var (
	system  = order.Actor{Kind: statemachine.System, Name: "test"}
	payment = order.Actor{Kind: statemachine.Payment, Name: "test"}
	admin   = order.Actor{Kind: statemachine.Admin, Name: "test"}
)

// Random actions by random actors against the database: every history is
// a path in the table, refused actions change nothing, and stock is
// conserved (stock + live reservations = initial).
func TestLifecycleProperty(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	var seq atomic.Int64
	initial := e.stock(t, e.dishes[0])
	owner := order.Actor{Kind: statemachine.User, UserID: e.user}
	stranger := order.Actor{Kind: statemachine.User, UserID: e.user + 1000}
	staff := order.Actor{Kind: statemachine.Merchant, MerchantID: e.merchant, Name: "chef"}
	otherStaff := order.Actor{Kind: statemachine.Merchant, MerchantID: e.merchant + 1000, Name: "spy"}
	actors := []order.Actor{owner, stranger, staff, otherStaff, admin, system, payment}
	events := []statemachine.Event{statemachine.Pay, statemachine.Cancel, statemachine.Timeout, statemachine.Accept, statemachine.Reject,
		statemachine.Refund, statemachine.MarkReady, statemachine.Dispatch, statemachine.Complete, statemachine.AutoComplete, statemachine.RefundDone}

	rapid.Check(t, func(rt *rapid.T) {
		ids := []int64{e.place(t, &seq, e.dishes[0])}
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for range steps {
			if rapid.IntRange(0, 9).Draw(rt, "new order") == 0 {
				ids = append(ids, e.place(t, &seq, e.dishes[0]))
			}
			id := rapid.SampledFrom(ids).Draw(rt, "order")
			ev := rapid.SampledFrom(events).Draw(rt, "event")
			actor := rapid.SampledFrom(actors).Draw(rt, "actor")
			before := e.status(t, id)
			a, err := e.svc.Apply(ctx, id, ev, actor, "property")
			after := e.status(t, id)
			d, derr := statemachine.Default().Decide(statemachine.Status(before), ev, actor.Kind)
			switch {
			case actor == stranger || actor == otherStaff:
				if slug(err) != "not-found" || after != before {
					rt.Fatalf("%s by an outsider on %s: %v, now %s", ev, before, err, after)
				}
			case derr != nil:
				if err == nil || after != before {
					rt.Fatalf("%s by %s on %s: allowed (%v), now %s", ev, actor.Kind, before, err, after)
				}
			case d.Replay:
				if err != nil || !a.Replayed || after != before {
					rt.Fatalf("%s by %s on %s: want a replay, got %v %+v", ev, actor.Kind, before, err, a)
				}
			default:
				if err != nil || after != string(d.Transition.To) {
					rt.Fatalf("%s by %s on %s: %v, now %s, want %s", ev, actor.Kind, before, err, after, d.Transition.To)
				}
			}
		}
		checkHistories(t, e)
		var live int
		if err := e.pool.QueryRow(ctx, "SELECT coalesce(sum(qty), 0) FROM stock_reservations WHERE dish_id = $1 AND released_at IS NULL", e.dishes[0]).Scan(&live); err != nil {
			t.Fatal(err)
		}
		if got := e.stock(t, e.dishes[0]); got+live != initial {
			rt.Fatalf("stock %d + reserved %d != initial %d", got, live, initial)
		}
		checkReservations(t, e)
	})
}

// checkReservations asserts that orders that ended unfulfilled hold no
// stock, orders not yet dispatched hold all of their items' stock (but
// what partial refunds put back on sale), and dispatched ones hold none
// unconsumed.
func checkReservations(t testing.TB, e benchEnv) {
	t.Helper()
	var wrong int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders o WHERE
		(SELECT coalesce(sum(qty), 0) FROM stock_reservations r WHERE r.order_id = o.id AND r.released_at IS NULL AND r.consumed_at IS NULL) <>
		CASE WHEN o.status IN ('PENDING_PAYMENT', 'PAID', 'ACCEPTED', 'READY')
		     THEN (SELECT sum(qty - restocked_qty) FROM order_items i WHERE i.order_id = o.id) ELSE 0 END
		OR (o.status IN ('DELIVERING', 'COMPLETED') AND EXISTS (SELECT 1 FROM stock_reservations r WHERE r.order_id = o.id AND r.consumed_at IS NULL AND r.released_at IS NULL))`).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 {
		t.Fatalf("%d orders hold the wrong stock for their status", wrong)
	}
}

// checkHistories asserts every order's history is a path of the table.
func checkHistories(t testing.TB, e benchEnv) {
	t.Helper()
	edges := map[[2]string]bool{}
	for _, tr := range statemachine.Table() {
		edges[[2]string{string(tr.From), string(tr.To)}] = true
	}
	rows, err := e.pool.Query(context.Background(), "SELECT order_id, coalesce(from_status, ''), to_status, version FROM order_status_history ORDER BY order_id, version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[int64]string{}
	for rows.Next() {
		var id, version int64
		var from, to string
		if err := rows.Scan(&id, &from, &to, &version); err != nil {
			t.Fatal(err)
		}
		prev, seen := last[id]
		switch {
		case !seen && (from != "" || to != string(statemachine.PendingPayment)):
			t.Fatalf("order %d starts %q -> %s", id, from, to)
		case seen && (from != prev || !edges[[2]string{from, to}]):
			t.Fatalf("order %d: %s then %s -> %s is not a path of the table", id, prev, from, to)
		}
		last[id] = to
	}
	var drift int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders o WHERE o.status <>
		(SELECT to_status FROM order_status_history h WHERE h.order_id = o.id ORDER BY version DESC LIMIT 1)`).Scan(&drift); err != nil {
		t.Fatal(err)
	}
	if drift != 0 {
		t.Fatalf("%d orders whose status is not their last history row", drift)
	}
}

// Merchant accept racing user cancel on a paid order, 100 times: exactly
// one wins, the other gets 409, and stock is released only when cancel won.
func TestAcceptRacesCancel(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	var seq atomic.Int64
	dish := e.dishes[1]
	initial := e.stock(t, dish)
	staff := order.Actor{Kind: statemachine.Merchant, MerchantID: e.merchant, Name: "chef"}
	owner := order.Actor{Kind: statemachine.User, UserID: e.user}
	wins := map[string]int{}
	for range 100 {
		id := e.place(t, &seq, dish)
		if _, err := e.svc.Apply(ctx, id, statemachine.Pay, payment, "paid"); err != nil {
			t.Fatal(err)
		}
		var acceptErr, cancelErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, acceptErr = e.svc.Apply(ctx, id, statemachine.Accept, staff, "race") })
		wg.Go(func() { _, cancelErr = e.svc.Apply(ctx, id, statemachine.Cancel, owner, "race") })
		wg.Wait()
		switch {
		case acceptErr == nil && slug(cancelErr) == "order-status-conflict":
			wins["accept"]++
			if s := e.status(t, id); s != "ACCEPTED" {
				t.Fatalf("accept won but the order is %s", s)
			}
		case cancelErr == nil && slug(acceptErr) == "order-status-conflict":
			wins["cancel"]++
			if s := e.status(t, id); s != "REFUNDING" {
				t.Fatalf("cancel won but the order is %s", s)
			}
		default:
			t.Fatalf("accept: %v, cancel: %v: want exactly one winner", acceptErr, cancelErr)
		}
	}
	// Stock comes back exactly for the orders cancel won.
	if got := e.stock(t, dish); got != initial-wins["accept"] {
		t.Errorf("stock %d, want %d (%v)", got, initial-wins["accept"], wins)
	}
	t.Logf("winners: %v", wins)
	checkHistories(t, e)
	checkReservations(t, e)
}

// The payment timeout racing a payment: exactly one wins; stock is
// released only when the timeout won; the job is harmless either way.
func TestTimeoutRacesPayment(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	var seq atomic.Int64
	dish := e.dishes[2]
	initial := e.stock(t, dish)
	cancelled := 0
	for range 50 {
		id := e.place(t, &seq, dish)
		var payErr, timeoutErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, payErr = e.svc.Apply(ctx, id, statemachine.Pay, payment, "paid") })
		wg.Go(func() { _, timeoutErr = e.svc.Apply(ctx, id, statemachine.Timeout, system, "deadline") })
		wg.Wait()
		s := e.status(t, id)
		switch {
		case payErr == nil && slug(timeoutErr) == "order-status-conflict" && s == "PAID":
		case timeoutErr == nil && slug(payErr) == "order-status-conflict" && s == "CANCELLED":
			cancelled++
		default:
			t.Fatalf("pay: %v, timeout: %v, status %s", payErr, timeoutErr, s)
		}
		// The timeout job running again later changes nothing.
		if _, err := e.svc.Apply(ctx, id, statemachine.Timeout, system, "again"); err != nil && slug(err) != "order-status-conflict" {
			t.Fatal(err)
		}
		if e.status(t, id) != s {
			t.Fatal("a second timeout changed the order")
		}
	}
	if got := e.stock(t, dish); got != initial-(50-cancelled) {
		t.Errorf("stock %d, want %d", got, initial-(50-cancelled))
	}
	var histories int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM order_status_history").Scan(&histories); err != nil {
		t.Fatal(err)
	}
	if histories != 100 {
		t.Errorf("%d history rows, want 100 (placed + one winner each)", histories)
	}
}
