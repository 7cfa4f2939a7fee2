package redisconn_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/takeout/takeout/internal/redisconn"
	"github.com/takeout/takeout/internal/testenv"
)

func TestState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name      string
		url       func(t *testing.T) string
		want      redisconn.State
		available bool
		degraded  float64
	}{
		{"disabled", func(*testing.T) string { return "" }, redisconn.StateDisabled, false, 1},
		{"unreachable", func(*testing.T) string { return "redis://127.0.0.1:1/0" }, redisconn.StateDown, false, 1},
		{"up", func(t *testing.T) string { return testenv.NewRedis(t).URL }, redisconn.StateUp, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			c, err := redisconn.New(redisconn.Options{URL: tt.url(t), Prefix: "p:", Logger: slog.New(slog.DiscardHandler), Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Check(ctx)
			if c.State() != tt.want || c.Available() != tt.available {
				t.Errorf("state %s available %v, want %s %v", c.State(), c.Available(), tt.want, tt.available)
			}
			want := "# HELP takeout_redis_degraded 1 while takeout runs without Redis (disabled or unreachable), else 0.\n# TYPE takeout_redis_degraded gauge\ntakeout_redis_degraded " + map[float64]string{0: "0", 1: "1"}[tt.degraded] + "\n"
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "takeout_redis_degraded"); err != nil {
				t.Error(err)
			}
			if c.Key("x") != "p:x" {
				t.Errorf("Key = %q", c.Key("x"))
			}
		})
	}
}
