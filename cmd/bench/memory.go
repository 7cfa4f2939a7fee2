package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/takeout/takeout/internal/config"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/redisconn"
)

// l1Report is what `bench l1` prints.
type l1Report struct {
	Responses int     `json:"responses"`
	BodyBytes int     `json:"body_bytes"`
	BudgetMB  float64 `json:"budget_mb"`
	HeldCount int     `json:"held"`
	HeldMB    float64 `json:"held_mb"`
	HeapMB    float64 `json:"heap_inuse_mb"`
	RSSMB     float64 `json:"rss_mb"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// GCCPUMs is the collector's CPU time per collection with L1 full:
	// what every collection of an api whose L1 is full costs at once.
	GCCPUMs    float64 `json:"gc_cpu_ms_per_cycle"`
	ElapsedS   float64 `json:"elapsed_s"`
	Subprocess string  `json:"how"`
}

// l1Fill is `bench l1`: in a fresh process, the api's idempotency store,
// with the L1 budget the api runs with, takes -n completed submit
// responses of a real answer's size, as many submits would leave them. It
// prints what it then holds and the process's memory (after a GC, and at
// its peak) as JSON.
func l1Fill(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("l1", flag.ContinueOnError)
	n := fs.Int("n", 1_000_000, "responses to finalize")
	budget := fs.Uint64("bytes", 128<<20, "L1 budget (TAKEOUT_IDEMPOTENCY_L1_BYTES)")
	ttl := fs.Duration("ttl", 10*time.Minute, "L1 time to live (TAKEOUT_IDEMPOTENCY_L1_TTL)")
	bodyBytes := fs.Int("body-bytes", 600, "size of one response body")
	gcPercent := fs.Int("gc-percent", 100, "the collector's GOGC, as the api sets it (TAKEOUT_GC_PERCENT)")
	memoryLimit := fs.Int64("memory-limit", -1, "the soft memory limit in bytes, as the api sets it (TAKEOUT_MEMORY_LIMIT); below 0 none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	debug.SetGCPercent(*gcPercent)
	if *memoryLimit > 0 {
		debug.SetMemoryLimit(*memoryLimit)
	}
	logger := slog.New(slog.DiscardHandler)
	// No Redis and no database: each response goes to L1 as Do puts it
	// there after a commit, which is what is measured.
	rds, err := redisconn.New(redisconn.Options{Logger: logger})
	if err != nil {
		return err
	}
	store, err := idempotency.NewStore(idempotency.Options{Redis: rds, Logger: logger, Retention: 72 * time.Hour,
		InflightTTL: time.Minute, CoalesceWait: time.Second, L1Bytes: *budget, L1TTL: *ttl})
	if err != nil {
		return err
	}
	defer store.Close()
	start := time.Now()
	for i := range *n {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		key := fmt.Sprintf("%08x-bench-4e1f-9b2c-%012d", i, i)
		fp := []byte(fmt.Sprintf("%032d", i))
		// Each response is its own allocation, as each submit's is.
		body := make([]byte, *bodyBytes)
		copy(body, `{"id":"`+strconv.Itoa(i)+`"}`)
		store.Remember(idempotency.UserScope(int64(1+i%64)), key, idempotency.Record{Fingerprint: fp, OrderID: int64(i), Response: idempotency.Response{
			Status: 201, Body: body, Headers: map[string]string{"Content-Type": "application/json", "Location": "/v1/orders/" + strconv.Itoa(i)},
		}})
	}
	elapsed := time.Since(start)
	gcCPU := collectorCPU()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	held, heldBytes := store.L1Size()
	rep := l1Report{Responses: *n, BodyBytes: *bodyBytes, BudgetMB: float64(*budget) / (1 << 20), HeldCount: held, HeldMB: float64(heldBytes) / (1 << 20),
		HeapMB: float64(ms.HeapInuse) / (1 << 20), RSSMB: procStatusMB(os.Getpid(), "VmRSS:"), PeakRSSMB: procStatusMB(os.Getpid(), "VmHWM:"),
		GCCPUMs: gcCPU * 1000, ElapsedS: elapsed.Seconds(), Subprocess: "bench l1: a fresh process with the api's idempotency store and L1 budget"}
	return json.NewEncoder(stdout).Encode(rep)
}

// collectorCPU is the collector's CPU time, in seconds, per forced
// collection of what the heap holds now, over a few collections.
func collectorCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	runtime.GC()
	metrics.Read(s)
	before := s[0].Value.Float64()
	const cycles = 5
	for range cycles {
		runtime.GC()
	}
	metrics.Read(s)
	return (s[0].Value.Float64() - before) / cycles
}

var (
	heapInuseRE = regexp.MustCompile(`(?m)^# HeapInuse = (\d+)$`)
	stackRE     = regexp.MustCompile(`(?m)^# Stack = (\d+) / \d+$`)
)

