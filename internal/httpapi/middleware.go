package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/telemetry"
	"github.com/takeout/takeout/internal/web"
)

const requestIDHeader = "X-Request-Id"

// instrument gives every request an id (the caller's X-Request-Id when it
// is short and printable, else a new one, echoed in the response), a
// logger and access-log attributes in its context; once the request is
// answered it logs one line and records its latency under its route
// pattern (never the raw path, which would explode the label set). Query
// strings are not logged: they may carry secrets. It is one middleware so
// that a request costs one context and one response recorder.
func instrument(logger *slog.Logger, m *httpMetrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			id := r.Header.Get(requestIDHeader)
			if !validRequestID(id) {
				var b [12]byte
				_, _ = rand.Read(b[:])
				id = hex.EncodeToString(b[:])
			}
			w.Header().Set(requestIDHeader, id)
			rec := &statusRecorder{ResponseWriter: w}
			ctx := web.WithRequest(r.Context(), id, logger, db.Unavailable)
			r = r.WithContext(ctx)
			next.ServeHTTP(rec, r)
			if rec.status == 0 {
				rec.status = http.StatusOK
			}
			elapsed := time.Since(start)
			route := routePattern(r)
			telemetry.SetRoute(ctx, r.Method, route)
			m.duration.WithLabelValues(route, r.Method, strconv.Itoa(rec.status)).Observe(elapsed.Seconds())
			level := logLevel(ctx, rec.status)
			if !logger.Enabled(ctx, level) {
				return
			}
			attrs := append([]slog.Attr{
				slog.String("request_id", id),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("route", route),
				slog.Int("status", rec.status),
				slog.Int("bytes", rec.bytes),
				slog.Duration("duration", elapsed),
			}, web.LogAttrs(ctx)...)
			logger.LogAttrs(ctx, level, "http request", attrs...)
		})
	}
}

// logLevel is the level of a request's access line: ERROR for a failure
// of ours (500), WARN for a dependency that is down or an upstream that
// failed (502, 503, 504: retried), INFO for the rest, and for a 5xx
// marked expected (web.Expected).
func logLevel(ctx context.Context, status int) slog.Level {
	switch {
	case status < 500 || web.IsExpected(ctx):
		return slog.LevelInfo
	case status == http.StatusInternalServerError:
		return slog.LevelError
	default:
		return slog.LevelWarn
	}
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func routePattern(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// httpMetrics holds the latency histogram per route.
type httpMetrics struct {
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "takeout_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern, method and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method", "code"}),
	}
	if err := reg.Register(m.duration); err != nil {
		return nil, fmt.Errorf("register http metrics: %w", err)
	}
	return m, nil
}

// recoverPanics turns a handler panic into a logged 500 problem.
func recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				web.Error(w, r, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// wellFormed refuses, on every route, a query string that does not parse
// (a bad %-escape, a ';' separator): url.URL.Query would drop the pair,
// and a handler would act as if it had not been sent. Routes that take
// parameters read them with web.Query, which also refuses unknown and
// repeated ones. It refuses as well a path (its parameters) or a header
// the service reads that breaks the text rule (web.CheckPathAndHeaders).
func wellFormed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkWellFormed(r); err != nil {
			web.Error(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkWellFormed is wellFormed's check.
func checkWellFormed(r *http.Request) error {
	if r.URL.RawQuery != "" {
		if err := web.CheckQuery(r); err != nil {
			return err
		}
	}
	return web.CheckPathAndHeaders(r)
}

// limitBody caps every request body; web.Decode turns the overflow into a
// 413 problem.
func limitBody(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				web.WriteProblem(w, r, problem.New(problem.BodyTooLarge, "the body exceeds %d bytes", limit))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			next.ServeHTTP(w, r)
		})
	}
}

func notFound(w http.ResponseWriter, r *http.Request) {
	web.WriteProblem(w, r, problem.New(problem.NotFound, "no route %s %s", r.Method, r.URL.Path))
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	web.WriteProblem(w, r, problem.New(problem.MethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
}
