package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/idempotency"
)

// A replayed answer carries its stored header fields, the replay mark and
// its length; a field added afterwards to one of them leaves the others
// as they were (they share one backing array).
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
	for name := range want {
		h := rec.Header().Clone()
		rec.Header().Add(name, "extra")
		for other, v := range h {
			if other != name && !cmp.Equal(rec.Header()[other], v) {
				t.Errorf("adding to %s changed %s: %q", name, other, rec.Header()[other])
			}
		}
		rec.Header()[name] = h[name]
	}
}
