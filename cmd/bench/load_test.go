package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Not parallel: it sets this process's collector and puts it back.
func TestCollectorPausedRestoresTheCollector(t *testing.T) {
	const percent, limit = 150, 3 << 30
	oldPercent := debug.SetGCPercent(percent)
	oldLimit := debug.SetMemoryLimit(limit)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})

	restore := collectorPaused()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent while paused = %d, want -1 (off)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != collectorPausedLimit {
		t.Errorf("memory limit while paused = %d, want %d", got, collectorPausedLimit)
	}
	restore()
	if got := debug.SetGCPercent(percent); got != percent {
		t.Errorf("GC percent after = %d, want %d", got, percent)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("memory limit after = %d, want %d", got, limit)
	}
}

// gcCycles reads the count the api's Go collector publishes; this serves
// the same collector the api registers.
func TestGCCyclesReadsTheAPIsMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	e := &env{api: srv.URL, client: srv.Client()}

	before, err := e.gcCycles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	after, err := e.gcCycles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("collections after runtime.GC = %d, want more than %d", after, before)
	}

	broken := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(broken.Close)
	if n, err := (&env{api: broken.URL, client: broken.Client()}).gcCycles(context.Background()); err == nil {
		t.Errorf("gcCycles of a server without metrics = %d, want an error", n)
	}
}
