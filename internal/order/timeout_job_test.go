package order_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/statemachine"
)

// Placing an order writes no job. The sweep queues one payment-timeout
// job for each order still waiting for payment past its deadline, and
// none for an order not yet due or no longer waiting: four sweeps at once
// on two instances, then one more, queue exactly one job per overdue
// order, which River lists and decodes like any job it inserted.
func TestTimeoutSweepQueuesOneJobPerOverdueOrder(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	other := e.instanceWithoutRedis(t)
	ctx := context.Background()
	var seq atomic.Int64
	overdue := map[int64]bool{}
	for range 3 {
		overdue[e.place(t, &seq, e.dishes[0])] = true
	}
	notDue := e.place(t, &seq, e.dishes[1])
	paidLate := e.place(t, &seq, e.dishes[1])
	if _, err := e.pool.Exec(ctx, "UPDATE orders SET pay_deadline = now() - interval '1 second' WHERE id <> $1", notDue); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, "UPDATE orders SET status = 'PAID', version = 2 WHERE id = $1", paidLate); err != nil {
		t.Fatal(err)
	}
	var jobs int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&jobs); err != nil || jobs != 0 {
		t.Fatalf("placing wrote %d jobs (%v), want none", jobs, err)
	}

	var wg sync.WaitGroup
	queued := make([]int, 4)
	for i := range queued {
		svc := e.svc
		if i%2 == 1 {
			svc = other
		}
		wg.Go(func() {
			n, err := svc.QueueTimeouts(ctx)
			if err != nil {
				t.Errorf("sweep %d: %v", i, err)
			}
			queued[i] = n
		})
	}
	wg.Wait()
	if n, err := e.svc.QueueTimeouts(ctx); err != nil || n != 0 {
		t.Errorf("a sweep after the others queued %d (%v), want 0", n, err)
	}

	client, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.JobList(ctx, river.NewJobListParams().Kinds(order.PaymentTimeoutArgs{}.Kind()).States(rivertype.JobStateAvailable))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != len(overdue) {
		t.Fatalf("%d payment-timeout jobs (the sweeps reported %v), want %d: one per overdue order", len(res.Jobs), queued, len(overdue))
	}
	for _, j := range res.Jobs {
		var args order.PaymentTimeoutArgs
		if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
			t.Fatalf("args %s do not decode as PaymentTimeoutArgs: %v", j.EncodedArgs, err)
		}
		if !overdue[args.OrderID] {
			t.Errorf("job for order %d, which is not overdue", args.OrderID)
		}
		delete(overdue, args.OrderID)
	}
}

// The sweep reads only the deadlines that came due since it last ran, and
// in batches: a thousand orders due at one instant (every batch boundary
// a tie) each get one job from one sweep, an order that comes due after
// it gets its job from the next, and each sweep records how far it went.
func TestTimeoutSweepResumesWhereItStopped(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	var seq atomic.Int64
	first := e.place(t, &seq, e.dishes[0])
	later := e.place(t, &seq, e.dishes[1])
	if _, err := e.pool.Exec(ctx, "UPDATE orders SET pay_deadline = now() - interval '1 second' WHERE id = $1", first); err != nil {
		t.Fatal(err)
	}
	// 1,100 more orders due at the same instant as the first.
	if _, err := e.pool.Exec(ctx, `INSERT INTO orders
		SELECT (jsonb_populate_record(NULL::orders, to_jsonb(o) || jsonb_build_object(
			'id', o.id + g, 'intent_digest', '\x' || encode(sha256(int8send(g)), 'hex'), 'intent_seq', 1000 + g))).*
		FROM orders o, generate_series(1, 1100) g WHERE o.id = $1`, first); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	n, err := e.svc.QueueTimeouts(ctx)
	if err != nil || n != 1101 {
		t.Fatalf("the sweep queued %d (%v), want 1101: every order due, across three batches", n, err)
	}
	var jobs, orders int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT args->>'order_id') FROM river_job WHERE kind = 'order.payment_timeout'`).Scan(&jobs, &orders); err != nil || jobs != 1101 || orders != 1101 {
		t.Fatalf("%d jobs for %d orders (%v), want one for each of 1101", jobs, orders, err)
	}
	var sweptTo time.Time
	if err := e.pool.QueryRow(ctx, "SELECT swept_to FROM order_timeout_sweep").Scan(&sweptTo); err != nil || sweptTo.Before(before) {
		t.Fatalf("swept to %v (%v), want at least %v, when the sweep started", sweptTo, err, before)
	}

	if _, err := e.pool.Exec(ctx, "UPDATE orders SET pay_deadline = now() WHERE id = $1", later); err != nil {
		t.Fatal(err)
	}
	if n, err := e.svc.QueueTimeouts(ctx); err != nil || n != 1 {
		t.Fatalf("the next sweep queued %d (%v), want 1: the order that came due since", n, err)
	}
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'order.payment_timeout' AND args->>'order_id' = $1::bigint::text", later).Scan(&jobs); err != nil || jobs != 1 {
		t.Fatalf("%d jobs for the order that came due later (%v), want 1", jobs, err)
	}
}

// A status transition is a heap-only (HOT) update: no index of orders
// names a column that a transition changes, so a transition writes no
// index entry (migration 00024). An index on status would undo that for
// every transition of every order.
func TestTransitionWritesNoIndexEntry(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	var seq atomic.Int64
	id := e.place(t, &seq, e.dishes[0])
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a rollback after the checks
	q := dbsqlc.New()
	steps := []statemachine.Status{statemachine.Paid, statemachine.Accepted}
	from, version := statemachine.PendingPayment, int64(1)
	for _, to := range steps {
		if _, err := q.OrderTransition(ctx, tx, dbsqlc.OrderTransitionParams{ID: id, FromStatus: from, ToStatus: to, Version: version}); err != nil {
			t.Fatalf("%s -> %s: %v", from, to, err)
		}
		from, version = to, version+1
	}
	var updated, hot int64
	if err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated('orders'::regclass), pg_stat_get_xact_tuples_hot_updated('orders'::regclass)`).Scan(&updated, &hot); err != nil {
		t.Fatal(err)
	}
	if updated != int64(len(steps)) || hot != updated {
		t.Errorf("%d transitions: %d updates, %d of them HOT; want every one HOT", len(steps), updated, hot)
	}
}
