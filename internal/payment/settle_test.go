package payment

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/webhook"
)

// paidRows is what a successful payment leaves in the database for one
// order, with its ids and times left out so two orders compare.
type paidRows struct {
	Status        statemachine.Status
	Version       int64
	Payment       string
	PaidAt        time.Time
	Notifications []string // event_type/outcome
	History       []string // from>to@version by actor: reason
	Events        []string // type@version
	Refunds       int
	Jobs          int
}

func (f *fixture) paidRows(t *testing.T, orderID int64, txn string) paidRows {
	t.Helper()
	ctx := context.Background()
	var r paidRows
	// The transaction ids differ by order: each reads as TXN.
	if err := f.pool.QueryRow(ctx, `SELECT o.status, o.version, p.status || '/' || replace(coalesce(p.transaction_id, ''), $2, 'TXN'),
		coalesce(p.paid_at, 'epoch') FROM orders o JOIN payments p ON p.order_id = o.id WHERE o.id = $1`, orderID, txn).
		Scan(&r.Status, &r.Version, &r.Payment, &r.PaidAt); err != nil {
		t.Fatal(err)
	}
	r.Notifications = f.strings(t, `SELECT event_type || '/' || outcome FROM payment_notifications WHERE order_id = $1 ORDER BY id`, orderID)
	r.History = f.strings(t, `SELECT coalesce(from_status, '') || '>' || to_status || '@' || version || ' by ' || actor || ': ' || replace(reason, $2, 'TXN')
		FROM order_status_history WHERE order_id = $1 ORDER BY version`, orderID, txn)
	r.Events = f.strings(t, `SELECT type || '@' || (body->>'version') FROM order_events WHERE order_id = $1 ORDER BY seq`, orderID)
	r.Refunds = f.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", orderID)
	r.Jobs = f.count(t, "SELECT count(*) FROM river_job WHERE args->>'order_id' = $1", strconv.FormatInt(orderID, 10))
	return r
}

func (f *fixture) strings(t *testing.T, query string, args ...any) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// paidEvent is the order event of orderID's payment, with the order it
// states.
func (f *fixture) paidEvent(t *testing.T, orderID int64) (webhook.Event, order.Order) {
	t.Helper()
	var body []byte
	if err := f.pool.QueryRow(context.Background(), "SELECT body FROM order_events WHERE order_id = $1 AND type = 'order.paid'", orderID).Scan(&body); err != nil {
		t.Fatal(err)
	}
	var ev webhook.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	var o order.Order
	if err := json.Unmarshal(ev.Order, &o); err != nil {
		t.Fatal(err)
	}
	return ev, o
}

