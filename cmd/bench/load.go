package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is one scenario at one concurrency.
type result struct {
	Scenario    string  `json:"scenario"`
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	DurationS   float64 `json:"duration_s"`
	Throughput  float64 `json:"throughput_per_s"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	P999Ms      float64 `json:"p999_ms"`
	MaxMs       float64 `json:"max_ms"`
	// FirstError is the first failure seen, to tell what went wrong.
	FirstError string `json:"first_error,omitempty"`
	Note       string `json:"note,omitempty"`
	// CPUUsPerRequest is the CPU time each process group used in the
	// measured part, per request, in microseconds (see processCPU).
	CPUUsPerRequest map[string]float64 `json:"cpu_us_per_request,omitempty"`
	// RoundTails is p99/p50 of each round alone, in round order (for the
	// scenarios that ask: a tail is compared round by round, pair by pair).
	RoundTails []float64 `json:"round_p99_over_p50,omitempty"`
	// RoundThroughputs is the throughput of each round alone, in round
	// order, when the scenario took turns with others: how much one
	// window moves against the next on this machine.
	RoundThroughputs []float64 `json:"round_throughputs_per_s,omitempty"`
}

// op is one request of a scenario; n counts requests across the workers
// (for scenarios that consume prepared inputs). It reports an error when
// the answer was not what the scenario expects; errExhausted ends the run.
type op func(ctx context.Context, worker int, n int64) error

// errExhausted ends a run whose prepared inputs are used up.
type exhaustedError struct{}

func (exhaustedError) Error() string { return "prepared inputs used up" }

var errExhausted error = exhaustedError{}

// load runs op from conc workers in a closed loop for d (after a warmup
// of its own) and measures every request.
func load(ctx context.Context, name string, conc int, warmup, d time.Duration, fn op) result {
	w, _ := closedScenario(name, conc, nil, nil, fn).measure(ctx, warmup, d) // a closed loop fails no run
	r := result{Scenario: name, Concurrency: conc, Errors: w.errors, FirstError: w.firstErr}
	r.summarize(w.lat, w.elapsed)
	return r
}

// scenario is one thing measured by interleaved: before (when not nil)
// runs first, unmeasured; measure warms up for warmup and then measures
// for d.
type scenario struct {
	name    string
	before  func() error
	measure func(ctx context.Context, warmup, d time.Duration) (window, error)
	// tails asks for each round's p99/p50 in the result (RoundTails).
	tails bool
}

// closedScenario is op run from conc workers in a closed loop; its
// requests are numbered across all its windows. With a meter, each
// window holds the CPU time used in its measured part.
func closedScenario(name string, conc int, before func() error, meter cpuMeter, fn op) scenario {
	var seq atomic.Int64
	return scenario{name: name, before: before, measure: func(ctx context.Context, warmup, d time.Duration) (window, error) {
		if warmup > 0 {
			closedLoop(ctx, conc, warmup, fn, &seq, false)
		}
		var cpu cpuTimes
		if meter != nil {
			cpu = meter()
		}
		w := closedLoop(ctx, conc, d, fn, &seq, true)
		if meter != nil {
			w.cpu = meter().sub(cpu)
		}
		return w, nil
	}}
}

// interleaved runs the scenarios in turn, rounds times over, each for
// d/rounds after a warmup of its own (warmup/rounds), and sums each one's
// measured windows into its result. Figures that are compared with each
// other are measured so: on a machine whose speed drifts from minute to
// minute, each then sees the same moments, not one the fast minute and
// another the slow one. during, when not nil, is called as each
// scenario's turn starts, and what it returns when the turn ends.
func interleaved(ctx context.Context, conc int, warmup, d time.Duration, rounds int, ss []scenario, during func(s scenario, round int, window time.Duration) func()) ([]result, error) {
	sums := make([]window, len(ss))
	tails := make([][]float64, len(ss))
	rates := make([][]float64, len(ss))
	for round := range rounds {
		for i, s := range ss {
			if s.before != nil {
				if err := s.before(); err != nil {
					return nil, fmt.Errorf("%s: %w", s.name, err)
				}
			}
			end := func() {}
			if during != nil {
				end = during(s, round, d/time.Duration(rounds))
			}
			w, err := s.measure(ctx, warmup/time.Duration(rounds), d/time.Duration(rounds))
			end()
			if err != nil {
				return nil, err
			}
			if s.tails {
				var one result
				one.summarize(slices.Clone(w.lat), w.elapsed)
				if one.P50Ms > 0 {
					tails[i] = append(tails[i], one.P99Ms/one.P50Ms)
				}
			}
			if w.elapsed > 0 {
				rates[i] = append(rates[i], math.Round(float64(len(w.lat))/w.elapsed.Seconds()))
			}
			sums[i].lat = append(sums[i].lat, w.lat...)
			sums[i].errors += w.errors
			sums[i].elapsed += w.elapsed
			if sums[i].firstErr == "" {
				sums[i].firstErr = w.firstErr
			}
			if sums[i].note == "" {
				sums[i].note = w.note
			}
			if w.cpu != nil {
				sums[i].cpu = sums[i].cpu.add(w.cpu)
			}
		}
	}
	out := make([]result, len(ss))
	for i, s := range ss {
		note := sums[i].note
		if len(ss) > 1 {
			note = strings.TrimPrefix(note+"; ", "; ") + fmt.Sprintf("interleaved with %s over %d rounds", others(ss, i), rounds)
		}
		out[i] = result{Scenario: s.name, Concurrency: conc, Errors: sums[i].errors, FirstError: sums[i].firstErr, Note: note}
		out[i].summarize(sums[i].lat, sums[i].elapsed)
		out[i].CPUUsPerRequest = sums[i].cpu.perRequest(len(sums[i].lat) + sums[i].errors)
		out[i].RoundTails = tails[i]
		if rounds > 1 {
			out[i].RoundThroughputs = rates[i]
		}
	}
	return out, nil
}

func others(ss []scenario, skip int) string {
	var names []string
	for i, s := range ss {
		if i != skip {
			names = append(names, s.name)
		}
	}
	return strings.Join(names, " and ")
}

// window is what one run of a scenario measured: the latencies of the
// requests that succeeded, over elapsed.
type window struct {
	lat      []time.Duration
	errors   int
	firstErr string
	elapsed  time.Duration
	note     string
	cpu      cpuTimes // nil when not metered
}

// closedLoop runs op from conc workers for d; with record, it keeps the
// latency of every request that succeeded.
func closedLoop(ctx context.Context, conc int, d time.Duration, fn op, seq *atomic.Int64, record bool) window {
	lat := make([][]time.Duration, conc)
	errs := make([]int, conc)
	var firstErr atomic.Value
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			local := make([]time.Duration, 0, 4096)
			for ctx.Err() == nil {
				t := time.Now()
				err := fn(ctx, w, seq.Add(1)-1)
				el := time.Since(t)
				if err == errExhausted { //nolint:errorlint // sentinel of this package
					cancel()
					break
				}
				if ctx.Err() != nil {
					break // cut off by the end of the run: not measured
				}
				if err != nil {
					errs[w]++
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				if record {
					local = append(local, el)
				}
			}
			lat[w] = local
		})
	}
	wg.Wait()
	// The run is the d it was given (less, when its inputs ran out), not
	// the wait for the requests the end cut off, which are not counted.
	out := window{elapsed: min(time.Since(start), d)}
	out.firstErr, _ = firstErr.Load().(string)
	for w := range conc {
		out.lat = append(out.lat, lat[w]...)
		out.errors += errs[w]
	}
	return out
}

// summarize fills in the figures of the successful requests' latencies,
// measured over elapsed.
func (r *result) summarize(lat []time.Duration, elapsed time.Duration) {
	slices.Sort(lat)
	r.Requests, r.DurationS = len(lat), elapsed.Seconds()
	r.Throughput = float64(len(lat)) / elapsed.Seconds()
	r.P50Ms, r.P99Ms, r.P999Ms = pct(lat, 0.50), pct(lat, 0.99), pct(lat, 0.999)
	if len(lat) > 0 {
		r.MaxMs = ms(lat[len(lat)-1])
	}
}

func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return ms(sorted[max(0, min(i, len(sorted)-1))])
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// pacedScenario is op run in an open loop at rate per second (see
// paced), for interleaved; log, when not nil, gets every measured
// request's line.
func pacedScenario(name string, rate float64, before func() error, fn op, log io.Writer) scenario {
	var seq atomic.Int64
	return scenario{name: name, before: before, measure: func(ctx context.Context, warmup, d time.Duration) (window, error) {
		w := paced(ctx, rate, warmup, d, fn, &seq, log)
		return w, ctx.Err()
	}}
}

// paced runs op in an open loop: requests start at rate per second, on
// schedule whether or not earlier ones have finished (up to maxInFlight
// at once), for warmup and then d. Each latency runs from the moment the
// request was due, so a backlog shows as latency rather than hiding it.
// Requests are numbered from seq, across calls. When log is not nil, it
// gets one line per measured request, as pgbench's -l does: when it was
// due (Unix microseconds), its latency in microseconds, and whether it
// failed; a tail is then read against time.
func paced(ctx context.Context, rate float64, warmup, d time.Duration, fn op, seq *atomic.Int64, log io.Writer) window {
	const maxInFlight = 4096
	interval := time.Duration(float64(time.Second) / rate)
	total := int((warmup + d).Seconds() * rate)
	measuredFrom := int(warmup.Seconds() * rate)
	lat := make([]time.Duration, total)
	failed := make([]bool, total)
	var firstErr atomic.Value
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	defer collectorPaused()()
	first := seq.Add(int64(total)) - int64(total)
	start := time.Now()
	for i := range total {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return window{firstErr: ctx.Err().Error()}
			case <-time.After(wait):
			}
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := fn(ctx, 0, first+int64(i))
			lat[i] = time.Since(due)
			if err != nil {
				failed[i] = true
				firstErr.CompareAndSwap(nil, err.Error())
			}
		})
	}
	wg.Wait()
	w := window{elapsed: time.Since(start.Add(time.Duration(measuredFrom) * interval)), note: fmt.Sprintf("open loop at %.0f/s", rate)}
	for i := measuredFrom; i < total; i++ {
		if failed[i] {
			w.errors++
			continue
		}
		w.lat = append(w.lat, lat[i])
	}
	w.firstErr, _ = firstErr.Load().(string)
	if log != nil {
		bw := bufio.NewWriter(log)
		for i := measuredFrom; i < total; i++ {
			due := start.Add(time.Duration(i) * interval)
			fmt.Fprintf(bw, "%d %d %t\n", due.UnixMicro(), lat[i].Microseconds(), failed[i])
		}
		if err := bw.Flush(); err != nil {
			w.note += "; its request log was not written: " + err.Error()
		}
	}
	return w
}

// collectorPaused stops this process's garbage collector until the
// returned func is called, which collects once and restores it. An open
// loop reads a pause of its own as the server's latency: the requests
// due during a collection here start late, and each counts from when it
// was due. pgbench, the figure it is set against, has no collector. A
// soft memory limit still collects should a run outgrow it.
func collectorPaused() (restore func()) {
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(collectorPausedLimit)
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
		runtime.GC()
	}
}

// collectorPausedLimit bounds the heap while the collector is paused: an
// open loop of a few seconds allocates tens of megabytes.
const collectorPausedLimit = 1 << 30
