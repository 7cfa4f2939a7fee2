package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/web"
)

// A request that failed because a dependency was down (as the server's
// classifier, db.Unavailable in takeout, says) answers 503
// service-unavailable with Retry-After, not 500: the client should retry.
func TestErrorDependencyUnavailable(t *testing.T) {
	t.Parallel()
	_, refused := pgx.Connect(context.Background(), "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	if refused == nil {
		t.Fatal("connecting to port 1 succeeded")
	}
	down := func(err error) bool { return errors.Is(err, refused) }
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		slug       string
		retryAfter string
	}{
		{"database unreachable", fmt.Errorf("begin: %w", refused), 503, "service-unavailable", "1"},
		{"a bug", errors.New("boom"), 500, "internal-error", ""},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/orders", nil)
		r = r.WithContext(web.WithRequest(r.Context(), "req-1", nil, down))
		web.Error(w, r, tc.err)
		var doc struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if w.Code != tc.status || doc.Status != tc.status || doc.Type != tc.slug || w.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%s: %d %s (Retry-After %q), want %d %s (%q)", tc.name, w.Code, doc.Type, w.Header().Get("Retry-After"), tc.status, tc.slug, tc.retryAfter)
		}
	}
}

// A request its client abandoned (the connection closed, its context
// cancelled) fails with context.Canceled: that is expected, not a bug.
// It answers 503 with Retry-After for whoever still listens and is marked
// expected for the access log; the same error while the client is still
// there is a bug (500).
func TestErrorClientGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		gone     bool
		status   int
		expected bool
	}{
		{"the client went away", true, 503, true},
		{"cancelled while the client waits", false, 500, false},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		if tc.gone {
			cancel()
		} else {
			defer cancel()
		}
		w := httptest.NewRecorder()
		r := httptest.NewRequestWithContext(ctx, "POST", "/v1/orders", nil)
		r = r.WithContext(web.WithRequest(r.Context(), "req-1", nil, nil))
		web.Error(w, r, fmt.Errorf("begin: %w", context.Canceled))
		if w.Code != tc.status || web.IsExpected(r.Context()) != tc.expected {
			t.Errorf("%s: %d, expected %v; want %d, %v", tc.name, w.Code, web.IsExpected(r.Context()), tc.status, tc.expected)
		}
	}
}