// A successful payment applied in one statement (payment_settle) writes
// what the transaction path writes: the order PAID at version 2, the
// payment SUCCESS with the platform's time, one notification, one history
// row, one order.paid event that states the order exactly as it reads
// afterwards, and no refund; a redelivery to an instance that remembers
// nothing changes nothing on either.
func TestOneStatementPaymentWritesWhatTheTransactionWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	src := Source{Kind: "v3", NotificationID: "one", EventType: "TRANSACTION.SUCCESS"}

	direct, noDirect := f.order(t, statemachine.PendingPayment)
	if err := f.svc.HandleTransaction(ctx, src, paid(noDirect, "4200000101", 1200)); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(f.svc.successPaths.WithLabelValues("one_statement")); got != 1 {
		t.Fatalf("one_statement path counted %v times, want 1", got)
	}
	viaTx, noTx := f.order(t, statemachine.PendingPayment)
	src.NotificationID = "two"
	if outcome, err := f.svc.applyTransaction(ctx, src, paid(noTx, "4200000102", 1200)); err != nil || outcome != "applied" {
		t.Fatalf("transaction path: %q, %v", outcome, err)
	}
	if got := testutil.ToFloat64(f.svc.successPaths.WithLabelValues("transaction")); got != 1 {
		t.Fatalf("transaction path counted %v times, want 1", got)
	}

	want := paidRows{Status: statemachine.Paid, Version: 2, Payment: "SUCCESS/TXN", PaidAt: time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC),
		Notifications: []string{"TRANSACTION.SUCCESS/SUCCESS"},
		History:       []string{"PENDING_PAYMENT>PAID@2 by payment:v3: paid TXN"},
		Events:        []string{"order.paid@2"}}
	for _, c := range []struct {
		name string
		id   int64
		txn  string
	}{{"one statement", direct, "4200000101"}, {"transaction", viaTx, "4200000102"}} {
		if diff := cmp.Diff(want, f.paidRows(t, c.id, c.txn), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("%s: rows (-want +got):\n%s", c.name, diff)
		}
		ev, stated := f.paidEvent(t, c.id)
		now, err := f.svc.o.Orders.Get(ctx, f.user, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(now, stated); diff != "" {
			t.Errorf("%s: the event states the order otherwise than it reads (-reads +states):\n%s", c.name, diff)
		}
		if !ev.OccurredAt.Equal(now.UpdatedAt) || ev.Status != string(statemachine.Paid) || ev.Version != 2 || ev.ID != webhook.EventID(c.id, "order.paid", 2) {
			t.Errorf("%s: event %+v, want it to name the order's change at version 2, %v", c.name, ev, now.UpdatedAt)
		}
		// Another instance, with nothing remembered, takes a redelivery
		// for a duplicate.
		before := f.paidRows(t, c.id, c.txn)
		redelivery := Source{Kind: "v3", NotificationID: "again-" + c.txn, EventType: "TRANSACTION.SUCCESS"}
		if err := f.newService(t).HandleTransaction(ctx, redelivery, paid(OutTradeNo(c.id, 1), c.txn, 1200)); err != nil {
			t.Fatalf("%s: redelivery: %v", c.name, err)
		}
		after := f.paidRows(t, c.id, c.txn)
		after.Notifications = after.Notifications[:1] // a new id for a known transaction is not recorded
		if diff := cmp.Diff(before, after, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("%s: a redelivery changed (-before +after):\n%s", c.name, diff)
		}
	}
}

// An order that is no longer waiting for payment when payment_settle
// runs (cancelled in the moment before) fails the statement whole: no
// notification, no payment change, no event; the transaction path then
// applies the payment to the order as it now is: a late payment, refunded.
func TestOneStatementPaymentRefusesAnOrderThatMoved(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id, no := f.order(t, statemachine.PendingPayment)
	tr := paid(no, "4200000201", 1200)
	src := Source{Kind: "v3", NotificationID: "moved", EventType: "TRANSACTION.SUCCESS"}

	dt, ok := f.svc.o.Orders.PrepareDirect(statemachine.PendingPayment, statemachine.Pay, paymentActor(src), "paid")
	if !ok {
		t.Fatal("a payment of a waiting order cannot be prepared for one statement")
	}
	if _, err := f.pool.Exec(ctx, "UPDATE orders SET status = 'CANCELLED', version = version + 1 WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.q.PaymentSettle(ctx, f.pool, dbsqlc.PaymentSettleParams{Channel: Channel, Mchid: testMchID, OutTradeNo: no, Appid: testAppID,
		AmountFen: 1200, Currency: "CNY", NotificationID: src.NotificationID, TransactionID: tr.TransactionID, PaidAt: time.Now(),
		FromStatus: string(dt.From), ToStatus: string(dt.To), UpdatedAt: dt.UpdatedAt, Actor: dt.Actor, Reason: dt.Reason, EventType: dt.EventType})
	if !db.Raised(err, codeOrderMoved) {
		t.Fatalf("payment_settle on a cancelled order: %v, want SQLSTATE %s", err, codeOrderMoved)
	}
	if n := f.count(t, "SELECT count(*) FROM payment_notifications") + f.count(t, "SELECT count(*) FROM payments WHERE status = 'SUCCESS'") +
		f.count(t, "SELECT count(*) FROM order_events") + f.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND version > 1", id); n != 0 {
		t.Fatalf("the refused statement left %d rows", n)
	}
	if err := f.svc.HandleTransaction(ctx, src, tr); err != nil {
		t.Fatal(err)
	}
	if got := f.paidRows(t, id, tr.TransactionID); got.Status != statemachine.Cancelled || got.Version != 2 || len(got.Events) != 0 || got.Refunds != 1 {
		t.Errorf("after the transaction path: %+v, want CANCELLED at version 2, no event, the payment refunded once", got)
	}
	if got := testutil.ToFloat64(f.svc.successPaths.WithLabelValues("transaction")); got != 1 {
		t.Errorf("transaction path counted %v times, want 1", got)
	}
}

