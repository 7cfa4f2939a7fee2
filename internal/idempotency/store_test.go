package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/lab/ha"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/redisconn"
	"github.com/takeout/takeout/internal/testenv"
)

func newStore(t *testing.T, rds *redisconn.Conn, reg prometheus.Registerer) *idempotency.Store {
	t.Helper()
	s, err := idempotency.NewStore(idempotency.Options{
		DB: testenv.NewDB(t), Redis: rds, Logger: slog.New(slog.DiscardHandler), Registerer: reg,
		Retention: 72 * time.Hour, InflightTTL: time.Minute, CoalesceWait: 200 * time.Millisecond,
		L1Bytes: 1 << 20, L1TTL: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func record(fp string) idempotency.Record {
	return idempotency.Record{Fingerprint: []byte(fp), Response: idempotency.Response{Status: 201, Body: []byte(`{"ok":true}`), Headers: map[string]string{"Content-Type": "application/json"}}}
}

// The Redis layer: a second request with the key waits while the first
// runs, then replays its answer; another fingerprint is a mismatch; a
// released claim lets the next request run.
func TestRedisClaimLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rds := testenv.NewRedis(t).Conn(t)
	rds.Check(ctx)
	s := newStore(t, rds, nil)

	first, err := s.Begin(ctx, 1, "k", []byte("fp"))
	if err != nil || first.Claim == nil {
		t.Fatalf("first Begin: %+v, %v", first, err)
	}
	// While in flight: wait, then 409.
	start := time.Now()
	_, err = s.Begin(ctx, 1, "k", []byte("fp"))
	if slug(err) != "request-in-progress" || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("in-flight Begin: %v after %v", err, time.Since(start))
	}
	if _, err := s.Begin(ctx, 1, "k", []byte("other")); slug(err) != "idempotency-key-mismatch" {
		t.Fatalf("mismatch: %v", err)
	}
	// A waiting duplicate gets the answer as soon as the first finalizes.
	var waited idempotency.Outcome
	var wg sync.WaitGroup
	wg.Go(func() { waited, err = s.Begin(ctx, 1, "k", []byte("fp")) })
	time.Sleep(50 * time.Millisecond)
	first.Claim.Finalize(ctx, record("fp"))
	wg.Wait()
	if err != nil || waited.Replay == nil || waited.Replay.Status != 201 {
		t.Fatalf("coalesced Begin: %+v, %v", waited, err)
	}

	// Scripts run by SHA; after a SCRIPT FLUSH (or a Redis restart) the
	// NOSCRIPT answer falls back to EVAL and the claim still works.
	if err := rds.Client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if replay, err := s.Begin(ctx, 2, "k", []byte("fp")); err != nil || replay.Claim == nil {
		t.Fatalf("claim after SCRIPT FLUSH: %+v, %v", replay, err)
	}
	if n, err := rds.Client.Exists(ctx, rds.Key("idem:{2:k}")).Result(); err != nil || n != 1 {
		t.Fatalf("the claim is not in redis after SCRIPT FLUSH: %d, %v", n, err)
	}

	// Release gives the key back.
	c, err := s.Begin(ctx, 1, "k2", []byte("fp"))
	if err != nil || c.Claim == nil {
		t.Fatal(err)
	}
	c.Claim.Release(ctx)
	again, err := s.Begin(ctx, 1, "k2", []byte("fp"))
	if err != nil || again.Claim == nil {
		t.Fatalf("after release: %+v, %v", again, err)
	}
	// A stale owner's release (its claim expired and was retaken) leaves
	// the new owner's claim alone.
	c.Claim.Release(ctx)
	if _, err := s.Begin(ctx, 1, "k2", []byte("fp")); slug(err) != "request-in-progress" {
		t.Fatalf("after a stale release: %v, want the claim still held", err)
	}
}

func slug(err error) string {
	if p, ok := problem.As(err); ok {
		return p.Type.Slug
	}
	return ""
}

// Expired records are pruned; live ones stay.
func TestPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	rds, _ := redisconn.New(redisconn.Options{Logger: slog.New(slog.DiscardHandler)})
	s, err := idempotency.NewStore(idempotency.Options{DB: pool, Redis: rds, Logger: slog.New(slog.DiscardHandler),
		Retention: time.Hour, InflightTTL: time.Minute, L1Bytes: 1 << 20, L1TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, key := range []string{"a", "b", "c"} {
		out, err := s.Begin(ctx, 1, key, []byte("fp"))
		if err != nil {
			t.Fatal(err)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.InsertTx(ctx, tx, out.Claim, record("fp")); err != nil {
			t.Fatalf("insert %s: %v", key, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "UPDATE idempotency_records SET expires_at = now() - interval '1 minute' WHERE key IN ('a', 'b')"); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx, time.Now())
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	var left []string
	rows, _ := pool.Query(ctx, "SELECT key FROM idempotency_records ORDER BY key")
	for rows.Next() {
		var k string
		_ = rows.Scan(&k)
		left = append(left, k)
	}
	if len(left) != 1 || left[0] != "c" {
		t.Errorf("left %v, want [c]", left)
	}
}

// proxy forwards TCP to target until blackholed: then it accepts and
// reads but never answers, like a Redis that hangs.
type proxy struct {
	ln        net.Listener
	target    string
	blackhole atomic.Bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *proxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if !p.blackhole.Load() {
				if _, err := up.Write(buf[:n]); err != nil {
					return
				}
			}
		}
	}()
	_, _ = io.Copy(c, up)
}

// A hanging Redis trips the breaker: requests then skip Redis at once
// (PostgreSQL guards them), and the breaker closes again once Redis
// answers.
func TestBreakerSkipsHangingRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	real := testenv.NewRedis(t)
	u, err := url.Parse(real.URL)
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, u.Host)
	rds, err := redisconn.New(redisconn.Options{URL: "redis://" + px.ln.Addr().String() + "/0", Prefix: real.Prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rds.Close()
	rds.Check(ctx)
	reg := prometheus.NewRegistry()
	s := newStore(t, rds, reg)
	open := func() float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "takeout_idempotency_redis_breaker_open" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}

	px.blackhole.Store(true)
	for i := range 3 {
		out, err := s.Begin(ctx, 1, "k"+string(rune('a'+i)), []byte("fp"))
		if err != nil || out.Claim == nil {
			t.Fatalf("Begin with hanging redis: %+v, %v", out, err)
		}
	}
	if open() != 1 {
		t.Fatalf("breaker gauge %v after 3 timeouts, want 1", open())
	}
	start := time.Now()
	if out, err := s.Begin(ctx, 1, "fast", []byte("fp")); err != nil || out.Claim == nil || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("Begin with open breaker took %v: %v", time.Since(start), err)
	}

	px.blackhole.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for open() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("breaker did not close after redis recovered")
		}
		_, _ = s.Begin(ctx, 1, "probe-"+time.Now().String(), []byte("fp"))
		time.Sleep(100 * time.Millisecond)
	}
}

