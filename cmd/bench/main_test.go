package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// The api's pool comes from -api-db-conns; one connection (the job
// queue's listener would hold it) is refused before anything starts.
func TestAPIDBConnsFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arg, wantErr string
	}{
		{"1", "-api-db-conns: want at least 2, got 1"},
		{"x", `invalid value "x" for flag -api-db-conns`},
	} {
		err := run(context.Background(), []string{"bench", "-api-db-conns", tc.arg, "-database-url", "postgres://unused", "-redis-url", "redis://unused"}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("-api-db-conns %s: %v, want %q", tc.arg, err, tc.wantErr)
		}
	}
	if n := defaultAPIDBConns(); n < 4 {
		t.Errorf("default pool %d, want at least 4", n)
	}
}
