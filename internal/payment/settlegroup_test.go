package payment

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/takeout/takeout/internal/statemachine"
)

// metricValue reads one metric of reg by name: a gauge's or counter's
// value, or a histogram's count of samples above over (all of them for
// 0).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, over float64) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		m := f.GetMetric()[0]
		switch f.GetType() {
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			if over == 0 {
				return float64(h.GetSampleCount())
			}
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() == over {
					return float64(h.GetSampleCount() - b.GetCumulativeCount())
				}
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// lockPayment holds the payment row of out_trade_no no in a transaction
// of its own until the returned transaction ends (or the test does).
func (f *fixture) lockPayment(t *testing.T, no string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "SELECT 1 FROM payments WHERE out_trade_no = $1 FOR UPDATE", no); err != nil {
		t.Fatal(err)
	}
	return tx
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Payment successes that arrive while a group commits are committed
// together, each with its own outcome: every order is paid once, with
// one notification, one history row and one event; an order cancelled
// while its payment waited (its statement answers moved, undoing only its
// own rows) gets the transaction path's late payment, refunded once, and
// no other payment of its group is undone.
func TestGroupCommitPaysEachOrderOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	svc := f.newServiceWith(t, func(o *Options) { o.Registerer, o.GroupCommitMax, o.GroupCommitSlots = reg, 32, 1 })
	src := func(n string) Source { return Source{Kind: "v3", NotificationID: n, EventType: "TRANSACTION.SUCCESS"} }

	// The slot held: a payment whose statement waits for the lock another
	// transaction holds on its row.
	heldID, heldNo := f.order(t, statemachine.PendingPayment)
	holder := f.lockPayment(t, heldNo)
	heldDone := make(chan error, 1)
	go func() { heldDone <- svc.HandleTransaction(ctx, src("held"), paid(heldNo, "4200009000", 1200)) }()
	waitFor(t, "the held payment in its statement", func() bool {
		return metricValue(t, reg, "takeout_db_group_commit_size", 0) >= 1
	})

	const payments = 20
	ids := make([]int64, payments)
	errs := make([]error, payments+1)
	var wg sync.WaitGroup
	for i := range payments {
		id, no := f.order(t, statemachine.PendingPayment)
		ids[i] = id
		wg.Go(func() {
			errs[i] = svc.HandleTransaction(ctx, src(fmt.Sprintf("n-%d", i)), paid(no, fmt.Sprintf("42000091%02d", i), 1200))
		})
	}
	waitQueued := func(n float64) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%v payments waiting for the slot", n), func() bool {
			return metricValue(t, reg, "takeout_db_group_commit_waiting", 0) >= n
		})
	}
	waitQueued(payments)
	// One more, whose order is cancelled while its payment waits for the
	// group.
	movedID, movedNo := f.order(t, statemachine.PendingPayment)
	wg.Go(func() { errs[payments] = svc.HandleTransaction(ctx, src("moved"), paid(movedNo, "4200009200", 1200)) })
	waitQueued(payments + 1)
	if _, err := f.pool.Exec(ctx, "UPDATE orders SET status = 'CANCELLED', version = version + 1 WHERE id = $1", movedID); err != nil {
		t.Fatal(err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := <-heldDone; err != nil {
		t.Fatalf("the held payment: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("payment %d: %v", i, err)
		}
	}

	if n := metricValue(t, reg, "takeout_db_group_commit_size", 16); n != 1 {
		t.Errorf("%v group commits of more than 16 payments, want 1", n)
	}
	if n := metricValue(t, reg, "takeout_db_group_commit_failures_total", 0); n != 0 {
		t.Errorf("%v group commits failed, want none: the moved order's payment must not undo the others", n)
	}
	for _, id := range append(ids, heldID) {
		if got := f.orderStatus(t, id); got != statemachine.Paid {
			t.Errorf("order %d is %s, want PAID", id, got)
		}
		for query, want := range map[string]int{
			"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'": 1,
			"SELECT count(*) FROM payment_notifications WHERE order_id = $1":                       1,
			"SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'SUCCESS'":             1,
			"SELECT count(*) FROM order_events WHERE order_id = $1":                                1,
		} {
			if n := f.count(t, query, id); n != want {
				t.Errorf("order %d: %s: %d, want %d", id, query, n, want)
			}
		}
	}
	if got := f.paidRows(t, movedID, "4200009200"); got.Status != statemachine.Cancelled || got.Version != 2 ||
		len(got.Notifications) != 1 || got.Payment != "SUCCESS/TXN" || len(got.Events) != 0 || got.Refunds != 1 {
		t.Errorf("the cancelled order: %+v, want CANCELLED at version 2, its payment recorded once, no event, refunded once", got)
	}
	if got := testutil.ToFloat64(svc.successPaths.WithLabelValues("transaction")); got != 1 {
		t.Errorf("transaction path taken %v times, want once (the cancelled order's)", got)
	}
	if n := f.count(t, "SELECT count(*) FROM refunds"); n != 1 {
		t.Errorf("%d refunds, want the cancelled order's one", n)
	}
}

// Two instances whose groups hold the same two payments, queued in
// opposite orders (a provider retrying a notification on another
// instance), wait for each other and do not deadlock: each group locks
// its payments in out_trade_no order. Both groups are made to reach the
// rows while other transactions hold them, so that without that order
// each would hold the row the other needs next.
func TestGroupsPayingTheSameOrdersDoNotDeadlock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	svcA := f.newServiceWith(t, func(o *Options) { o.Registerer, o.GroupCommitMax, o.GroupCommitSlots = regA, 32, 1 })
	svcB := f.newServiceWith(t, func(o *Options) { o.Registerer, o.GroupCommitMax, o.GroupCommitSlots = regB, 32, 1 })
	src := func(n string) Source { return Source{Kind: "v3", NotificationID: n, EventType: "TRANSACTION.SUCCESS"} }
	release := func(tx pgx.Tx) {
		t.Helper()
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lockWaits := func() int {
		return f.count(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
	}

	loID, lo := f.order(t, statemachine.PendingPayment)
	hiID, hi := f.order(t, statemachine.PendingPayment)
	if hi < lo {
		loID, lo, hiID, hi = hiID, hi, loID, lo
	}
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	pay := func(name string, svc *Service, no, txn string) {
		wg.Go(func() {
			err := svc.HandleTransaction(ctx, src("n-"+txn), paid(no, txn, 1200))
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	// Each instance's slot is held by a payment waiting for its row; the
	// two shared payments queue behind it, lo then hi on A, hi then lo on B.
	var ids []int64
	var slotHolders []pgx.Tx
	for _, s := range []struct {
		name string
		svc  *Service
		reg  *prometheus.Registry
		nos  []string
	}{{"A", svcA, regA, []string{lo, hi}}, {"B", svcB, regB, []string{hi, lo}}} {
		id, no := f.order(t, statemachine.PendingPayment)
		ids = append(ids, id)
		slotHolders = append(slotHolders, f.lockPayment(t, no))
		pay(s.name+"-held", s.svc, no, "42000093"+s.name)
		waitFor(t, s.name+"'s held payment in its statement", func() bool {
			return metricValue(t, s.reg, "takeout_db_group_commit_size", 0) >= 1
		})
		for i, no := range s.nos {
			pay(s.name+"-"+no, s.svc, no, "4200009"+no)
			waitFor(t, fmt.Sprintf("%d payments queued on %s", i+1, s.name), func() bool {
				return metricValue(t, s.reg, "takeout_db_group_commit_waiting", 0) >= float64(i+1)
			})
		}
	}
	// The shared rows held; the slots let go: both groups go and wait.
	loHolder, hiHolder := f.lockPayment(t, lo), f.lockPayment(t, hi)
	for _, tx := range slotHolders {
		release(tx)
	}
	waitFor(t, "both groups waiting for a row", func() bool { return lockWaits() == 2 })
	// Unordered, A takes lo and B, first in line for hi, takes hi: each
	// then waits for the other. Ordered, both wait at lo and go in turn.
	release(loHolder)
	release(hiHolder)
	wg.Wait()

	for name, err := range errs {
		if err != nil {
			t.Errorf("payment %s: %v", name, err)
		}
	}
	for name, reg := range map[string]*prometheus.Registry{"A": regA, "B": regB} {
		if n := metricValue(t, reg, "takeout_db_group_commit_failures_total", 0); n != 0 {
			t.Errorf("%v of %s's group commits failed (a deadlock), want none", n, name)
		}
	}
	for _, id := range append(ids, loID, hiID) {
		if got := f.orderStatus(t, id); got != statemachine.Paid {
			t.Errorf("order %d is %s, want PAID", id, got)
		}
		for query, want := range map[string]int{
			"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'": 1,
			"SELECT count(*) FROM payment_notifications WHERE order_id = $1":                       1,
			"SELECT count(*) FROM order_events WHERE order_id = $1":                                1,
		} {
			if n := f.count(t, query, id); n != want {
				t.Errorf("order %d: %s: %d, want %d", id, query, n, want)
			}
		}
	}
}
