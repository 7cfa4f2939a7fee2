package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/redisconn"
)

// placedRows is what a placement wrote for one order, without what
// differs between two orders by nature (ids, times).
type placedRows struct {
	Status, Remark                      string
	Version, TotalFen                   int64
	PayWindow                           time.Duration
	Items                               []string
	Reservations                        []string
	History                             []string
	Jobs                                int // none: the sweep queues the payment timeout past the deadline
	RecordStatus                        int
	RecordIsAnswer, RecordNamesTheOrder bool
	StockTaken                          int
}

func (e benchEnv) placedRows(t *testing.T, id int64, answer []byte, dish int64) placedRows {
	t.Helper()
	ctx := context.Background()
	var r placedRows
	var deadline, created time.Time
	if err := e.pool.QueryRow(ctx, `SELECT status, remark, version, total_fen, pay_deadline, created_at FROM orders WHERE id = $1`, id).
		Scan(&r.Status, &r.Remark, &r.Version, &r.TotalFen, &deadline, &created); err != nil {
		t.Fatal(err)
	}
	r.PayWindow = deadline.Sub(created)
	rows := func(sql string) []string {
		t.Helper()
		var out []string
		rs, err := e.pool.Query(ctx, sql, id)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var s string
			if err := rs.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	r.Items = rows(`SELECT concat_ws('|', line, name, qty, unit_price_fen, line_total_fen, options, packaging_fee_fen) FROM order_items WHERE order_id = $1 ORDER BY line`)
	r.Reservations = rows(`SELECT concat_ws('|', qty, released_at IS NULL) FROM stock_reservations WHERE order_id = $1 ORDER BY dish_id`)
	r.History = rows(`SELECT concat_ws('|', coalesce(from_status, '-'), to_status, version, actor, reason) FROM order_status_history WHERE order_id = $1 ORDER BY version`)
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'order_id' = $1::bigint::text`, id).Scan(&r.Jobs); err != nil {
		t.Fatal(err)
	}
	var body []byte
	var orderID *int64
	if err := e.pool.QueryRow(ctx, `SELECT status_code, body, order_id FROM idempotency_records WHERE order_id = $1`, id).Scan(&r.RecordStatus, &body, &orderID); err != nil {
		t.Fatal(err)
	}
	r.RecordIsAnswer = string(body) == string(answer)
	r.RecordNamesTheOrder = orderID != nil && *orderID == id
	r.StockTaken = int(benchStock) - e.stock(t, dish)
	return r
}

// A new order is placed in one statement (order_place) when every dish
// has a free shard, and statement by statement when one has none (all
// its shards busy): both write the same rows (order, items, reservation,
// history, payment-timeout job, idempotency record, stock), and the
// one-statement answer, rendered before the order is written, is what
// reading the order back renders.
func TestOnePlacementStatementWritesWhatTheTransactionWrites(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()

	direct, fast := e.dishes[0], e.token(t, 1, e.dishes[0])
	res, err := e.svc.Submit(ctx, e.user, "direct", fast, order.PlacedReply)
	if err != nil || res.Response.Status != 201 {
		t.Fatalf("submit: %v %d %s", err, res.Response.Status, res.Response.Body)
	}
	if got := e.placePaths(t); got["one_statement"] != 1 || got["transaction"] != 0 {
		t.Fatalf("placement paths %v, want one one_statement", got)
	}
	var placed order.Placed
	if err := json.Unmarshal(res.Response.Body, &placed); err != nil {
		t.Fatal(err)
	}
	id := mustID(t, placed.ID)
	read, err := e.svc.Get(ctx, e.user, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(read, placed.Order); diff != "" {
		t.Errorf("the one-statement answer differs from the order read back (-read +answer):\n%s", diff)
	}

	// Every shard of the second dish busy: order_place cannot take it
	// without waiting, so the submit takes the transaction path, which
	// waits for a shard.
	busy := e.dishes[1]
	holder, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	if _, err := holder.Exec(ctx, `SELECT 1 FROM dish_stock WHERE dish_id = $1 FOR UPDATE`, busy); err != nil {
		t.Fatal(err)
	}
	slow := e.token(t, 2, busy)
	done := make(chan struct{})
	var slowRes order.Placed
	var slowBody []byte
	go func() {
		defer close(done)
		r, err := e.svc.Submit(ctx, e.user, "transaction", slow, order.PlacedReply)
		if err != nil || r.Response.Status != 201 {
			t.Errorf("submit behind busy shards: %v %d %s", err, r.Response.Status, r.Response.Body)
			return
		}
		slowBody = r.Response.Body
		if err := json.Unmarshal(r.Response.Body, &slowRes); err != nil {
			t.Error(err)
		}
	}()
	waitForLockWait(t, e)
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if t.Failed() {
		return
	}
	if got := e.placePaths(t); got["one_statement"] != 1 || got["transaction"] != 1 {
		t.Fatalf("placement paths %v, want one of each", got)
	}
	want := e.placedRows(t, mustID(t, slowRes.ID), slowBody, busy)
	got := e.placedRows(t, id, res.Response.Body, direct)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("one statement wrote other rows than the transaction (-transaction +one statement):\n%s", diff)
	}
	if !got.RecordIsAnswer || got.StockTaken != 1 || len(got.Reservations) != 1 || got.Jobs != 0 {
		t.Errorf("rows of the one-statement placement: %+v", got)
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	var id int64
	if err := json.Unmarshal([]byte(s), &id); err != nil {
		t.Fatalf("order id %q: %v", s, err)
	}
	return id
}

// placePaths reads takeout_order_place_paths_total by path.
func (e benchEnv) placePaths(t *testing.T) map[string]float64 {
	t.Helper()
	fams, err := e.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "takeout_order_place_paths_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// waitForLockWait waits until a session of e's database waits for a row
// lock.
func waitForLockWait(t *testing.T, e benchEnv) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := e.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no submit waited for the busy shards")
}

// instanceWithoutRedis is another order service on e's database with an
// idempotency store of its own (its own L1) and no Redis: a second
// instance while Redis is down, where only PostgreSQL stands between
// copies of a request.
func (e benchEnv) instanceWithoutRedis(t *testing.T) *order.Service {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	idem, err := idempotency.NewStore(idempotency.Options{DB: e.pool, Redis: &redisconn.Conn{}, Logger: logger, Retention: 72 * time.Hour,
		InflightTTL: time.Minute, CoalesceWait: 2 * time.Second, L1Bytes: 1 << 20, L1TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(idem.Close)
	jobs, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := order.NewService(order.Options{Pool: e.pool, IDs: e.ids, Signer: e.signer, Idempotency: idem, Jobs: jobs, Logger: logger,
		Now: time.Now, TokenTTL: time.Hour, DedupWindow: 10 * time.Minute, PayWindow: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// Copies of one submit (same key, same token) at the same instant on
// several instances with Redis down: each copy's one statement races the
// others' on the order and the record; one places the order, every other
// answers with its response, byte for byte, and the database holds one
// order, one record, one job, one history row, and the stock is taken
// once.
func TestConcurrentCopiesWithoutRedisPlaceOnce(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	const instances, rounds = 4, 20
	svcs := make([]*order.Service, instances)
	for i := range svcs {
		svcs[i] = e.instanceWithoutRedis(t)
	}
	dish := e.dishes[3]
	for round := range rounds {
		tok := e.token(t, 5_000+round, dish)
		key := fmt.Sprintf("copies-%d", round)
		bodies := make([]string, instances)
		errs := make([]error, instances)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i, svc := range svcs {
			wg.Go(func() {
				start.Wait()
				res, err := svc.Submit(ctx, e.user, key, tok, order.PlacedReply)
				bodies[i], errs[i] = fmt.Sprintf("%d %s", res.Response.Status, res.Response.Body), err
			})
		}
		start.Done()
		wg.Wait()
		for i := range instances {
			if errs[i] != nil {
				t.Fatalf("round %d instance %d: %v", round, i, errs[i])
			}
			if bodies[i] != bodies[0] || !strings.HasPrefix(bodies[i], "201 ") {
				t.Fatalf("round %d: instance %d answered %q, instance 0 %q", round, i, bodies[i], bodies[0])
			}
		}
	}
	for table, want := range map[string]int{
		"orders": rounds, "idempotency_records": rounds, "order_status_history": rounds, "order_items": rounds, "stock_reservations": rounds,
		"river_job WHERE kind = 'order.payment_timeout'": 0, // queued by the sweep, past the deadline
	} {
		var n int
		if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
	if taken := int(benchStock) - e.stock(t, dish); taken != rounds {
		t.Errorf("%d units of the dish taken, want %d", taken, rounds)
	}
}

// The user, merchant and dishes an order names are no longer held by
// foreign keys (migration 00020), but a delete of one is still refused,
// as a foreign-key violation, and deletes nothing.
func TestRowsNamedByOrdersAreNotDeleted(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	dish := e.dishes[5]
	if res, err := e.svc.Submit(ctx, e.user, "named", e.token(t, 1, dish), order.PlacedReply); err != nil || res.Response.Status != 201 {
		t.Fatalf("submit: %v %d", err, res.Response.Status)
	}
	for _, tc := range []struct {
		table string
		id    int64
	}{{"users", e.user}, {"merchants", e.merchant}, {"dishes", dish}} {
		tag, err := e.pool.Exec(ctx, "DELETE FROM "+tc.table+" WHERE id = $1", tc.id)
		if _, ok := db.ForeignKeyViolation(err); !ok {
			t.Errorf("delete from %s: %v (%s), want a foreign-key violation", tc.table, err, tag)
		}
	}
	// A dish no order names can go (with its stock rows first).
	unnamed := e.dishes[6]
	if _, err := e.pool.Exec(ctx, "DELETE FROM dish_stock WHERE dish_id = $1", unnamed); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, "DELETE FROM stock_adjustments WHERE dish_id = $1", unnamed); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, "DELETE FROM dishes WHERE id = $1", unnamed); err != nil {
		t.Errorf("delete a dish no order names: %v", err)
	}
}

// One key sent with two different carts at the same instant on two
// instances with Redis down: each one-statement placement inserts its own
// order, and only the idempotency record's key stands between them. One
// commits (201); the other's statement fails on the record and rolls back
// whole, order and stock included, and it is refused as another request
// under the key; the database holds one order per round.
func TestOneKeyTwoCartsWithoutRedisPlaceOne(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	svcs := []*order.Service{e.instanceWithoutRedis(t), e.instanceWithoutRedis(t)}
	const rounds = 20
	dishes := []int64{e.dishes[7], e.dishes[8]}
	for round := range rounds {
		toks := []string{e.token(t, 7_000+2*round, dishes[0]), e.token(t, 7_001+2*round, dishes[1])}
		key := fmt.Sprintf("one-key-%d", round)
		statuses := make([]int, 2)
		errs := make([]error, 2)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range 2 {
			wg.Go(func() {
				start.Wait()
				res, err := svcs[i].Submit(ctx, e.user, key, toks[i], order.PlacedReply)
				statuses[i], errs[i] = res.Response.Status, err
			})
		}
		start.Done()
		wg.Wait()
		created, refused := 0, 0
		for i := range 2 {
			switch {
			case errs[i] == nil && statuses[i] == 201:
				created++
			case errors.Is(errs[i], idempotency.ErrMismatch):
				refused++
			default:
				t.Fatalf("round %d copy %d: %d %v", round, i, statuses[i], errs[i])
			}
		}
		if created != 1 || refused != 1 {
			t.Fatalf("round %d: %d placed, %d refused; want one of each", round, created, refused)
		}
	}
	var orders, records int
	if err := e.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM idempotency_records)").Scan(&orders, &records); err != nil {
		t.Fatal(err)
	}
	taken := 2*int(benchStock) - e.stock(t, dishes[0]) - e.stock(t, dishes[1])
	if orders != rounds || records != rounds || taken != rounds {
		t.Errorf("%d orders, %d records, %d units taken; want %d each", orders, records, taken, rounds)
	}
}
