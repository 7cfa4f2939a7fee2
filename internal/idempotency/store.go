package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/redisconn"
	"github.com/takeout/takeout/internal/telemetry"
)

// Response is a completed response as it is replayed. Read its header
// fields with Header and HeaderFields: a response replayed from L1 keeps
// them packed (see l1Entry), and its Headers is nil.
type Response struct {
	Status  int               `json:"s"`
	Headers map[string]string `json:"h"`
	Body    []byte            `json:"b"`
	// packed holds the header fields instead of Headers, encoded as in
	// an l1Entry, when the response was read from L1.
	packed string
}

// Header is the value of the header field name, "" when there is none.
func (r Response) Header(name string) string {
	if r.packed == "" {
		return r.Headers[name]
	}
	for k, v := range r.HeaderFields() {
		if k == name {
			return v
		}
	}
	return ""
}

// HeaderFields yields each header field's name and value.
func (r Response) HeaderFields() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if r.packed == "" {
			for k, v := range r.Headers {
				if !yield(k, v) {
					return
				}
			}
			return
		}
		for rest := r.packed; rest != ""; {
			var k, v string
			k, rest = packedField(rest)
			v, rest = packedField(rest)
			if !yield(k, v) {
				return
			}
		}
	}
}

// MarshalJSON encodes r as stored in Redis and PostgreSQL, with its
// header fields as the "h" object however r holds them.
func (r Response) MarshalJSON() ([]byte, error) {
	type stored Response // without this method
	r.Headers = r.headerMap()
	return json.Marshal(stored(r))
}

// headerMap is r's header fields as a map: Headers itself unless they are
// packed.
func (r Response) headerMap() map[string]string {
	if r.packed == "" {
		return r.Headers
	}
	return maps.Collect(r.HeaderFields())
}

// Record is a stored response with what it answered.
type Record struct {
	Fingerprint []byte   `json:"f"`
	Response    Response `json:"r"`
	OrderID     int64    `json:"o,omitempty"`
	// Request is the request itself, its route, a newline and its body
	// (see requestText), kept in L1 only: a replay is then recognised by
	// comparing it, not by hashing it again. Records read from Redis or
	// PostgreSQL lack it and are compared by Fingerprint.
	Request string `json:"-"`
}

// Options configure a Store.
type Options struct {
	// DB is where the records live (the pool).
	DB     *pgxpool.Pool
	Redis  *redisconn.Conn
	Logger *slog.Logger
	// Retention is how long records are kept (at least 72h in production).
	Retention time.Duration
	// InflightTTL bounds how long a claim blocks retries when its owner
	// dies; it must exceed the longest processing time.
	InflightTTL time.Duration
	// CoalesceWait is how long a duplicate waits for the in-flight request
	// before answering 409.
	CoalesceWait time.Duration
	// L1Bytes bounds the in-process cache by the size of its responses.
	L1Bytes uint64
	// L1TTL is how long a response stays in L1.
	L1TTL time.Duration
	// FinalizeWindow is how long an answer may wait to go to Redis with
	// the answers of other requests (2ms when 0): see finalizer.
	FinalizeWindow time.Duration
	// Now is the clock (time.Now when nil): expiries, waits, L1's TTL.
	Now        func() time.Time
	Registerer prometheus.Registerer
}

// Store is the idempotency layers of one instance.
type Store struct {
	opts Options
	l1   *l1Cache
	q    *dbsqlc.Queries
	// breakers hold the idempotency layer off failing Redis shards.
	breakers *breakers
	finals   *finalizer
	logger   *slog.Logger

	outcomes *prometheus.CounterVec
}

// NewStore returns a Store.
func NewStore(opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.FinalizeWindow <= 0 {
		opts.FinalizeWindow = defaultFinalizeWindow
	}
	s := &Store{
		opts:   opts,
		l1:     newL1Cache(opts.L1Bytes, opts.L1TTL, opts.Now),
		q:      dbsqlc.New(),
		logger: opts.Logger,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_idempotency_outcomes_total",
			Help: "Idempotency lookups by layer (l1, redis, postgres) and outcome (hit, miss, inflight, mismatch, replay, claimed, backstop).",
		}, []string{"layer", "outcome"}),
		breakers: newBreakers(opts.Redis, opts.Logger),
	}
	s.finals = &finalizer{s: s}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{s.outcomes, s.breakers.open, newL1Collector(s)} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register idempotency metrics: %w", err)
			}
		}
	}
	return s, nil
}

