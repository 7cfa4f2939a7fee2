package httpapi

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// deadline bounds each request's work: when its context ends, its
// statements are cancelled and its transaction rolls back, so no request
// holds a database connection longer than d (answered 503 with
// Retry-After). The deadline's timer is armed only when something waits
// on the context (see requestContext).
func deadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if d <= 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := &requestContext{Context: r.Context(), at: time.Now().Add(d)}
			defer ctx.end()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// requestContext is a request's context with a deadline whose timer is
// armed the first time something asks whether the context is done: every
// statement and Redis command does (pgx and go-redis watch Done), an
// answer from memory (a replay, a duplicate callback) never does. For
// those, context.WithTimeout's timer and its registration with the
// connection's context were a measurable share of the api's CPU per
// request (docs/performance.md). Values and the client's going away come from
// the request's own context; once armed, from the context.WithDeadline
// made then, so that contexts derived from this one are cancelled with it
// by the context package itself.
type requestContext struct {
	context.Context //nolint:containedctx // the request's: its values, and the client going away

	at    time.Time
	armed atomic.Pointer[armedDeadline]
	mu    sync.Mutex // arming, and ending
	ended bool
}

type armedDeadline struct {
	ctx    context.Context //nolint:containedctx // the armed deadline's
	cancel context.CancelFunc
}

// arm returns the context with the deadline's timer running, making it
// the first time.
func (c *requestContext) arm() context.Context {
	if a := c.armed.Load(); a != nil {
		return a.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.armed.Load(); a != nil {
		return a.ctx
	}
	ctx, cancel := context.WithDeadline(c.Context, c.at)
	if c.ended {
		// Asked after the answer (by work the request left running):
		// done, as the request's own context is by then.
		cancel()
	}
	c.armed.Store(&armedDeadline{ctx: ctx, cancel: cancel})
	return ctx
}

// end is the request's answer: an armed timer stops, and a context armed
// later is done at once.
func (c *requestContext) end() {
	c.mu.Lock()
	c.ended = true
	a := c.armed.Load()
	c.mu.Unlock()
	if a != nil {
		a.cancel()
	}
}

// Deadline is the request's deadline, or its parent's when that is
// earlier; asking does not arm the timer.
func (c *requestContext) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.at) {
		return d, true
	}
	return c.at, true
}

// Done arms the deadline.
func (c *requestContext) Done() <-chan struct{} { return c.arm().Done() }

// Err arms the deadline: its answer must agree with Done.
func (c *requestContext) Err() error { return c.arm().Err() }

// Value is the armed context's value once armed (so that the context
// package finds the armed cancellation), the request's before.
func (c *requestContext) Value(key any) any {
	if a := c.armed.Load(); a != nil {
		return a.ctx.Value(key)
	}
	return c.Context.Value(key)
}
