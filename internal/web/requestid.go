package web

import (
	"context"
	"log/slog"
	"sync"
)

type ctxKey int

const requestKey ctxKey = iota

// request is what the middleware keeps for one request in its context:
// its id, the logger its handlers log with (derived on first use, since
// most requests log nothing but their access line), and the attributes
// handlers add to that line.
type request struct {
	id        string
	principal any // who the request acts for, set by auth middleware
	base      *slog.Logger
	once      sync.Once
	logger    *slog.Logger
	mu        sync.Mutex
	attrs     []slog.Attr
	attrsBuf  [2]slog.Attr // attrs' first home: most requests add one or two
	// unavailable tells errors that mean a dependency is down (retry
	// shortly, 503) from the rest (500); the server supplies it, since
	// what "down" looks like belongs to the database layer.
	unavailable func(error) bool
	// expected is set for an answer that is part of normal operation even
	// though its status is 5xx (see Expected).
	expected bool
}

// Expected marks ctx's request's answer as expected: a 503 the caller is
// meant to retry (a duplicate callback that arrived while its first copy
// was being applied) is logged below ERROR, which is for failures.
func Expected(ctx context.Context) {
	if r := requestOf(ctx); r != nil {
		r.mu.Lock()
		r.expected = true
		r.mu.Unlock()
	}
}

// IsExpected reports whether Expected marked ctx's request.
func IsExpected(ctx context.Context) bool {
	if r := requestOf(ctx); r != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.expected
	}
	return false
}

// WithRequest returns ctx carrying one request's id, the logger its
// handlers' logger derives from (adding the id), room for access-log
// attributes, and how Error recognises an error that means a dependency
// is unavailable (nil: none does).
func WithRequest(ctx context.Context, id string, logger *slog.Logger, unavailable func(error) bool) context.Context {
	r := &request{id: id, base: logger, unavailable: unavailable}
	r.attrs = r.attrsBuf[:0]
	return context.WithValue(ctx, requestKey, r)
}

// dependencyDown reports whether err means, to the server of ctx's
// request, that a dependency is unavailable.
func dependencyDown(ctx context.Context, err error) bool {
	r := requestOf(ctx)
	return r != nil && r.unavailable != nil && r.unavailable(err)
}

func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey).(*request)
	return r
}

// RequestID returns the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	if r := requestOf(ctx); r != nil {
		return r.id
	}
	return ""
}

// SetPrincipal records who the request of ctx acts for, for Principal; it
// reports false outside a request (the caller then carries it in a
// context of its own). Middleware calls it before the handler runs, on the
// request's goroutine: it saves copying the request for a context value.
func SetPrincipal(ctx context.Context, p any) bool {
	r := requestOf(ctx)
	if r == nil {
		return false
	}
	r.principal = p
	return true
}

// Principal returns what SetPrincipal recorded, or nil.
func Principal(ctx context.Context) any {
	if r := requestOf(ctx); r != nil {
		return r.principal
	}
	return nil
}

// Logger returns the request-scoped logger of ctx, which adds the request
// id to every record; one that discards everything outside a request.
func Logger(ctx context.Context) *slog.Logger {
	r := requestOf(ctx)
	if r == nil || r.base == nil {
		return slog.New(slog.DiscardHandler)
	}
	r.once.Do(func() { r.logger = r.base.With("request_id", r.id) })
	return r.logger
}

// AddLogAttrs adds attributes to the request's access log line (a no-op
// outside a request).
func AddLogAttrs(ctx context.Context, attrs ...slog.Attr) {
	if r := requestOf(ctx); r != nil {
		r.mu.Lock()
		r.attrs = append(r.attrs, attrs...)
		r.mu.Unlock()
	}
}

// LogAttrs returns the attributes handlers added.
func LogAttrs(ctx context.Context) []slog.Attr {
	if r := requestOf(ctx); r != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]slog.Attr(nil), r.attrs...)
	}
	return nil
}
