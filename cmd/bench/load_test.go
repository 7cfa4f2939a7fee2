package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	e := &env{debug: strings.TrimPrefix(srv.URL, "http://"), client: srv.Client()} // the operations listener

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

// Not parallel: paced pauses this process's collector.
func TestPacedLogsEveryMeasuredRequest(t *testing.T) {
	var calls atomic.Int64
	fail := errors.New("refused")
	op := func(_ context.Context, _ int, n int64) error {
		calls.Add(1)
		if n%10 == 9 {
			return fail
		}
		return nil
	}
	var log bytes.Buffer
	const rate, warmup, d = 200, 100 * time.Millisecond, 400 * time.Millisecond
	var seq atomic.Int64
	w := paced(context.Background(), rate, warmup, d, op, &seq, &log)
	r := result{Errors: w.errors}
	r.summarize(w.lat, w.elapsed)

	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	if want := int(d.Seconds() * rate); len(lines) != want {
		t.Fatalf("log has %d lines, want one per measured request: %d", len(lines), want)
	}
	var failed int
	var prevDue int64
	for i, l := range lines {
		var due, latUs int64
		var bad bool
		if _, err := fmt.Sscanf(l, "%d %d %t", &due, &latUs, &bad); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		if i > 0 && due-prevDue != int64(time.Second/rate/time.Microsecond) {
			t.Errorf("line %d is due %d µs after the one before, want %d", i, due-prevDue, time.Second/rate/time.Microsecond)
		}
		prevDue = due
		if bad {
			failed++
		}
	}
	if failed != r.Errors || r.Requests+r.Errors != len(lines) {
		t.Errorf("log: %d failed of %d; result: %d errors, %d requests", failed, len(lines), r.Errors, r.Requests)
	}
	if n := int64((warmup + d).Seconds() * rate); r.Errors == 0 || calls.Load() != n || seq.Load() != n {
		t.Errorf("errors %d, calls %d, numbered %d: want some errors and every request made and numbered", r.Errors, calls.Load(), seq.Load())
	}
}

// Scenarios that take turns report each round's throughput, in round
// order, beside the whole run's; one that runs alone in one round does
// not.
func TestInterleavedKeepsEachRoundsThroughput(t *testing.T) {
	t.Parallel()
	// Each scenario answers a fixed number of requests per second in each
	// round: a's windows 100, 300, 200 requests in a second.
	fixed := func(name string, perRound ...int) scenario {
		round := 0
		return scenario{name: name, measure: func(context.Context, time.Duration, time.Duration) (window, error) {
			n := perRound[round]
			round++
			return window{lat: make([]time.Duration, n), elapsed: time.Second}, nil
		}}
	}
	rs, err := interleaved(context.Background(), 8, 0, 3*time.Second, 3, []scenario{fixed("a", 100, 300, 200), fixed("b", 50, 50, 80)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]float64{}
	for _, x := range rs {
		got[x.Scenario] = x.RoundThroughputs
		if x.Scenario == "a" && x.Throughput != 200 {
			t.Errorf("a's throughput %v, want 200 (600 requests in 3 s)", x.Throughput)
		}
	}
	want := map[string][]float64{"a": {100, 300, 200}, "b": {50, 50, 80}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round throughputs (-want +got):\n%s", diff)
	}
	alone, err := interleaved(context.Background(), 8, 0, time.Second, 1, []scenario{fixed("c", 10)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if alone[0].RoundThroughputs != nil {
		t.Errorf("one round: round throughputs %v, want none", alone[0].RoundThroughputs)
	}
}
