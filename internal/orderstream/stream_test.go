package orderstream

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/testenv"
)

// fixture is a hub over a test database, serving streams over HTTP.
type fixture struct {
	pool  *pgxpool.Pool
	hub   *Hub
	url   string
	token string
	// handler is the stream's handler behind staff auth, for tests that
	// serve it otherwise.
	handler http.Handler
}

func newFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	f := newStoppedFixture(t, o)
	f.run(t)
	return f
}

// newStoppedFixture is a fixture whose hub has not started: run starts it.
func newStoppedFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	pool := testenv.NewDB(t)
	o.Pool, o.Redis, o.Logger, o.Registerer = pool, testenv.NewRedis(t).Conn(t), slog.New(slog.DiscardHandler), prometheus.NewRegistry()
	hub, err := NewHub(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.CloseStreams)
	tokens := auth.NewTokens([]byte(strings.Repeat("u", 32)), []byte(strings.Repeat("s", 32)), time.Hour, time.Now)
	tok, _, err := tokens.IssueStaff("cook", auth.Role{MerchantID: 7}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	handler := auth.RequireStaff(tokens)(HandleStream(hub))
	mux := http.NewServeMux()
	mux.Handle("GET /s/{id}", handler)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &fixture{pool: pool, hub: hub, url: srv.URL + "/s/7", token: tok, handler: handler}
}

// run starts the hub until the test ends.
func (f *fixture) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.hub.Run(ctx) }()
	t.Cleanup(func() { f.hub.CloseStreams(); cancel(); <-done })
}