// A caller that goes away (a client disconnecting, a load generator's
// window ending) cancels its Redis call: that says nothing of Redis, so
// however many do it, the breaker stays closed and the next request
// claims in Redis. Were it tripped, every request would go to PostgreSQL
// for the breaker's timeout, and the claims of the cancelled requests
// could not be released.
func TestCancelledCallersDoNotTripTheBreaker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rds := testenv.NewRedis(t).Conn(t)
	rds.Check(ctx)
	s := newStore(t, rds, nil)
	inRedis := func(key string) bool {
		t.Helper()
		n, err := rds.Client.Exists(ctx, rds.Key("idem:{1:"+key+"}")).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	// A request claims its key; then its client goes away, as do ten
	// others before they reach Redis.
	held, err := s.Begin(ctx, 1, "held", []byte("fp"))
	if err != nil || held.Claim == nil || !inRedis("held") {
		t.Fatalf("Begin: %+v, %v; want a claim in Redis", held, err)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	for i := range 10 {
		if out, err := s.Begin(gone, 1, fmt.Sprintf("gone-%d", i), []byte("fp")); err == nil && out.Claim != nil {
			out.Claim.Release(gone)
		}
	}
	// Its handler releases the claim with the cancelled context: the
	// release still reaches Redis, so the client's retry runs at once
	// instead of finding the key in flight until the claim expires.
	held.Claim.Release(gone)
	if inRedis("held") {
		t.Error("the cancelled request's claim is still in Redis after its release")
	}
	if got := s.BreakerState(); got != "closed" {
		t.Fatalf("breaker %s after 10 cancelled callers, want closed", got)
	}
	retry, err := s.Begin(ctx, 1, "held", []byte("fp"))
	if err != nil || retry.Claim == nil || !inRedis("held") {
		t.Fatalf("retry: %+v, %v; want a new claim in Redis", retry, err)
	}
	if got := s.BreakerState(); got != "closed" {
		t.Errorf("breaker %s after a claim, want closed", got)
	}
}

// BenchmarkRedisClaim is the Redis layer of a fresh request: one Lua
// round trip claims the key (L1 misses each time: every key is new).
func BenchmarkRedisClaim(b *testing.B) {
	ctx := context.Background()
	rds := testenv.NewRedis(b).Conn(b)
	rds.Check(ctx)
	s, err := idempotency.NewStore(idempotency.Options{
		DB: testenv.NewDB(b), Redis: rds, Logger: slog.New(slog.DiscardHandler),
		Retention: time.Hour, InflightTTL: time.Minute, L1Bytes: 1 << 20, L1TTL: time.Minute,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		out, err := s.Begin(ctx, 1, "bench-"+strconv.Itoa(i), []byte("fp"))
		if err != nil || out.Claim == nil {
			b.Fatalf("claim: %v", err)
		}
	}
}

// Two transactions record one key: the one that commits second fails the
// insert, pipelined or not, and Recorded says why; the first record stays.
func TestSecondRecordOfAKeyIsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	rds, _ := redisconn.New(redisconn.Options{Logger: slog.New(slog.DiscardHandler)}) // no Redis: PostgreSQL decides
	s, err := idempotency.NewStore(idempotency.Options{DB: pool, Redis: rds, Logger: slog.New(slog.DiscardHandler),
		Retention: time.Hour, InflightTTL: time.Minute, L1Bytes: 1 << 20, L1TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, pipelined := range []bool{false, true} {
		t.Run(fmt.Sprint("pipelined=", pipelined), func(t *testing.T) {
			key := fmt.Sprint("k", pipelined)
			insert := func(fp string) error {
				out, err := s.Begin(ctx, 1, key, []byte(fp))
				if err != nil {
					return err
				}
				return db.WithTx(ctx, pool, func(tx pgx.Tx) error {
					if !pipelined {
						return s.InsertTx(ctx, tx, out.Claim, record(fp))
					}
					pipe := db.NewPipeline(tx)
					if err := s.InsertTx(ctx, pipe, out.Claim, record(fp)); err != nil {
						return err
					}
					return pipe.Send(ctx)
				})
			}
			if err := insert("first"); err != nil {
				t.Fatal(err)
			}
			err := insert("second")
			if err == nil || !s.Recorded(err) {
				t.Fatalf("second record of one key: %v, want Recorded", err)
			}
			rec, ok, err := s.Lookup(ctx, 1, key)
			if err != nil || !ok || string(rec.Fingerprint) != "first" {
				t.Errorf("stored record %q (%v, %v), want the first", rec.Fingerprint, ok, err)
			}
			if s.Recorded(errors.New("other")) {
				t.Error("Recorded matched an unrelated error")
			}
		})
	}
}

// The in-process cache holds completed responses up to its byte budget,
// however many pass through it.
func TestL1StaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rds, _ := redisconn.New(redisconn.Options{Logger: slog.New(slog.DiscardHandler)}) // no Redis: L1 and PostgreSQL only
	const budget = 1 << 20
	s, err := idempotency.NewStore(idempotency.Options{Redis: rds, Logger: slog.New(slog.DiscardHandler),
		Retention: time.Hour, InflightTTL: time.Minute, L1Bytes: budget, L1TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := make([]byte, 1000)
	for i := range 10_000 {
		key := fmt.Sprint("key-", i)
		out, err := s.Begin(ctx, 1, key, []byte(key))
		if err != nil || out.Claim == nil {
			t.Fatalf("begin %d: %v", i, err)
		}
		out.Claim.Finalize(ctx, idempotency.Record{Fingerprint: []byte(key), Response: idempotency.Response{Status: 201, Body: body}})
	}
	// The cache stays within its budget and is not left near empty either.
	entries, held := s.L1Size()
	if held > budget || held < budget/2 || entries >= 10_000 {
		t.Fatalf("L1 holds %d entries taking %d bytes, want between %d and %d bytes", entries, held, budget/2, budget)
	}
}

// The L1 gauges an operator scrapes say what L1 holds: both from one
// walk of the cache.
func TestL1MetricsReportWhatL1Holds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rds := testenv.NewRedis(t).Conn(t)
	rds.Check(ctx)
	reg := prometheus.NewRegistry()
	s := newStore(t, rds, reg)
	for i := range 25 {
		key := fmt.Sprint("m-", i)
		out, err := s.Begin(ctx, 1, key, []byte(key))
		if err != nil || out.Claim == nil {
			t.Fatalf("begin %d: %v", i, err)
		}
		out.Claim.Finalize(ctx, record(key))
	}
	gauges := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "takeout_idempotency_l1_") {
			gauges[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	// Entries as L1 holds them; bytes as the ring memory it allocated to
	// hold them, at least what they take.
	entries, held := s.L1Size()
	if got := gauges["takeout_idempotency_l1_entries"]; got != float64(entries) || entries != 25 {
		t.Errorf("entries gauge %v, L1 holds %d, want 25", got, entries)
	}
	if got := gauges["takeout_idempotency_l1_bytes"]; got < float64(held) || held == 0 {
		t.Errorf("bytes gauge %v, below the %d bytes the entries take", got, held)
	}
}

// newL1Store is a store whose Redis is unreachable, for what L1 answers
// alone.
func newL1Store(t *testing.T) *idempotency.Store {
	t.Helper()
	rds, _ := redisconn.New(redisconn.Options{Logger: slog.New(slog.DiscardHandler)})
	s, err := idempotency.NewStore(idempotency.Options{Redis: rds, Logger: slog.New(slog.DiscardHandler),
		Retention: time.Hour, InflightTTL: time.Minute, L1Bytes: 1 << 20, L1TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// keepInL1 completes user 1's key with a 201 answering body, the request
// kept beside it (none when request is empty).
func keepInL1(t *testing.T, s *idempotency.Store, key, request, fp, body string) {
	t.Helper()
	ctx := context.Background()
	out, err := s.Begin(ctx, 1, key, []byte(fp))
	if err != nil || out.Claim == nil {
		t.Fatalf("begin %s: %v", key, err)
	}
	out.Claim.Finalize(ctx, idempotency.Record{Fingerprint: []byte(fp), Request: request, Response: idempotency.Response{Status: 201, Body: []byte(body)}})
}

// L1 recognises a replay by the request itself (its route and body) when
// it kept it, without computing a fingerprint, and by fingerprint when it
// did not. The same body sent to another route or resource is another
// request: a mismatch, never the first route's answer.
func TestCachedRequest(t *testing.T) {
	t.Parallel()
	s := newL1Store(t)
	const route = "POST /admin/v1/orders/7/refunds"
	keepInL1(t, s, "kept", idempotency.RequestText(route, "token-a"), "fp-a", "kept")
	keepInL1(t, s, "bare", "", "fp-a", "bare")
	noHash := func() []byte { t.Error("fingerprint computed although the request was kept"); return nil }
	hash := func(fp string) func() []byte { return func() []byte { return []byte(fp) } }
	for _, tc := range []struct {
		name, key, route, body string
		fingerprint            func() []byte
		hit                    bool
		mismatch               bool
	}{
		{"same request, kept", "kept", route, "token-a", noHash, true, false},
		{"other body, kept", "kept", route, "token-b", noHash, false, true},
		{"same body, other resource", "kept", "POST /admin/v1/orders/8/refunds", "token-a", noHash, false, true},
		{"same body, other route", "kept", "POST /admin/v1/merchants", "token-a", noHash, false, true},
		{"same fingerprint, not kept", "bare", route, "token-a", hash("fp-a"), true, false},
		{"other fingerprint, not kept", "bare", route, "token-b", hash("fp-b"), false, true},
		{"unknown key", "none", route, "token-a", noHash, false, false},
		// The fingerprint match above kept the request: no hash now.
		{"same request, kept after a match", "bare", route, "token-a", noHash, true, false},
		{"other resource, kept after a match", "bare", "POST /admin/v1/orders/8/refunds", "token-a", noHash, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) { // in order: one case relies on an earlier one
			resp, ok, err := s.CachedRequest(1, tc.key, tc.route, tc.body, tc.fingerprint)
			if ok != tc.hit || errors.Is(err, idempotency.ErrMismatch) != tc.mismatch {
				t.Fatalf("hit %v, err %v; want hit %v, mismatch %v", ok, err, tc.hit, tc.mismatch)
			}
			if ok && string(resp.Body) != tc.key {
				t.Errorf("replayed %q", resp.Body)
			}
		})
	}
}

// A request L1 holds the answer of is answered from L1 before its
// operation is looked at: a replay of the kept request, a mismatch for
// another request with the key. For a key L1 does not hold, Do checks the
// operation first (here it refuses, so nothing else is reached).
func TestL1AnswersBeforeTheOperationRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newL1Store(t)
	keepInL1(t, s, "kept", idempotency.RequestText("POST /v1/orders", "token-a"), "fp-a", "answer")
	refused := errors.New("checked")
	for _, tc := range []struct {
		name, key, body string
		replayed        bool
		mismatch        bool
		checked         bool
	}{
		{"the kept request", "kept", "token-a", true, false, false},
		{"another request with the key", "kept", "token-b", false, true, false},
		{"a key L1 does not hold", "other", "token-a", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := &refusingOperation{err: refused}
			res, err := s.Do(ctx, idempotency.Request{Scope: idempotency.UserScope(1), Key: tc.key, Route: "POST /v1/orders", Body: tc.body}, op)
			if res.Replayed != tc.replayed || errors.Is(err, idempotency.ErrMismatch) != tc.mismatch || op.checked != tc.checked {
				t.Fatalf("replayed %v, err %v, checked %v; want replayed %v, mismatch %v, checked %v", res.Replayed, err, op.checked, tc.replayed, tc.mismatch, tc.checked)
			}
			if tc.checked && !errors.Is(err, refused) {
				t.Errorf("err %v, want the operation's refusal", err)
			}
			if tc.replayed && (string(res.Response.Body) != "answer" || res.Response.Status != 201) {
				t.Errorf("replayed %d %q, want 201 %q", res.Response.Status, res.Response.Body, "answer")
			}
		})
	}
}

// refusingOperation refuses at Check, and fails if run further.
type refusingOperation struct {
	err     error
	checked bool
}

func (o *refusingOperation) Check() error { o.checked = true; return o.err }

func (o *refusingOperation) Direct(context.Context, idempotency.RecordRower) (idempotency.Record, bool, error) {
	return idempotency.Record{}, false, errors.New("Direct ran after a refusal")
}

func (o *refusingOperation) Change(context.Context, *idempotency.Tx) (idempotency.Answer, error) {
	return idempotency.Answer{}, errors.New("Change ran after a refusal")
}

// A record larger than an L1 chunk (a header field over 64 KiB) is not cached in
// process; every duplicate, however many arrive at once, is still
// answered from Redis with that record, and none runs the request again.
func TestUnpackableRecordReplaysFromRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rds := testenv.NewRedis(t).Conn(t)
	rds.Check(ctx)
	s := newStore(t, rds, nil)

	first, err := s.Begin(ctx, 1, "big", []byte("fp"))
	if err != nil || first.Claim == nil {
		t.Fatalf("first Begin: %+v, %v", first, err)
	}
	rec := record("fp")
	rec.Response.Headers["X-Big"] = strings.Repeat("v", 70_000)
	first.Claim.Finalize(ctx, rec)
	if n, _ := s.L1Size(); n != 0 {
		t.Errorf("L1 holds %d entries, want the record left out", n)
	}
	if _, ok, err := s.Cached(1, "big", []byte("fp")); ok || err != nil {
		t.Errorf("Cached: hit %v, %v; want a miss", ok, err)
	}

	for i, got := range replayAtOnce(t, s, 1, "big", "fp", 8) {
		if got.Status != 201 || string(got.Body) != `{"ok":true}` || got.Header("X-Big") != rec.Response.Headers["X-Big"] || got.Header("Content-Type") != "application/json" {
			t.Fatalf("duplicate %d replayed %d %s with X-Big of %d bytes", i, got.Status, got.Body, len(got.Header("X-Big")))
		}
	}
	if _, err := s.Begin(ctx, 1, "big", []byte("other")); slug(err) != "idempotency-key-mismatch" {
		t.Errorf("another request with the key: %v, want a mismatch", err)
	}
}

// replayAtOnce sends n duplicates of a completed request at once and
// returns their replays; it fails the test if any of them errs or is
// given the right to run the request again.
func replayAtOnce(t *testing.T, s *idempotency.Store, userID int64, key, fp string, n int) []*idempotency.Response {
	t.Helper()
	outs := make([]idempotency.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { outs[i], errs[i] = s.Begin(context.Background(), userID, key, []byte(fp)) })
	}
	wg.Wait()
	replays := make([]*idempotency.Response, n)
	for i := range n {
		if errs[i] != nil || outs[i].Claim != nil || outs[i].Replay == nil {
			t.Fatalf("duplicate %d: %+v, %v; want a replay", i, outs[i], errs[i])
		}
		replays[i] = outs[i].Replay
	}
	return replays
}

// An answer L1 has let go of (its ring wrapped under newer answers) is
// replayed from Redis to every duplicate, however many arrive at once;
// none runs the request again, and L1 keeps the answer again.
func TestEvictedRecordReplaysFromRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rds := testenv.NewRedis(t).Conn(t)
	rds.Check(ctx)
	s := newStore(t, rds, nil) // a 1 MiB L1

	finalize := func(key string, rec idempotency.Record) {
		t.Helper()
		out, err := s.Begin(ctx, 1, key, rec.Fingerprint)
		if err != nil || out.Claim == nil {
			t.Fatalf("begin %s: %+v, %v", key, out, err)
		}
		out.Claim.Finalize(ctx, rec)
	}
	finalize("first", record("fp"))
	if _, ok, _ := s.Cached(1, "first", []byte("fp")); !ok {
		t.Fatal("the answer is not in L1 after Finalize")
	}
	// Sixteen times L1's budget of newer answers: every ring wraps.
	for i := range 4000 {
		rec := record("fp")
		rec.Response.Body = make([]byte, 4000)
		finalize("newer-"+strconv.Itoa(i), rec)
	}
	if _, ok, _ := s.Cached(1, "first", []byte("fp")); ok {
		t.Fatal("the first answer is still in L1 after 16 MB of newer ones")
	}

	for i, got := range replayAtOnce(t, s, 1, "first", "fp", 16) {
		if got.Status != 201 || string(got.Body) != `{"ok":true}` || got.Header("Content-Type") != "application/json" {
			t.Fatalf("duplicate %d replayed %d %s", i, got.Status, got.Body)
		}
	}
	if n, err := rds.Client.Exists(ctx, rds.Key("idem:{1:first}")).Result(); err != nil || n != 1 {
		t.Errorf("Redis holds %d records of the key (%v), want 1", n, err)
	}
	if resp, ok, err := s.Cached(1, "first", []byte("fp")); !ok || err != nil || string(resp.Body) != `{"ok":true}` {
		t.Errorf("L1 after the replays: %v, %v; want the answer kept again", ok, err)
	}
	if _, err := s.Begin(ctx, 1, "first", []byte("other")); slug(err) != "idempotency-key-mismatch" {
		t.Errorf("another request with the key: %v, want a mismatch", err)
	}
}

// TestBreakerPerShard: on a Redis Cluster a dead master opens only its
// own shard's breaker; keys of the other masters keep their Redis claim.
func TestBreakerPerShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc, err := ha.StartRedisCluster(ctx, t.TempDir(), 3, 0)
	if rc != nil {
		t.Cleanup(rc.Stop)
	}
	if err != nil {
		t.Fatalf("start a redis cluster (make ha-packages installs redis-server): %v", err)
	}
	rds, err := redisconn.New(redisconn.Options{URL: rc.URL(), Prefix: "t:", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rds.Close() })
	rds.Check(ctx)
	s := newStore(t, rds, nil)
	redisKey := func(key string) string { return rds.Key("idem:{1:" + key + "}") }
	// Keys of two different masters.
	byShard := map[string][]string{}
	for i := 0; len(byShard) < 2 || len(byShard[rds.Shard(ctx, redisKey("k-0"))]) < 5; i++ {
		k := fmt.Sprintf("k-%d", i)
		sh := rds.Shard(ctx, redisKey(k))
		byShard[sh] = append(byShard[sh], k)
	}
	dead := rds.Shard(ctx, redisKey("k-0"))
	var alive string
	for sh := range byShard {
		if sh != dead {
			alive = sh
		}
	}
	if err := rc.KillNode(dead); err != nil {
		t.Fatal(err)
	}
	rds.Check(ctx)
	if rds.State() != redisconn.StatePartial {
		t.Fatalf("redis %s with one master down, want partial", rds.State())
	}
	for _, k := range byShard[dead][:5] {
		out, err := s.Begin(ctx, 1, k, []byte("fp"))
		if err != nil || out.Claim == nil {
			t.Fatalf("Begin %s on the dead shard: %+v, %v; want a claim (PostgreSQL decides)", k, out, err)
		}
		out.Claim.Release(ctx)
	}
	if got := s.BreakerState(); got != "open" {
		t.Fatalf("breaker %s after the dead shard failed five times, want open", got)
	}
	k := byShard[alive][0]
	out, err := s.Begin(ctx, 1, k, []byte("fp"))
	if err != nil || out.Claim == nil {
		t.Fatalf("Begin %s on a live shard: %+v, %v", k, out, err)
	}
	n, err := rds.Client.Exists(ctx, redisKey(k)).Result()
	if err != nil || n != 1 {
		t.Errorf("the live shard's key is not claimed in Redis (exists %d, %v): one dead master sent every key to PostgreSQL", n, err)
	}
}

