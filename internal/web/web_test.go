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

// A request that failed because the database was unreachable answers 503
// service-unavailable with Retry-After, not 500: the client should retry.
func TestErrorDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	_, refused := pgx.Connect(context.Background(), "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	if refused == nil {
		t.Fatal("connecting to port 1 succeeded")
	}
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
		web.Error(w, httptest.NewRequest("POST", "/v1/orders", nil), tc.err)
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