// L1Size is the number of responses the in-process cache holds and the
// bytes they take in it. It reads the whole cache: for metrics and tests.
func (s *Store) L1Size() (entries int, bytes uint64) { return s.l1.size() }

// Remember puts a completed record in this instance's L1, as Do does
// after a commit (and nowhere else). The memory bench (cmd/bench l1)
// fills L1 with it without a database.
func (s *Store) Remember(scope Scope, key string, rec Record) { s.l1.set(scope.l1Key(key), rec) }

// Close stores the answers still on their way to Redis, then empties the
// in-process cache and frees its memory. It runs after the last request.
func (s *Store) Close() {
	s.finals.close()
	s.l1.release()
}

// Retention is how long records are kept.
func (s *Store) Retention() time.Duration { return s.opts.Retention }

// count records an outcome of a layer in the metrics and, when the
// request is traced, on its span (takeout.idempotency.<layer>): a trace
// says which layer answered.
func (s *Store) count(ctx context.Context, layer, outcome string) {
	s.outcomes.WithLabelValues(layer, outcome).Inc()
	// The attribute's name is built only for a span that records it: a
	// replay answered from L1 would otherwise allocate it for nothing.
	if telemetry.Recording(ctx) {
		telemetry.Attr(ctx, "takeout.idempotency."+layer, outcome)
	}
}

// outcome is what begin found.
type outcome struct {
	// replay, when set, is the stored response to send again.
	replay *Response
	// claim, when replay is nil, is this request's right to run; it is
	// finalized after commit or released on failure before commit.
	claim *claim
}

// claim is a request's hold on its key.
type claim struct {
	s       *Store
	scope   Scope
	key     string
	fp      []byte
	owner   string
	rk      string // the Redis key
	inRedis bool
}

// cached answers from L1 alone: the stored response when this exact
// request (route and body) completed here before, ErrMismatch when the
// key answered another request, or ok false on a miss. It touches nothing
// outside the process. The request is compared as itself when the entry
// kept it (see Record.Request), else by fingerprint, computed only then.
func (s *Store) cached(ctx context.Context, scope Scope, key, route, body string, fingerprint func() []byte) (Response, bool, error) {
	rk := scope.l1Key(key)
	var (
		resp        Response
		same        bool
		compareByFP bool
		kept        l1Entry // a copy, when compared by fingerprint
	)
	found := s.l1.view(rk, func(e l1Entry) {
		switch k := e.request(); {
		case k == "":
			// Hashing takes time: compared outside the shard's lock.
			compareByFP, kept = true, e.clone()
		case isRequest(k, route, body):
			same, resp = true, e.cloneResponse()
		}
	})
	if !found {
		return Response{}, false, nil
	}
	if compareByFP {
		same, resp = bytes.Equal(kept.fingerprint(), fingerprint()), kept.response()
		if same {
			// Proven the same request: keep it, so that the next replay
			// (of a record that came from Redis or PostgreSQL) compares
			// instead of hashing.
			rec := kept.record()
			rec.Request = requestText(route, body)
			s.l1.set(rk, rec)
		}
	}
	if !same {
		s.count(ctx, "l1", "mismatch")
		return Response{}, false, ErrMismatch
	}
	s.count(ctx, "l1", "hit")
	return resp, true, nil
}

// requestText is a request as L1 keeps it (Record.Request): its route, a
// newline, its body. A route holds no newline (see Request.Route), so two
// requests never share a text.
func requestText(route, body string) string { return route + "\n" + body }

// isRequest reports whether text is requestText(route, body), without
// building it: a replay answered from L1 allocates nothing for the
// comparison.
func isRequest(text, route, body string) bool {
	return len(text) == len(route)+1+len(body) &&
		text[:len(route)] == route && text[len(route)] == '\n' && text[len(route)+1:] == body
}