// Two requests whose changes lock the same rows in opposite orders
// deadlock; PostgreSQL aborts one of them, and Do runs that change again
// in a new transaction: both requests succeed, each recorded once, and
// neither caller sees the deadlock.
func TestDeadlockVictimRunsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rds := testenv.NewRedis(t).Conn(t)
	rds.Check(ctx)
	s := newStore(t, rds, nil)
	answer := func(tx *idempotency.Tx) idempotency.Answer {
		return tx.Answer(idempotency.Record{Response: idempotency.Response{Status: 201, Body: []byte(`{}`)}})
	}
	seed := idempotency.ChangeFunc(func(ctx context.Context, tx *idempotency.Tx) (idempotency.Answer, error) {
		_, err := tx.Exec(ctx, "INSERT INTO users (openid) VALUES ('dl-a'), ('dl-b')")
		return answer(tx), err
	})
	if _, err := s.Do(ctx, idempotency.Request{Scope: idempotency.UserScope(9), Key: "seed", Route: "POST /seed"}, seed); err != nil {
		t.Fatal(err)
	}
	var locked sync.WaitGroup
	locked.Add(2)
	var runs, changed atomic.Int32
	lockBoth := func(first, second string) idempotency.ChangeFunc {
		var attempt atomic.Int32
		return func(ctx context.Context, tx *idempotency.Tx) (idempotency.Answer, error) {
			runs.Add(1)
			n := attempt.Add(1)
			// The victim's new transaction starts once the survivor holds
			// both rows: otherwise it may take its first row back before
			// the survivor is woken and deadlock again, as often as
			// RetryAborted tries (make test on a clean clone saw three).
			for n > 1 && changed.Load() == 0 && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			if _, err := tx.Exec(ctx, "UPDATE users SET openid = openid WHERE openid = $1", first); err != nil {
				return idempotency.Answer{}, err
			}
			if n == 1 {
				locked.Done()
				locked.Wait() // both hold their first row
			}
			_, err := tx.Exec(ctx, "UPDATE users SET openid = openid WHERE openid = $1", second)
			if err == nil {
				changed.Add(1)
			}
			return answer(tx), err
		}
	}
	errs := make(chan error, 2)
	for i, op := range []idempotency.ChangeFunc{lockBoth("dl-a", "dl-b"), lockBoth("dl-b", "dl-a")} {
		go func() {
			res, err := s.Do(ctx, idempotency.Request{Scope: idempotency.UserScope(int64(i + 1)), Key: "k", Route: "POST /x"}, op)
			if err == nil && (res.Response.Status != 201 || res.Replayed) {
				err = fmt.Errorf("answered %d, replayed %v", res.Response.Status, res.Replayed)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a request failed: %v", err)
		}
	}
	// Two, and the victim once more.
	if n := runs.Load(); n < 3 {
		t.Errorf("changes ran %d times, want at least 3: two, and the deadlock's victim again", n)
	}
	for user := range int64(2) {
		rec, ok, err := s.Lookup(ctx, user+1, "k")
		if err != nil || !ok || rec.Response.Status != 201 {
			t.Errorf("user %d: record %+v, %v, %v; want its 201", user+1, rec, ok, err)
		}
	}
}