// heapAndStacksMB is the api's heap in use after a forced GC and its
// goroutines' stacks in use, from one heap profile of its debug listener.
func heapAndStacksMB(ctx context.Context, client *http.Client, debugAddr string) (heap, stacks float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+debugAddr+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	h, s := heapInuseRE.FindSubmatch(b), stackRE.FindSubmatch(b)
	if h == nil || s == nil {
		return 0, 0, fmt.Errorf("HeapInuse and Stack in the heap profile: not found (status %d)", resp.StatusCode)
	}
	hv, _ := strconv.ParseFloat(string(h[1]), 64)
	sv, _ := strconv.ParseFloat(string(s[1]), 64)
	return hv / (1 << 20), sv / (1 << 20), nil
}

// heapInuseMB is the api's heap in use after a forced GC, from its debug
// listener.
func heapInuseMB(ctx context.Context, client *http.Client, debugAddr string) (float64, error) {
	v, err := scrape(ctx, client, "http://"+debugAddr+"/debug/pprof/heap?gc=1&debug=1", heapInuseRE)
	if err != nil {
		return 0, fmt.Errorf("HeapInuse in the heap profile: %w", err)
	}
	n, err := strconv.ParseFloat(v, 64)
	return n / (1 << 20), err
}

var gcCyclesRE = regexp.MustCompile(`(?m)^go_gc_duration_seconds_count (\d+)$`)

// gcCycles is how many garbage collections the api has completed, from
// its metrics.
func (e *env) gcCycles(ctx context.Context) (int, error) {
	v, err := scrape(ctx, e.client, "http://"+e.debug+"/metrics", gcCyclesRE)
	if err != nil {
		return 0, fmt.Errorf("go_gc_duration_seconds_count in the api's metrics: %w", err)
	}
	return strconv.Atoi(v)
}

// scrape GETs url and returns what re's first group matched in the
// answer.
func scrape(ctx context.Context, client *http.Client, url string, re *regexp.Regexp) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	m := re.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("not found (status %d)", resp.StatusCode)
	}
	return string(m[1]), nil
}

// procStatusMB reads a kB field of /proc/<pid>/status (VmRSS:, VmHWM:).
func procStatusMB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

// million is the length of the memory runs.
const million = 1_000_000

// replayMillion replays one submit a million times from 64 clients and
// reads the api's heap in use (after a GC) before and after: a replay
// must not leave anything behind.
func (e *env) replayMillion(ctx context.Context) (*heapRun, result, error) {
	toks, err := e.confirmMany(ctx, 1, false)
	if err != nil {
		return nil, result{}, err
	}
	p := toks[0]
	if err := e.submit(ctx, p); err != nil { // placed once; the rest replay
		return nil, result{}, err
	}
	warm := load(ctx, "replay_million_warmup", 64, 0, 2*time.Second, e.replay(p))
	if warm.Errors > 0 {
		return nil, result{}, fmt.Errorf("replay warmup: %s", warm.FirstError)
	}
	before, err := heapInuseMB(ctx, e.client, e.debug)
	if err != nil {
		return nil, result{}, err
	}
	rssBefore := rssMB(e.apiPID)
	r := load(ctx, "replay_million", 64, 0, 15*time.Minute, func(ctx context.Context, w int, n int64) error {
		if n >= million {
			return errExhausted
		}
		return e.submit(ctx, p)
	})
	r.Note = "a million replays of one submit"
	after, err := heapInuseMB(ctx, e.client, e.debug)
	if err != nil {
		return nil, result{}, err
	}
	return &heapRun{Requests: r.Requests, Throughput: r.Throughput, HeapBeforeMB: before, HeapAfterMB: after, GrowthMB: after - before,
		RSSBeforeMB: rssBefore, RSSAfterMB: rssMB(e.apiPID)}, r, nil
}

// l1Million runs `bench l1` with the api's L1 settings and the size of a
// real submit answer.
func (e *env) l1Million(ctx context.Context, self string) (*l1Report, error) {
	toks, err := e.confirmMany(ctx, 1, false)
	if err != nil {
		return nil, err
	}
	st, body, err := e.do(ctx, "POST", "/v1/orders", toks[0].user, map[string]string{"confirm_token": toks[0].token}, map[string]string{"Idempotency-Key": toks[0].key})
	if err != nil {
		return nil, fmt.Errorf("a submit to size L1's entries: %w", err)
	}
	if st != 201 {
		return nil, fmt.Errorf("a submit to size L1's entries: %d %.200s", st, body)
	}
	args := []string{"l1", "-n", strconv.Itoa(million), "-bytes", strconv.FormatUint(e.apiCfg.IdemL1Bytes, 10),
		"-ttl", e.apiCfg.IdemL1TTL.String(), "-body-bytes", strconv.Itoa(len(body)),
		"-gc-percent", strconv.Itoa(e.apiCfg.GCPercent), "-memory-limit", strconv.FormatInt(l1Limit(e.apiCfg), 10)}
	cmd := exec.CommandContext(ctx, self, args...) //nolint:gosec // G204: this very program
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("bench l1: %w", err)
	}
	var rep l1Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("bench l1 output %q: %w", out, err)
	}
	return &rep, nil
}

// l1Limit is the soft memory limit of the api as l1 runs it: its own,
// less the room it leaves for open streams (the l1 process holds none).
func l1Limit(c config.Config) int64 {
	limit := c.MemoryLimitBytes()
	if limit > 0 && c.MemoryLimit == 0 {
		limit -= c.StreamMemoryBytes()
	}
	return limit
}