// begin claims the key in Redis (L1 has missed). A completed record with
// the same fingerprint replays; another fingerprint is ErrMismatch; a
// running duplicate is waited for up to CoalesceWait, then PostgreSQL is
// asked, then InProgress. Without a usable Redis the claim is local and
// PostgreSQL alone decides.
func (s *Store) begin(ctx context.Context, scope Scope, key string, fp []byte) (outcome, error) {
	c := &claim{s: s, scope: scope, key: key, fp: fp, owner: newOwner(), rk: s.redisKey(scope, key)}
	if !s.redisUsable(ctx, c.rk) {
		s.count(ctx, "redis", "skipped")
		return outcome{claim: c}, nil
	}
	deadline := s.opts.Now().Add(s.opts.CoalesceWait)
	for {
		res, err := s.claimRedis(ctx, c)
		if err != nil {
			// Redis failed: PostgreSQL alone still guarantees exactly-once.
			s.logger.WarnContext(ctx, "idempotency claim in redis failed; using postgres", "err", err)
			return outcome{claim: c}, nil
		}
		switch res.state {
		case "claimed":
			s.count(ctx, "redis", "claimed")
			c.inRedis = true
			return outcome{claim: c}, nil
		case "mismatch":
			s.count(ctx, "redis", "mismatch")
			return outcome{}, ErrMismatch
		case "done":
			s.count(ctx, "redis", "hit")
			s.l1.set(scope.l1Key(key), res.record)
			return outcome{replay: &res.record.Response}, nil
		case "inflight":
			if s.opts.Now().After(deadline) {
				s.count(ctx, "redis", "inflight")
				return s.afterWait(ctx, scope, key, fp)
			}
			select {
			case <-ctx.Done():
				return outcome{}, ctx.Err()
			case <-time.After(15 * time.Millisecond):
			}
		default:
			return outcome{}, fmt.Errorf("idempotency: unexpected claim state %q", res.state)
		}
	}
}

// afterWait runs when a duplicate is still in flight after the coalescing
// wait. The owner may have committed and then lost Redis: ask PostgreSQL,
// the truth, before telling the client to come back.
func (s *Store) afterWait(ctx context.Context, scope Scope, key string, fp []byte) (outcome, error) {
	rec, ok, err := s.lookup(ctx, scope, key)
	if err != nil {
		return outcome{}, err
	}
	if !ok {
		return outcome{}, InProgress(retryAfterSeconds)
	}
	if !bytes.Equal(rec.Fingerprint, fp) {
		s.count(ctx, "postgres", "mismatch")
		return outcome{}, ErrMismatch
	}
	s.count(ctx, "postgres", "replay")
	s.l1.set(scope.l1Key(key), rec)
	return outcome{replay: &rec.Response}, nil
}

// retryAfterSeconds is what a 409 request-in-progress suggests.
const retryAfterSeconds = 1

func newOwner() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// BreakerState reports the Redis circuit breakers: closed, open or
// half-open (on a cluster, the worst of its shards').
func (s *Store) BreakerState() string { return s.breakers.state().String() }

// redisUsable reports whether Redis is configured, answering, and the
// shard of key is not held off by its circuit breaker.
func (s *Store) redisUsable(ctx context.Context, key string) bool {
	return s.opts.Redis.Client != nil && s.opts.Redis.Available() && s.breakers.forKey(ctx, key).State() != gobreaker.StateOpen
}

// l1Collector reports L1's two gauges from counters the cache keeps as
// entries come and go: a scrape costs two loads, and never waits on (or
// holds up) a request's shard lock.
type l1Collector struct {
	s              *Store
	entries, bytes *prometheus.Desc
}

func newL1Collector(s *Store) *l1Collector {
	return &l1Collector{s: s,
		entries: prometheus.NewDesc("takeout_idempotency_l1_entries", "Responses the in-process cache indexes (an expired one until it is written over).", nil, nil),
		bytes: prometheus.NewDesc("takeout_idempotency_l1_bytes",
			"Ring memory the in-process cache has allocated for responses, which TAKEOUT_IDEMPOTENCY_L1_BYTES bounds with its index.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *l1Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.entries; ch <- c.bytes }

// Collect implements prometheus.Collector.
func (c *l1Collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(c.s.l1.indexed.Load()))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(c.s.l1.ringBytes.Load()))
}
