package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/takeout/takeout/internal/config"
)

// The collector is set as configured, except what GOGC or GOMEMLIMIT in
// the environment already set. Not parallel: it changes the process's
// collector, and puts it back.
func TestApplyGC(t *testing.T) {
	percent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
	cfg := config.Config{GCPercent: 400, IdemL1Bytes: 128 << 20}
	tests := []struct {
		name      string
		env       map[string]string
		limit     int64
		wantGOGC  string
		wantLimit int64
	}{
		{"defaults", nil, 0, "400", 256 << 20},
		{"explicit limit", nil, 300 << 20, "400", 300 << 20},
		{"no limit", nil, -1, "400", math.MaxInt64},
		{"GOGC set", map[string]string{"GOGC": "150"}, 0, "150", 256 << 20},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, 0, "400", math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			c := cfg
			c.MemoryLimit = tt.limit
			gogc, lim := applyGC(c, func(k string) string { return tt.env[k] })
			if gogc != tt.wantGOGC || lim != tt.wantLimit {
				t.Errorf("GOGC %s, limit %d; want %s, %d", gogc, lim, tt.wantGOGC, tt.wantLimit)
			}
			want := 400
			if tt.env["GOGC"] != "" {
				want = 100 // left as the runtime had it
			}
			if got := debug.SetGCPercent(100); got != want {
				t.Errorf("the collector runs at GOGC %d, want %d", got, want)
			}
		})
	}
}