// insert writes n events of merchant 7 in one transaction, each with a
// body of size bytes, numbered from first.
func (f *fixture) insert(t *testing.T, first, n, size int) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO order_events (event_id, merchant_id, order_id, type, body)
		SELECT 'ev-' || i, 7, i, 'order.paid', json_build_object('n', i, 'pad', repeat('x', $3))
		FROM generate_series($1::int, $1::int + $2::int - 1) i`, first, n, size); err != nil {
		t.Fatal(err)
	}
}

// readIDs reads n event ids from a stream, or what arrives within 15 s:
// a stream that misses an event keeps its connection open, and the test
// must fail, not wait for ever.
func readIDs(t *testing.T, resp *http.Response, n int) []string {
	t.Helper()
	timer := time.AfterFunc(15*time.Second, func() { resp.Body.Close() })
	defer timer.Stop()
	sc := bufio.NewScanner(resp.Body)
	var ids []string
	for len(ids) < n && sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func (f *fixture) open(t *testing.T) *http.Response {
	t.Helper()
	return f.openWith(t, http.DefaultClient)
}

// openWith opens the stream with client.
func (f *fixture) openWith(t *testing.T, client *http.Client) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", f.url, nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	return resp
}

// A stream whose buffer overflows catches up from the outbox: every
// event once, in order. The board reads nothing until its inbox has
// overflowed: with a small receive buffer and large events the stream's
// writer is stuck in a write while the hub offers the rest, so the
// overflow is certain, not a race between the hub and the writer.
func TestAStreamBehindCatchesUpFromTheOutbox(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Buffer: 2, Poll: 20 * time.Millisecond, WriteTimeout: time.Minute})
	client, widen := smallBufferClient(t)
	resp := f.openWith(t, client)
	waitFor(t, "the stream subscribed", func() bool { return f.hub.streamCount() == 1 })
	const n = 300
	for i := 0; i < n; i += 100 {
		f.insert(t, i, 100, 32<<10) // 9.6 MB in all: more than socket buffers hold
	}
	waitFor(t, "the stream's inbox overflowed", func() bool { return f.hub.inboxOverflowed(7) })
	widen()
	ids := readIDs(t, resp, n)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint("ev-", i))
	}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("got %d ids %v..., want ev-0..ev-%d in order", len(ids), ids[:min(len(ids), 5)], n-1)
	}
	if got := testutil.ToFloat64(f.hub.lagged); got == 0 {
		t.Errorf("no catch-up counted after the inbox overflowed")
	}
}

// smallBufferClient is an HTTP client whose connections have a small
// receive buffer, so that a server writing to a client that does not read
// blocks soon; widen gives them a large one, for reading fast again.
func smallBufferClient(t *testing.T) (client *http.Client, widen func()) {
	t.Helper()
	var mu sync.Mutex
	var conns []*net.TCPConn
	// The buffer is set before the connection is made, so the window
	// offered is small from the first: shrunk afterwards, it drops what
	// the larger window let in, and the retransmissions back off for
	// seconds.
	dialer := &net.Dialer{Control: func(_, _ string, raw syscall.RawConn) error {
		var err error
		if cerr := raw.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		conns = append(conns, c.(*net.TCPConn))
		mu.Unlock()
		return c, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			if err := c.SetReadBuffer(4 << 20); err != nil {
				t.Error(err)
			}
		}
	}
}

// inboxOverflowed reports whether an event did not fit a stream of the
// merchant's inbox (its stream has not caught up since).
func (h *Hub) inboxOverflowed(merchantID int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[merchantID] {
		if s.behind.Load() {
			return true
		}
	}
	return false
}

// A board that connects before the hub's first read of the outbox gets
// the events committed after it connected: the hub's first read must not
// skip past them to the end.
func TestAStreamOpenedBeforeTheHubStartsMissesNothing(t *testing.T) {
	t.Parallel()
	f := newStoppedFixture(t, Options{Buffer: 64, Poll: 20 * time.Millisecond})
	resp := f.open(t)
	f.insert(t, 0, 10, 10)
	f.run(t)
	ids := readIDs(t, resp, 10)
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprint("ev-", i))
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Fatalf("event ids (-want +got):\n%s", diff)
	}
}

// A client that stops reading is cut off after the write timeout: it
// holds neither the hub nor memory.
func TestAClientThatStopsReadingIsDropped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Buffer: 16, Poll: 20 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	// A raw connection with a small receive buffer, never read from.
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(f.url, "/s/7"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /s/7 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", f.token)
	waitFor(t, "the stream subscribed", func() bool { return f.hub.streamCount() == 1 })
	for i := 0; i < 4000; i += 500 {
		f.insert(t, i, 500, 4000) // 16 MB in all: more than socket buffers hold
	}
	waitFor(t, "the stalled stream dropped", func() bool { return f.hub.streamCount() == 0 })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An HTTP/1.1 stream takes its connection over from the server: its
// head says so, events arrive on it, and a client that goes ends it at
// once (its place in the hub given back), not at its next heartbeat.
func TestAStreamTakesItsConnectionOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Poll: 20 * time.Millisecond, Heartbeat: time.Hour})
	resp := f.open(t)
	// The body lasts until the connection closes (the client reads
	// Connection: close as Close).
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || !resp.Close || resp.ContentLength != -1 {
		t.Errorf("head: Content-Type %q, close %v, length %d; want text/event-stream, a body to the close", ct, resp.Close, resp.ContentLength)
	}
	waitFor(t, "the stream subscribed", func() bool { return f.hub.streamCount() == 1 })
	f.insert(t, 0, 3, 10)
	if ids := readIDs(t, resp, 3); strings.Join(ids, ",") != "ev-0,ev-1,ev-2" {
		t.Fatalf("ids %v", ids)
	}
	resp.Body.Close()
	waitFor(t, "the stream gone with its client", func() bool { return f.hub.streamCount() == 0 })
}

// plainWriter is a ResponseWriter that cannot be taken over (as HTTP/2's
// cannot), flushing through the one it wraps.
type plainWriter struct{ w http.ResponseWriter }

func (p plainWriter) Header() http.Header         { return p.w.Header() }
func (p plainWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p plainWriter) WriteHeader(code int)        { p.w.WriteHeader(code) }
func (p plainWriter) Flush()                      { p.w.(http.Flusher).Flush() } //nolint:forcetypeassert // the test server's writer flushes

// A stream whose connection cannot be taken over is served through the
// response, as before: the same events, and its end when the client goes.
func TestAStreamServedThroughTheResponse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{Poll: 20 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.SetPathValue("id", "7")
		f.handler.ServeHTTP(plainWriter{w}, r)
	}))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("stream: %d, close %v (taken over?)", resp.StatusCode, resp.Close)
	}
	waitFor(t, "the stream subscribed", func() bool { return f.hub.streamCount() == 1 })
	f.insert(t, 0, 3, 10)
	if ids := readIDs(t, resp, 3); strings.Join(ids, ",") != "ev-0,ev-1,ev-2" {
		t.Fatalf("ids %v", ids)
	}
	resp.Body.Close()
	waitFor(t, "the stream gone with its client", func() bool { return f.hub.streamCount() == 0 })
}
