package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/idempotency"
)

// A replayed answer carries its stored header fields, the replay mark and
// its length.
func TestWriteResponseSendsStoredAnswer(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	body := []byte(`{"id":"1"}`)
	idempotency.WriteResponse(rec, idempotency.Result{Replayed: true, Response: idempotency.Response{
		Status: http.StatusCreated, Body: body,
		Headers: map[string]string{"Content-Type": "application/json", "location": "/v1/orders/1"},
	}})
	want := http.Header{
		"Content-Type":        {"application/json"},
		"Location":            {"/v1/orders/1"},
		"Idempotent-Replayed": {"true"},
		"Content-Length":      {"10"},
	}
	if diff := cmp.Diff(want, rec.Header()); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if rec.Code != http.StatusCreated || rec.Body.String() != string(body) {
		t.Errorf("answer %d %q, want 201 %q", rec.Code, rec.Body.String(), body)
	}
}
