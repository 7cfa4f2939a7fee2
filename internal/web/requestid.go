package web

import (
	"context"
	"log/slog"
	"sync"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	loggerKey
)

// WithRequestID returns ctx carrying the request's id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID returns the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// WithLogger returns ctx carrying a request-scoped logger.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey, l)
}

// Logger returns the request-scoped logger of ctx; one that discards
// everything when the middleware did not set one.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey).(*slog.Logger); ok {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// logAttrs collects attributes a handler learns (e.g. the order id) for
// the request's access log line.
type logAttrs struct {
	mu    sync.Mutex
	attrs []slog.Attr
}

const logAttrsKey ctxKey = 100

// WithLogAttrs returns ctx able to collect access-log attributes; the
// access-log middleware reads them with LogAttrs after the handler.
func WithLogAttrs(ctx context.Context) context.Context {
	return context.WithValue(ctx, logAttrsKey, &logAttrs{})
}

// AddLogAttrs adds attributes to the request's access log line (a no-op
// outside a request).
func AddLogAttrs(ctx context.Context, attrs ...slog.Attr) {
	if h, ok := ctx.Value(logAttrsKey).(*logAttrs); ok {
		h.mu.Lock()
		h.attrs = append(h.attrs, attrs...)
		h.mu.Unlock()
	}
}

// LogAttrs returns the attributes handlers added.
func LogAttrs(ctx context.Context) []slog.Attr {
	if h, ok := ctx.Value(logAttrsKey).(*logAttrs); ok {
		h.mu.Lock()
		defer h.mu.Unlock()
		return append([]slog.Attr(nil), h.attrs...)
	}
	return nil
}
