package testenv

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// FuzzBody fuzzes the decoding and validation of request body type T: it
// must never panic, must reject with a 4xx problem, and must accept only
// values that check (the caller's invariants on a decoded T) approves.
func FuzzBody[T any](f *testing.F, seeds []string, check func(t *testing.T, v T)) {
	f.Helper()
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequestWithContext(t.Context(), "POST", "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		v, err := web.Decode[T](req)
		if err != nil {
			p, ok := problem.As(err)
			if !ok {
				t.Fatalf("error %v is not a problem", err)
			}
			if p.Type.Status < 400 || p.Type.Status > 499 {
				t.Fatalf("bad input answered %d", p.Type.Status)
			}
			return
		}
		check(t, v)
	})
}
