package order_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
)

// The sweep queues one job per order still PAID at its deadline, however
// many sweeps run at once, and none for an order accepted in time; a
// merchant tapping accept on two instances as those jobs run on both
// gives each order one outcome and one history row out of PAID: the
// merchant's accept, or the merchant's rule (accept or reject) applied
// by exactly one run. Each order keeps the rule of when it was paid, and
// the runs' counts add up to the rows the system wrote.
func TestAcceptDeadlineRacingMerchantTaps(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	other := e.instanceWithoutRedis(t)
	ctx := context.Background()
	var seq atomic.Int64
	pay := func(id int64) {
		t.Helper()
		if _, err := e.svc.Apply(ctx, id, statemachine.Pay, order.Actor{Kind: statemachine.Payment, Name: "test"}, "paid"); err != nil {
			t.Fatal(err)
		}
	}
	const perRule = 12
	then := map[int64]string{}
	for _, rule := range []string{order.AcceptThenReject, order.AcceptThenAccept} {
		if _, err := e.pool.Exec(ctx, "UPDATE merchants SET accept_within_seconds = 90, accept_timeout_action = $2 WHERE id = $1", e.merchant, rule); err != nil {
			t.Fatal(err)
		}
		for i := range perRule {
			id := e.place(t, &seq, e.dishes[i])
			pay(id)
			then[id] = rule
		}
	}
	// The deadline was written with the payment, from the rule of then.
	rows, err := e.pool.Query(ctx, `SELECT o.id, o.accept_then, o.accept_by - o.updated_at, d.accept_by = o.accept_by
		FROM orders o LEFT JOIN order_accept_deadlines d ON d.order_id = o.id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var rule string
		var within time.Duration
		var due *bool
		if err := rows.Scan(&id, &rule, &within, &due); err != nil {
			t.Fatal(err)
		}
		if rule != then[id] || within != 90*time.Second || due == nil || !*due {
			t.Errorf("order %d: deadline %s after payment, then %q, its due row there and the same: %v; want 90s, %q, true", id, within, rule, due, then[id])
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	// A sweep before the deadline queues nothing.
	if n, err := e.svc.QueueAcceptDeadlines(ctx); n != 0 || err != nil {
		t.Fatalf("a sweep before any deadline queued %d jobs (%v)", n, err)
	}
	// Every deadline due, in order of the orders' ids: the sweeps take
	// them oldest first, while the merchant's taps go through them newest
	// first, so that the two meet somewhere in the middle.
	if _, err := e.pool.Exec(ctx, `WITH due AS (
		    UPDATE order_accept_deadlines d SET accept_by = now() - interval '1 hour' + r.n * interval '1 second'
		    FROM (SELECT order_id, row_number() OVER (ORDER BY order_id) AS n FROM order_accept_deadlines) r
		    WHERE r.order_id = d.order_id RETURNING d.order_id, d.accept_by)
		UPDATE orders o SET accept_by = due.accept_by FROM due WHERE o.id = due.order_id`); err != nil {
		t.Fatal(err)
	}
	ids := slices.Sorted(maps.Keys(then))
	// The kitchen accepted one order in time: it gets no job.
	inTime := ids[0]
	if _, err := e.svc.Apply(ctx, inTime, statemachine.Accept, order.Actor{Kind: statemachine.Merchant, MerchantID: e.merchant, Name: "counter"}, ""); err != nil {
		t.Fatal(err)
	}
	delete(then, inTime)
	ids = ids[1:]

	// Four sweeps at once on two instances queue one job per order.
	var wg sync.WaitGroup
	var queued atomic.Int64
	for i := range 4 {
		svc := e.svc
		if i%2 == 1 {
			svc = other
		}
		wg.Go(func() {
			n, err := svc.QueueAcceptDeadlines(ctx)
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			queued.Add(int64(n))
		})
	}
	wg.Wait()
	jobs := map[int64]string{}
	rows, err = e.pool.Query(ctx, `SELECT (args->>'order_id')::bigint, args->>'then' FROM river_job WHERE kind = 'order.accept_deadline'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var rule string
		if err := rows.Scan(&id, &rule); err != nil {
			t.Fatal(err)
		}
		if _, twice := jobs[id]; twice {
			t.Errorf("order %d has two jobs", id)
		}
		jobs[id] = rule
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if diff := cmp.Diff(then, jobs); diff != "" {
		t.Errorf("the jobs queued (-want +got):\n%s", diff)
	}
	if queued.Load() < int64(len(then)) {
		t.Errorf("the sweeps say they queued %d jobs, want at least %d (a duplicate insert is skipped by River)", queued.Load(), len(then))
	}
	var left int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM order_accept_deadlines").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d due rows left after the sweeps (%v), want none", left, err)
	}
	slices.Reverse(ids)

	type tap struct {
		id  int64
		err error
		out order.Applied
	}
	var (
		start = make(chan struct{})
		mu    sync.Mutex
		taps  []tap
		swept atomic.Int64
	)
	// Two counters, one per instance, each tapping accept on every order
	// in turn, the newest deadline first.
	for _, svc := range []*order.Service{e.svc, other} {
		wg.Go(func() {
			<-start
			for _, id := range ids {
				a, err := svc.Apply(ctx, id, statemachine.Accept, order.Actor{Kind: statemachine.Merchant, MerchantID: e.merchant, Name: "counter"}, "")
				mu.Lock()
				taps = append(taps, tap{id: id, err: err, out: a})
				mu.Unlock()
			}
		})
	}
	// Each instance's workers run the jobs, the oldest deadline first.
	for _, svc := range []*order.Service{e.svc, other} {
		wg.Go(func() {
			<-start
			for i := len(ids) - 1; i >= 0; i-- {
				moved, err := svc.ApplyAcceptDeadline(ctx, ids[i], jobs[ids[i]])
				if err != nil {
					t.Errorf("apply the deadline of order %d: %v", ids[i], err)
				}
				if moved {
					swept.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()

	// What the database says happened to each order.
	type outcome struct {
		status, actor string
		leftPaid      int
	}
	got := map[int64]outcome{}
	rows, err = e.pool.Query(ctx, `SELECT o.id, o.status, count(h.*), max(h.actor)
		FROM orders o JOIN order_status_history h ON h.order_id = o.id AND h.from_status = 'PAID' GROUP BY o.id, o.status`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var oc outcome
		if err := rows.Scan(&id, &oc.status, &oc.leftPaid, &oc.actor); err != nil {
			t.Fatal(err)
		}
		got[id] = oc
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	bySystem := 0
	for id, rule := range then {
		oc, ok := got[id]
		switch {
		case !ok:
			t.Errorf("order %d never left PAID", id)
			continue
		case oc.leftPaid != 1:
			t.Errorf("order %d left PAID %d times", id, oc.leftPaid)
		case oc.actor == "system:accept-deadline":
			bySystem++
			want := map[string]string{order.AcceptThenAccept: "ACCEPTED", order.AcceptThenReject: "REFUNDING"}[rule]
			if oc.status != want {
				t.Errorf("order %d (then %s) moved by its deadline to %s", id, rule, oc.status)
			}
		case oc.actor != "merchant:"+strconv.FormatInt(e.merchant, 10)+":counter" || oc.status != "ACCEPTED":
			t.Errorf("order %d: %+v", id, oc)
		}
	}
	if int(swept.Load()) != bySystem {
		t.Errorf("the jobs say they moved %d orders; %d history rows are the system's", swept.Load(), bySystem)
	}
	// Each tap's answer agrees with what happened: accepted (fresh or a
	// replay) where the order ended ACCEPTED, refused where it was
	// rejected; one fresh accept at most per order.
	fresh := map[int64]int{}
	for _, tp := range taps {
		oc := got[tp.id]
		p, isProblem := problem.As(tp.err)
		switch {
		case oc.status == "ACCEPTED" && tp.err == nil:
			if !tp.out.Replayed {
				fresh[tp.id]++
			}
		case oc.status == "REFUNDING" && isProblem && p.Type == problem.OrderStatusConflict:
		default:
			t.Errorf("order %d ended %s; a tap got %v (%+v)", tp.id, oc.status, tp.err, tp.out.Order.Status)
		}
	}
	for id := range then {
		want := 1
		if got[id].actor == "system:accept-deadline" {
			want = 0
		}
		if fresh[id] != want {
			t.Errorf("order %d: %d fresh merchant accepts, moved by %s", id, fresh[id], got[id].actor)
		}
	}
	t.Logf("%d of %d orders moved by their deadline, %d by the merchant", bySystem, len(then), len(then)-bySystem)
	// The jobs start at the oldest deadline and the taps at the newest:
	// each side wins at its own end, so both outcomes were contested.
	if bySystem == 0 || bySystem == len(then) {
		t.Errorf("%d of %d orders moved by their deadline: the race had one side", bySystem, len(then))
	}

	// Nothing is left due: one more sweep queues nothing.
	if n, err := e.svc.QueueAcceptDeadlines(ctx); n != 0 || err != nil {
		t.Errorf("a sweep after queued %d (%v)", n, err)
	}
}
