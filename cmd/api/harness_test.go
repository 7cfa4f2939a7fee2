package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/testenv"
	"github.com/takeout/takeout/internal/wxsim"
)

// stack is what a group of API instances share: one database, one Redis
// prefix, one WeChat simulator and the secrets.
type stack struct {
	env    map[string]string
	tokens *auth.Tokens
	client *http.Client
	redis  testenv.Redis
	dbURL  string
	// pool is the test's own view of the database, for assertions.
	pool *pgxpool.Pool
}

const (
	testAppID     = "wxtest00000000000"
	testAppSecret = "test-app-secret"
)

func newStack(t testing.TB) *stack {
	t.Helper()
	sessionSecret := strings.Repeat("s", 32) + t.Name()
	staffSecret := strings.Repeat("a", 32) + t.Name()
	wx := httptest.NewServer(wxsim.New(testAppID, testAppSecret))
	t.Cleanup(wx.Close)
	r := testenv.NewRedis(t)
	s := &stack{
		redis: r,
		dbURL: testenv.NewDatabaseURL(t),
		env: map[string]string{
			"TAKEOUT_HTTP_ADDR":         "127.0.0.1:0",
			"TAKEOUT_OPS_ADDR":          "127.0.0.1:0",
			"TAKEOUT_REDIS_URL":         r.URL,
			"TAKEOUT_REDIS_PREFIX":      r.Prefix,
			"TAKEOUT_SESSION_SECRET":    sessionSecret,
			"TAKEOUT_STAFF_SECRET":      staffSecret,
			"TAKEOUT_CONFIRM_SECRET":    strings.Repeat("c", 32) + t.Name(),
			"TAKEOUT_WECHAT_API_BASE":   wx.URL,
			"TAKEOUT_WECHAT_APPID":      testAppID,
			"TAKEOUT_WECHAT_APP_SECRET": testAppSecret,
			// Only invalidation may refresh the catalog cache in tests.
			"TAKEOUT_CATALOG_CACHE_TTL": "1h",
			// Tests with a pay window of a second see their timeouts soon.
			"TAKEOUT_ORDER_TIMEOUT_SWEEP_INTERVAL": "500ms",
			// Tests that move an accept deadline see it applied soon.
			"TAKEOUT_ORDER_ACCEPT_SWEEP_INTERVAL": "500ms",
			// Above net/http's 5 s grace for connections that sent no request
			// yet, which Shutdown waits out: bursts leave some behind.
			"TAKEOUT_SHUTDOWN_TIMEOUT": "15s",
			"TAKEOUT_LOG_LEVEL":        "debug",
			// Storm tests send hundreds of requests from one address;
			// TestRateLimits turns the limits on.
			"TAKEOUT_RATE_LIMIT_IP":   "0",
			"TAKEOUT_RATE_LIMIT_USER": "0",
		},
		tokens: auth.NewTokens([]byte(sessionSecret), []byte(staffSecret), time.Hour, time.Now),
		client: testenv.ContractClient(t),
	}
	s.env["TAKEOUT_DATABASE_URL"] = s.dbURL
	s.pool = testenv.Pool(t, s.dbURL)
	return s
}

// instance is one running API process (run in a goroutine).
type instance struct {
	url    string
	ops    string // the operations listener, when it serves one
	logs   *logBuffer
	stdout *logBuffer // spans, when the console exporter traces
}

// start runs the API with the stack's environment plus overrides, waits
// until it listens, and on cleanup stops it and checks it shut down
// cleanly.
func (s *stack) start(t testing.TB, overrides map[string]string) *instance {
	t.Helper()
	env := maps.Clone(s.env)
	maps.Copy(env, overrides)
	logs := &logBuffer{listening: make(chan string, 1), ops: make(chan string, 1)}
	stdout := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, func(k string) string { return env[k] }, stdout, logs) }()
	t.Cleanup(func() {
		// Surplus connections the client dialed during bursts and never
		// used count as active to Shutdown for 5s: close them first.
		s.client.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("api exited with %v", err)
			}
		case <-time.After(25 * time.Second):
			t.Error("api did not shut down within 25s")
		}
		if t.Failed() {
			// What the instance said went wrong (its debug log is too
			// long to show whole).
			t.Logf("api errors:\n%s", errorLines(logs.String(), 40))
		}
	})
	select {
	case addr := <-logs.listening:
		inst := &instance{url: "http://" + addr, logs: logs, stdout: stdout}
		select {
		case ops := <-logs.ops: // logged before the API listens
			inst.ops = "http://" + ops
		default:
		}
		return inst
	case err := <-done:
		t.Fatalf("api exited before listening: %v\nlogs:\n%s", err, logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("api not listening after 20s; logs:\n%s", logs.String())
	}
	return nil
}

// logBuffer keeps an instance's logs and reports its listening address.
// errorLines are the first max lines of an instance's log at level
// ERROR.
func errorLines(log string, max int) string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, `"level":"ERROR"`) && len(out) < max {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

type logBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	listening chan string
	ops       chan string
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(p, &rec) == nil {
		ch := map[string]chan string{"http server listening": l.listening, "operations server listening": l.ops}[rec.Msg]
		if ch != nil {
			select {
			case ch <- rec.Addr:
			default:
			}
		}
	}
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// response is an answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into v, failing the test on error.
func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

// problemType returns the problem's type slug, or "" when the answer is
// not a problem.
func (r response) problemType() string {
	if r.header.Get("Content-Type") != "application/problem+json" {
		return ""
	}
	var p struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(r.body, &p)
	return p.Type
}

// do sends a request with an optional bearer token and body (a string is
// sent as is, anything else as JSON).
func (s *stack) do(t testing.TB, inst *instance, method, path, token string, body any) response {
	t.Helper()
	switch b := body.(type) {
	case nil:
		return s.doRaw(t, inst, method, path, token, "", "")
	case string:
		return s.doRaw(t, inst, method, path, token, b, "application/json")
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		return s.doRaw(t, inst, method, path, token, string(j), "application/json")
	}
}

// doRaw sends body as is with the given content type (none when empty;
// application/json when body is set and contentType is empty).
func (s *stack) doRaw(t testing.TB, inst *instance, method, path, token, body, contentType string) response {
	t.Helper()
	var rd io.Reader
	if body != "" || method != http.MethodGet {
		rd = strings.NewReader(body)
		if contentType == "" {
			contentType = "application/json"
		}
	}
	req, err := http.NewRequest(method, inst.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// staffToken mints a staff token for role.
func (s *stack) staffToken(t testing.TB, role string) string {
	t.Helper()
	r, err := auth.ParseRole(role)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := s.tokens.IssueStaff("test-"+role, r, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// db returns the stack's own pool on its database.
func (s *stack) db(*testing.T) *pgxpool.Pool { return s.pool }

// count returns the result of a counting query against the stack's
// database.
func (s *stack) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db(t).QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// metrics scrapes an instance's operations listener.
func (s *stack) metrics(t testing.TB, inst *instance) string {
	t.Helper()
	if inst.ops == "" {
		t.Fatal("the instance serves no operations listener")
	}
	resp, err := http.Get(inst.ops + "/metrics") //nolint:noctx // a test scrape
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}
