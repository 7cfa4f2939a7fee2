package sharing

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/payment"
)

func TestNumbers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{ShareNo("T123-1", 1), "S123-1"},
		{ShareNo("T123-2", 3), "S123-2_3"},
		{ReturnNo("R123-1-P1", 1), "B123-1-P1"},
		{ReturnNo("R123-1", 2), "B123-1_2"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s, want %s", tc.got, tc.want)
		}
	}
}

// Which answers end a request (FAILED, for an operator) and which are
// worth the same request again: only a signed 4xx of a code that is not
// the platform's trouble ends it.
func TestRefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err   error
		final bool
	}{
		{&payment.APIError{Status: 400, Code: "INVALID_REQUEST", Signed: true}, true},
		{&payment.APIError{Status: 403, Code: "NOT_ENOUGH", Signed: true}, true},
		{fmt.Errorf("wrapped: %w", &payment.APIError{Status: 404, Code: "RESOURCE_NOT_EXISTS", Signed: true}), true},
		{&payment.APIError{Status: 400, Code: "INVALID_REQUEST"}, false}, // unsigned: decides nothing
		{&payment.APIError{Status: 500, Code: "SYSTEM_ERROR", Signed: true}, false},
		{&payment.APIError{Status: 429, Code: "FREQUENCY_LIMITED", Signed: true}, false},
		{&payment.APIError{Status: 403, Code: "RATELIMIT_EXCEED", Signed: true}, false},
		{errors.New("connection reset"), false},
	} {
		if code, final := refusal(tc.err); final != tc.final {
			t.Errorf("%v: final %v (%q), want %v", tc.err, final, code, tc.final)
		}
	}
}

// A sweep stops taking payments when its job is about to run out of
// time, not before, and not when its job has no deadline.
func TestSweepOutOfTime(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want bool
	}{
		{"no deadline", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }, false},
		{"ten seconds left", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Second)
		}, false},
		{"within the margin", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), sweepMargin/2)
		}, true},
		{"cancelled", func() (context.Context, context.CancelFunc) { return cancelled, func() {} }, true},
	} {
		ctx, cancel := tc.ctx()
		if got := outOfTime(ctx); got != tc.want {
			t.Errorf("%s: out of time %v, want %v", tc.name, got, tc.want)
		}
		cancel()
	}
}
