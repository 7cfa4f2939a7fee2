package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/testenv"
)

// groupEnv is an order service on a bench database that commits
// placements in groups of up to 32, one group at a time, so that the
// placements arriving while a group runs form the next one.
type groupEnv struct {
	benchEnv
	svc     *order.Service
	metrics *prometheus.Registry
}

func newGroupEnv(t *testing.T) groupEnv {
	t.Helper()
	e := newBenchEnv(t)
	logger := slog.New(slog.DiscardHandler)
	idem, err := idempotency.NewStore(idempotency.Options{DB: e.pool, Redis: testenv.NewRedis(t).Conn(t), Logger: logger, Retention: 72 * time.Hour,
		InflightTTL: time.Minute, CoalesceWait: 5 * time.Second, L1Bytes: 1 << 20, L1TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(idem.Close)
	jobs, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	metrics := prometheus.NewRegistry()
	svc, err := order.NewService(order.Options{Pool: e.pool, IDs: e.ids, Signer: e.signer, Idempotency: idem, Jobs: jobs, Logger: logger,
		Registerer: metrics, Now: time.Now, TokenTTL: time.Hour, DedupWindow: 10 * time.Minute, PayWindow: 15 * time.Minute,
		GroupCommitMax: 32, GroupCommitSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	return groupEnv{benchEnv: e, svc: svc, metrics: metrics}
}

// submitted is one submit's answer.
type submitted struct {
	status int
	body   string
	err    error
}

// holdSlot keeps the service's one group slot busy: a submit whose
// statement waits for another transaction's uncommitted record of its
// key. The returned release ends that transaction and waits for the
// held submit's answer.
func (g groupEnv) holdSlot(t *testing.T, key string, seq int) (release func() submitted) {
	t.Helper()
	ctx := context.Background()
	holder, err := g.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	if _, err := holder.Exec(ctx, `INSERT INTO idempotency_records (user_id, key, fingerprint, digest_alg, status_code, headers, body, expires_at)
		VALUES ($1, $2, '\x00', 'sm3', 500, '{}', '', now() + interval '1 hour')`, g.user, key); err != nil {
		t.Fatal(err)
	}
	tok := g.token(t, seq, g.dishes[63])
	done := make(chan submitted, 1)
	go func() { done <- g.submit(key, tok) }()
	waitForLockWait(t, g.benchEnv)
	return func() submitted {
		if err := holder.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		return <-done
	}
}

func (g groupEnv) submit(key, tok string) submitted {
	res, err := g.svc.Submit(context.Background(), g.user, key, tok, order.PlacedReply)
	return submitted{status: res.Response.Status, body: string(res.Response.Body), err: err}
}

// submitTogether submits each key's token at once and returns the
// answers once the service's group queue holds all of them and the slot
// is released.
func (g groupEnv) submitTogether(t *testing.T, release func() submitted, keys, toks []string) (held submitted, answers []submitted) {
	t.Helper()
	answers = make([]submitted, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { answers[i] = g.submit(keys[i], toks[i]) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for g.gauge(t, "takeout_db_group_commit_waiting") < float64(len(keys)) {
		if time.Now().After(deadline) {
			t.Fatalf("%v placements waiting for the slot, want %d", g.gauge(t, "takeout_db_group_commit_waiting"), len(keys))
		}
		time.Sleep(5 * time.Millisecond)
	}
	held = release()
	wg.Wait()
	return held, answers
}

// gauge reads a gauge's or a counter's value.
func (g groupEnv) gauge(t *testing.T, name string) float64 {
	t.Helper()
	fams, err := g.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			m := f.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// groupsOver counts the group commits of more than n orders.
func (g groupEnv) groupsOver(t *testing.T, n float64) uint64 {
	t.Helper()
	fams, err := g.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "takeout_db_group_commit_size" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == n {
				return h.GetSampleCount() - b.GetCumulativeCount()
			}
		}
	}
	t.Fatalf("no group size bucket %v", n)
	return 0
}

func (g groupEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := g.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Placements that arrive while a group commits are committed together,
// and each gets its own outcome: a dish out of stock refuses its own
// order (placed alone, statement by statement) and not its neighbours; a
// second key for the same cart answers with the same order; every other
// order is placed once, with its rows, record and stock.
func TestGroupCommitGivesEachOrderItsOwnOutcome(t *testing.T) {
	t.Parallel()
	g := newGroupEnv(t)
	ctx := context.Background()
	short := g.dishes[60]
	zero := int32(0)
	if _, err := inventory.Restock(ctx, g.pool, short, inventory.Change{SetOnHand: &zero, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	const distinct = 20
	var keys, toks []string
	for i := range distinct {
		keys = append(keys, fmt.Sprintf("order-%d", i))
		toks = append(toks, g.token(t, 100+i, g.dishes[i]))
	}
	twice := g.token(t, 200, g.dishes[40])
	keys = append(keys, "short", "twice-a", "twice-b")
	toks = append(toks, g.token(t, 300, short), twice, twice)

	release := g.holdSlot(t, "held", 1)
	held, answers := g.submitTogether(t, release, keys, toks)
	if held.err != nil || held.status != 201 {
		t.Fatalf("the held submit: %+v", held)
	}
	placed := map[string]bool{}
	for i, a := range answers[:distinct] {
		if a.err != nil || a.status != 201 {
			t.Fatalf("%s: %+v", keys[i], a)
		}
		var p order.Placed
		if err := json.Unmarshal([]byte(a.body), &p); err != nil {
			t.Fatal(err)
		}
		placed[p.ID] = true
	}
	if len(placed) != distinct {
		t.Errorf("%d distinct orders placed, want %d", len(placed), distinct)
	}
	if s := answers[distinct]; slug(s.err) != "out-of-stock" {
		t.Errorf("the order of a dish out of stock: %+v, want out-of-stock", s)
	}
	a, b := answers[distinct+1], answers[distinct+2]
	var pa, pb order.Placed
	for _, x := range []struct {
		s submitted
		p *order.Placed
	}{{a, &pa}, {b, &pb}} {
		if x.s.err != nil || (x.s.status != 201 && x.s.status != 200) {
			t.Fatalf("one cart under two keys: %+v", x.s)
		}
		if err := json.Unmarshal([]byte(x.s.body), x.p); err != nil {
			t.Fatal(err)
		}
	}
	if pa.ID != pb.ID || pa.Duplicate == pb.Duplicate {
		t.Errorf("one cart under two keys: orders %s (duplicate %v) and %s (duplicate %v), want one order, one answer a duplicate",
			pa.ID, pa.Duplicate, pb.ID, pb.Duplicate)
	}
	if n := g.groupsOver(t, 16); n != 1 {
		t.Errorf("%d group commits of more than 16 orders, want 1", n)
	}
	if n := g.gauge(t, "takeout_db_group_commit_failures_total"); n != 0 {
		t.Errorf("%v group commits failed, want none: the short dish's order must not undo the others", n)
	}

	// In the database: each order once, with its one item, reservation,
	// history row and record; the short dish untouched.
	want := distinct + 2 // the held order and the cart under two keys
	for table, n := range map[string]int{
		"orders": want, "order_items": want, "stock_reservations": want, "order_status_history": want,
		"idempotency_records WHERE order_id IS NOT NULL": want + 1, // both keys of the one cart
	} {
		if got := g.count(t, "SELECT count(*) FROM "+table); got != n {
			t.Errorf("%s: %d rows, want %d", table, got, n)
		}
	}
	for i := range distinct {
		if taken := int(benchStock) - g.stock(t, g.dishes[i]); taken != 1 {
			t.Errorf("dish %d: %d units taken, want 1", i, taken)
		}
	}
	if taken := int(benchStock) - g.stock(t, g.dishes[40]); taken != 1 {
		t.Errorf("the cart under two keys took %d units, want 1", taken)
	}
	if n := g.stock(t, short); n != 0 {
		t.Errorf("the short dish has %d units, want 0", n)
	}
}

// A group whose statement fails as a whole (here a key already answered
// another request, whose record only PostgreSQL holds) commits nothing
// itself: each of its orders is placed again alone, the neighbours are
// placed once each and the request with the used key is refused, having
// written nothing.
func TestGroupCommitFailurePlacesEachOrderAlone(t *testing.T) {
	t.Parallel()
	g := newGroupEnv(t)
	ctx := context.Background()
	// The key's record, written by an instance whose Redis is down.
	if res, err := g.instanceWithoutRedis(t).Submit(ctx, g.user, "used", g.token(t, 1_000, g.dishes[50]), order.PlacedReply); err != nil || res.Response.Status != 201 {
		t.Fatalf("first use of the key: %v %d", err, res.Response.Status)
	}
	const neighbours = 12
	var keys, toks []string
	for i := range neighbours {
		keys = append(keys, fmt.Sprintf("neighbour-%d", i))
		toks = append(toks, g.token(t, 100+i, g.dishes[i]))
	}
	keys = append(keys, "used")
	toks = append(toks, g.token(t, 2_000, g.dishes[51]))

	release := g.holdSlot(t, "held", 2)
	held, answers := g.submitTogether(t, release, keys, toks)
	if held.err != nil || held.status != 201 {
		t.Fatalf("the held submit: %+v", held)
	}
	for i, a := range answers[:neighbours] {
		if a.err != nil || a.status != 201 {
			t.Errorf("%s: %+v", keys[i], a)
		}
	}
	if s := answers[neighbours]; slug(s.err) != slug(idempotency.ErrMismatch) {
		t.Errorf("the used key with another cart: %+v, want %s", s, slug(idempotency.ErrMismatch))
	}
	if n := g.groupsOver(t, 8); n != 1 {
		t.Errorf("%d group commits of more than 8 orders, want 1 (which failed)", n)
	}
	if n := g.gauge(t, "takeout_db_group_commit_failures_total"); n != 1 {
		t.Errorf("%v group commits failed, want 1", n)
	}
	want := neighbours + 2 // the held order and the key's first order
	for table, n := range map[string]int{"orders": want, "order_items": want, "stock_reservations": want, "idempotency_records": want} {
		if got := g.count(t, "SELECT count(*) FROM "+table); got != n {
			t.Errorf("%s: %d rows, want %d", table, got, n)
		}
	}
	for i := range neighbours {
		if taken := int(benchStock) - g.stock(t, g.dishes[i]); taken != 1 {
			t.Errorf("neighbour %d: %d units taken, want 1", i, taken)
		}
	}
	if taken := int(benchStock) - g.stock(t, g.dishes[51]); taken != 0 {
		t.Errorf("the refused cart took %d units", taken)
	}
}