// A payment and the customer's cancel, at the same instant on two
// instances, 20 times: the cancel always succeeds and the money goes back
// exactly once, whichever came first: paid first, the order is PAID then
// REFUNDING (the cancel asks for the refund); cancelled first, it stays
// CANCELLED and the late payment is refunded. Each change has one history
// row and one event, and the payment one notification.
func TestPaymentRacingACancelSettlesOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := f.newService(t)
	orders := other.o.Orders.(*order.Service)
	ctx := context.Background()
	for round := range 20 {
		id, no := f.order(t, statemachine.PendingPayment)
		txn := "42000003" + strconv.Itoa(round)
		var payErr, cancelErr error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			payErr = f.svc.HandleTransaction(ctx, Source{Kind: "v3", NotificationID: "race-" + txn, EventType: "TRANSACTION.SUCCESS"}, paid(no, txn, 1200))
		})
		wg.Go(func() {
			<-start
			_, cancelErr = orders.Apply(ctx, id, statemachine.Cancel, order.Actor{Kind: statemachine.User, UserID: f.user}, "changed my mind")
		})
		close(start)
		wg.Wait()
		if payErr != nil {
			t.Fatalf("round %d: payment: %v", round, payErr)
		}
		got := f.paidRows(t, id, txn)
		if cancelErr != nil || got.Refunds != 1 || got.Payment != "SUCCESS/TXN" {
			t.Errorf("round %d: cancel %v, %d refunds, payment %s; want the cancel done and one refund of the paid payment", round, cancelErr, got.Refunds, got.Payment)
		}
		var want []string
		switch got.Status {
		case statemachine.Refunding:
			want = []string{"order.paid@2", "order.refunding@3"}
		case statemachine.Cancelled:
			want = []string{"order.cancelled@2"}
		default:
			t.Errorf("round %d: order %s", round, got.Status)
		}
		if !cmp.Equal(got.Events, want) || len(got.History) != len(want) {
			t.Errorf("round %d: %s with events %v and history %v, want events %v", round, got.Status, got.Events, got.History, want)
		}
		if len(got.Notifications) != 1 {
			t.Errorf("round %d: notifications %v, want one", round, got.Notifications)
		}
	}
}