// A change must answer with its own transaction's Answer: a zero Answer
// (or another transaction's) is refused and nothing is recorded, so a
// retry runs.
func TestChangeWithoutItsAnswerRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rds := testenv.NewRedis(t).Conn(t)
	rds.Check(ctx)
	s := newStore(t, rds, nil)
	req := idempotency.Request{Scope: idempotency.UserScope(1), Key: "k", Route: "POST /x"}
	stray := idempotency.ChangeFunc(func(ctx context.Context, tx *idempotency.Tx) (idempotency.Answer, error) {
		_, err := tx.Exec(ctx, "INSERT INTO users (openid) VALUES ('stray')")
		return idempotency.Answer{}, err
	})
	if _, err := s.Do(ctx, req, stray); err == nil {
		t.Fatal("a change without its answer succeeded")
	}
	if _, ok, err := s.Lookup(ctx, 1, req.Key); ok || err != nil {
		t.Fatalf("a record exists (%v, %v) after a refused change", ok, err)
	}
	good := idempotency.ChangeFunc(func(ctx context.Context, tx *idempotency.Tx) (idempotency.Answer, error) {
		_, err := tx.Exec(ctx, "INSERT INTO users (openid) VALUES ('stray')")
		return tx.Answer(idempotency.Record{Response: idempotency.Response{Status: 201, Body: []byte(`{}`)}}), err
	})
	if res, err := s.Do(ctx, req, good); err != nil || res.Response.Status != 201 {
		t.Fatalf("the retry: %+v, %v", res, err)
	}
}

