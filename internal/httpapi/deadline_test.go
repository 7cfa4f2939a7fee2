package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type (
	ctxKey     struct{}
	derivedKey struct{}
)

// serveWithDeadline runs handle behind deadline(d) on a request whose own
// context is parent (with a value under ctxKey) and returns the context
// the handler saw.
func serveWithDeadline(t *testing.T, parent context.Context, d time.Duration, handle func(r *http.Request)) context.Context {
	t.Helper()
	var seen context.Context
	h := deadline(d)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		seen = r.Context()
		handle(r)
	}))
	r := httptest.NewRequestWithContext(context.WithValue(parent, ctxKey{}, "kept"), http.MethodGet, "/", nil)
	h.ServeHTTP(httptest.NewRecorder(), r)
	return seen
}

// A request that waits on its context (as a statement or a Redis command
// does) is ended by the deadline, and so is every context derived from
// it; the deadline is the one the request reports.
func TestDeadlineEndsTheWorkThatWaits(t *testing.T) {
	t.Parallel()
	const d = 50 * time.Millisecond
	start := time.Now()
	var derivedErr, err error
	var at time.Time
	serveWithDeadline(t, t.Context(), d, func(r *http.Request) {
		at, _ = r.Context().Deadline()
		derived, cancel := context.WithCancel(context.WithValue(r.Context(), derivedKey{}, 1))
		defer cancel()
		<-derived.Done()
		derivedErr = derived.Err()
		<-r.Context().Done()
		err = r.Context().Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(derivedErr, context.DeadlineExceeded) {
		t.Errorf("after the deadline: request %v, derived %v; want both %v", err, derivedErr, context.DeadlineExceeded)
	}
	if elapsed := time.Since(start); elapsed < d {
		t.Errorf("ended after %v, before the deadline of %v", elapsed, d)
	}
	if at.Before(start.Add(d)) || at.After(time.Now()) {
		t.Errorf("Deadline() %v, want %v after the request began (%v)", at, d, start)
	}
}

// The client going away ends the request's work at once, deadline or not.
func TestDeadlineFollowsTheClientGoingAway(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithCancel(t.Context())
	var err error
	serveWithDeadline(t, parent, time.Hour, func(r *http.Request) {
		done := r.Context().Done()
		cancel()
		<-done
		err = r.Context().Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("after the client went away: %v, want %v", err, context.Canceled)
	}
}

// An earlier deadline of the request's own context stands.
func TestDeadlineKeepsAnEarlierOne(t *testing.T) {
	t.Parallel()
	parent, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	want, _ := parent.Deadline()
	var got time.Time
	serveWithDeadline(t, parent, time.Hour, func(r *http.Request) { got, _ = r.Context().Deadline() })
	if !got.Equal(want) {
		t.Errorf("Deadline() %v, want the parent's %v", got, want)
	}
}

// A request answered without waiting on its context (from memory) arms no
// timer: that is what the lazy deadline is for. Its values are the
// request's, and once it is answered its context is done as the
// request's own is, for any work it left running.
func TestDeadlineArmsNoTimerForAnAnswerFromMemory(t *testing.T) {
	t.Parallel()
	var value any
	ctx := serveWithDeadline(t, t.Context(), time.Hour, func(r *http.Request) {
		value = r.Context().Value(ctxKey{})
		_, _ = r.Context().Deadline()
	})
	if value != "kept" {
		t.Errorf("value %v, want the request's", value)
	}
	rc, ok := ctx.(*requestContext)
	if !ok {
		t.Fatalf("the handler's context is a %T, want *requestContext", ctx)
	}
	if rc.armed.Load() != nil {
		t.Error("a timer was armed for a request that never waited on its context")
	}
	endedByTheAnswer(t, ctx)
}

// An armed timer stops when the request is answered: the context is
// cancelled then, not at its deadline an hour later.
func TestDeadlineEndsWithTheAnswer(t *testing.T) {
	t.Parallel()
	endedByTheAnswer(t, serveWithDeadline(t, t.Context(), time.Hour, func(r *http.Request) { _ = r.Context().Done() }))
}

// endedByTheAnswer checks that the context of an answered request is
// done, cancelled (not past its deadline).
func endedByTheAnswer(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("the context of an answered request is not done")
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after the answer: %v, want %v", ctx.Err(), context.Canceled)
	}
}

// Goroutines of one request that ask at once arm one deadline and see
// the same channel (run with -race).
func TestDeadlineArmsOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	serveWithDeadline(t, t.Context(), time.Hour, func(r *http.Request) {
		ctx := r.Context()
		chans := make([]<-chan struct{}, 16)
		var wg sync.WaitGroup
		for i := range chans {
			wg.Go(func() {
				_ = ctx.Value(ctxKey{})
				chans[i] = ctx.Done()
			})
		}
		wg.Wait()
		for i, ch := range chans {
			if ch != chans[0] || ch == nil {
				t.Errorf("goroutine %d saw channel %v, goroutine 0 %v", i, ch, chans[0])
			}
		}
	})
}