// Three payments committed together, the middle one's order cancelled the
// moment before: its neighbours are applied and it answers moved having
// written nothing (no notification, the payment still open, no history
// row), without a subtransaction to undo it (migration 00027).
func TestGroupedPaymentAnswersMovedAndSparesItsNeighbours(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var ids []int64
	var params []dbsqlc.PaymentSettleParams
	for i := range 3 {
		id, no := f.order(t, statemachine.PendingPayment)
		src := Source{Kind: "v3", NotificationID: "grouped-" + strconv.Itoa(i), EventType: "TRANSACTION.SUCCESS"}
		dt, ok := f.svc.o.Orders.PrepareDirect(statemachine.PendingPayment, statemachine.Pay, paymentActor(src), "paid")
		if !ok {
			t.Fatal("a payment of a waiting order cannot be prepared for one statement")
		}
		ids = append(ids, id)
		params = append(params, dbsqlc.PaymentSettleParams{Channel: Channel, Mchid: testMchID, OutTradeNo: no, Appid: testAppID,
			AmountFen: 1200, Currency: "CNY", NotificationID: src.NotificationID, TransactionID: "42000004" + strconv.Itoa(i), PaidAt: time.Now(),
			FromStatus: string(dt.From), ToStatus: string(dt.To), UpdatedAt: dt.UpdatedAt, Actor: dt.Actor, Reason: dt.Reason, EventType: dt.EventType})
	}
	if _, err := f.pool.Exec(ctx, "UPDATE orders SET status = 'CANCELLED', version = version + 1 WHERE id = $1", ids[1]); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.succeedTogether(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"applied", outcomeMoved, "applied"}, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	var statuses []string
	for _, id := range ids {
		var s string
		if err := f.pool.QueryRow(ctx, "SELECT status FROM orders WHERE id = $1", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, s)
	}
	if diff := cmp.Diff([]string{"PAID", "CANCELLED", "PAID"}, statuses); diff != "" {
		t.Errorf("orders (-want +got):\n%s", diff)
	}
	if n := f.count(t, "SELECT count(*) FROM payment_notifications WHERE order_id = $1", ids[1]) +
		f.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status <> 'CREATED'", ids[1]) +
		f.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'", ids[1]); n != 0 {
		t.Errorf("the moved payment left %d rows", n)
	}
	if n := f.count(t, "SELECT count(*) FROM payment_notifications"); n != 2 {
		t.Errorf("%d notifications recorded, want 2", n)
	}
}

// The one-statement path writes a transition whose effects it knows (the
// history row and the outbox event). Change nothing but the state
// table's effects of a payment (PENDING_PAYMENT -> PAID gains one) and
// the callback takes the transaction path, where the new effect runs: no
// effect is skipped because the fast path does not know it.
func TestAnEffectAddedToTheTableTurnsTheFastPathAway(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	table := statemachine.Table()
	changed := 0
	for i, tr := range table {
		if tr.From == statemachine.PendingPayment && tr.Event == statemachine.Pay {
			table[i].Effects = append(table[i].Effects, statemachine.ScheduleAutoComplete)
			changed++
		}
	}
	if changed != 1 {
		t.Fatalf("the table has %d payment transitions from PENDING_PAYMENT, want 1", changed)
	}
	f.lifecycle = statemachine.New(table)
	svc := f.newService(t)

	id, no := f.order(t, statemachine.PendingPayment)
	src := Source{Kind: "v3", NotificationID: "effect", EventType: "TRANSACTION.SUCCESS"}
	if err := svc.HandleTransaction(ctx, src, paid(no, "4200000301", 1200)); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(svc.successPaths.WithLabelValues("one_statement")); got != 0 {
		t.Errorf("one_statement path counted %v times, want 0: it does not write the new effect", got)
	}
	if got := testutil.ToFloat64(svc.successPaths.WithLabelValues("transaction")); got != 1 {
		t.Errorf("transaction path counted %v times, want 1", got)
	}
	if n := f.count(t, `SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'`, id); n != 1 {
		t.Errorf("the order is not PAID")
	}
	if n := f.count(t, `SELECT count(*) FROM river_job WHERE kind = 'order.auto_complete' AND (args->>'order_id')::bigint = $1`, id); n != 1 {
		t.Errorf("%d auto-complete jobs for the order, want 1: the added effect ran", n)
	}

	// The table as it is: the same callback takes the one statement.
	f.lifecycle = nil
	plain := f.newService(t)
	id2, no2 := f.order(t, statemachine.PendingPayment)
	src.NotificationID = "plain"
	if err := plain.HandleTransaction(ctx, src, paid(no2, "4200000302", 1200)); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(plain.successPaths.WithLabelValues("one_statement")); got != 1 {
		t.Errorf("with the table as it is, one_statement path counted %v times, want 1", got)
	}
	if n := f.count(t, `SELECT count(*) FROM river_job WHERE kind = 'order.auto_complete' AND (args->>'order_id')::bigint = $1`, id2); n != 0 {
		t.Errorf("%d auto-complete jobs for a plain payment, want 0", n)
	}
}