// A creating request whose transaction PostgreSQL aborted to break a
// deadlock runs again with its whole body: the run after the first reads
// what the client sent, not an empty body.
func TestCreatingRunAgainReadsTheBody(t *testing.T) {
	t.Parallel()
	pool := testenv.NewDB(t)
	rds := testenv.NewRedis(t).Conn(t)
	rds.Check(context.Background())
	s, err := idempotency.NewStore(idempotency.Options{
		DB: pool, Redis: rds, Logger: slog.New(slog.DiscardHandler), Retention: time.Hour, InflightTTL: time.Minute,
		CoalesceWait: 200 * time.Millisecond, L1Bytes: 1 << 20, L1TTL: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var bodies []string
	h := idempotency.Creating(s, pool, true, func(*http.Request) string { return "user:1" },
		func(_ context.Context, _ pgx.Tx, r *http.Request) (idempotency.Created, error) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return idempotency.Created{}, err
			}
			bodies = append(bodies, string(b))
			if len(bodies) == 1 {
				return idempotency.Created{}, fmt.Errorf("a statement: %w", &pgconn.PgError{Code: "40P01", Message: "deadlock detected"})
			}
			return idempotency.JSONCreated(http.StatusCreated, map[string]string{"got": string(b)})
		})
	req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{"amount_fen":1300}`))
	req.Header.Set("Idempotency-Key", "deadlocked")
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusCreated || len(bodies) != 2 || bodies[1] != bodies[0] || bodies[0] != `{"amount_fen":1300}` {
		t.Fatalf("answered %d %s; the runs read %q", w.Code, w.Body, bodies)
	}
}
