package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// target is one goal of the performance issue, checked on this run.
type target struct {
	Name  string  `json:"name"`
	Ratio float64 `json:"ratio"` // the measured value (a ratio, or MB)
	Goal  float64 `json:"goal"`
	// AtMost marks a ceiling; otherwise the goal is a floor.
	AtMost bool `json:"at_most,omitempty"`
	Met    bool `json:"met"`
}

// results is one bench run.
type results struct {
	Started time.Time `json:"started"`
	// ElapsedS is the whole run's wall time in seconds, its setup and
	// seeding included (make bench's builds before it are not).
	ElapsedS  float64           `json:"elapsed_s,omitempty"`
	Command   string            `json:"command"`
	Machine   map[string]string `json:"machine"`
	DurationS float64           `json:"duration_s"`
	WarmupS   float64           `json:"warmup_s"`
	// APIDatabaseConns is the api's database pool in this run.
	APIDatabaseConns int `json:"api_database_conns"`
	// Tracing is the api's OTEL_TRACES_EXPORTER in this run.
	Tracing string `json:"tracing"`
	// CommitLatency is the disk's commit latency before and after the
	// scenarios: which hour the ratios in time came from.
	CommitLatency commitLatency      `json:"commit_latency"`
	Results       []result           `json:"results"`
	Ratios        map[string]float64 `json:"ratios"`
	Targets       []target           `json:"targets"`
	APIRSSMB      float64            `json:"api_rss_mb"`
	// L1Million is `bench l1`: the api's idempotency store with its L1
	// budget after a million completed responses.
	L1Million *l1Report `json:"l1_million,omitempty"`
	// ReplayMillion is the api's heap before and after a million replays.
	ReplayMillion *heapRun `json:"replay_million,omitempty"`
	// Boards is 10,000 idle order streams and events through them.
	Boards *streamReport `json:"boards,omitempty"`
	// Journey is the whole life of orders, every party driving its part.
	Journey *journeyReport `json:"journey,omitempty"`
	Notes   []string       `json:"notes,omitempty"`
	// context names the ratios that finish computed as context beside
	// the targets, in the order the Markdown lists them.
	context []string
}

// round3 keeps three decimals of a ratio.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func (r *results) find(scenario string, conc int) (result, bool) {
	for _, x := range r.Results {
		if x.Scenario == scenario && x.Concurrency == conc {
			return x, true
		}
	}
	return result{}, false
}

// bestThroughput is a scenario's throughput at the concurrency that
// served it best.
func (r *results) bestThroughput(scenario string) float64 {
	var top float64
	for _, y := range r.Results {
		if y.Scenario == scenario && y.Throughput > top {
			top = y.Throughput
		}
	}
	return top
}

// best is a scenario's result at the concurrency that served it best.
func (r *results) best(scenario string) (result, bool) {
	var top result
	for _, y := range r.Results {
		if y.Scenario == scenario && y.Throughput > top.Throughput {
			top = y
		}
	}
	return top, top.Throughput > 0
}

// serviceCPU is the CPU of every process serving a request (the api or
// hello, PostgreSQL, Redis; not the load generator), µs per request.
func serviceCPU(x result) float64 {
	c := x.CPUUsPerRequest
	return c["api"] + c["postgres"] + c["redis"]
}

// finish computes the ratios and checks the targets.
func (r *results) finish() {
	r.Ratios = map[string]float64{}
	ratio := func(name, a, b string, goal float64) {
		x, ok1 := r.find(a, 64)
		y, ok2 := r.find(b, 64)
		if !ok1 || !ok2 || y.Throughput == 0 {
			return
		}
		v := round3(x.Throughput / y.Throughput)
		r.Ratios[name] = v
		r.Targets = append(r.Targets, target{Name: name + " >= " + fmt.Sprint(goal), Ratio: v, Goal: goal, Met: v >= goal})
	}
	// Against the database floor (floor/*.sql), each side at the
	// concurrency that served it best in this run.
	bestOf := r.bestThroughput
	bestRatio := func(name, a, b string, goal float64) {
		x, y := bestOf(a), bestOf(b)
		if x == 0 || y == 0 {
			return
		}
		v := round3(x / y)
		r.Ratios[name] = v
		r.Targets = append(r.Targets, target{Name: name + " >= " + fmt.Sprint(goal), Ratio: v, Goal: goal, Met: v >= goal})
	}
	bestRatio("submit_vs_floor", "submit", "floor_place", 0.6)
	bestRatio("callback_vs_floor", "callback", "floor_pay", 0.6)
	// Against the grouped floor (floorGroup orders per commit): the
	// database's best for the same work.
	bestRatio("submit_vs_grouped_floor", "submit", "floor_place_grouped", 0.7)
	bestRatio("callback_vs_grouped_floor", "callback", "floor_pay_grouped", 0.7)
	ratio("hot_dish_vs_submit", "hot_dish", "submit", 0.8)
	ratio("replay_vs_hello", "replay", "hello", 0.9)
	ratio("callback_dup_vs_hello", "callback_dup", "hello", 0.9)
	ceiling := func(name string, v, goal float64) {
		v = round3(v)
		r.Ratios[name] = v
		r.Targets = append(r.Targets, target{Name: name + " <= " + fmt.Sprint(goal), Ratio: v, Goal: goal, AtMost: true, Met: v <= goal})
	}
	r.tailAndScale(ceiling)
	// The api's own CPU per order (user and system time of its process).
	if x, ok := r.find("submit", 64); ok && x.CPUUsPerRequest["api"] > 0 {
		ceiling("api_cpu_us_per_submit", x.CPUUsPerRequest["api"], 350)
	}
	r.cpuTargets(ceiling)
	r.context = nil
	contextRatio := func(name string, v float64) {
		r.Ratios[name] = round3(v)
		r.context = append(r.context, name)
	}
	// Context, not targets: pgbench with 64 connections contends on its
	// own locks and can do less than with 16, while the api reaches the
	// database through a pool of a few. Against pgbench at whichever
	// concurrency served it best in this run, the api's share reads
	// without that contention in its favour.
	best := func(name, a, b string) {
		x, ok := r.find(a, 64)
		var top float64
		for _, y := range r.Results {
			if y.Scenario == b && y.Throughput > top {
				top = y.Throughput
			}
		}
		if ok && top > 0 {
			contextRatio(name, x.Throughput/top)
		}
	}
	best("submit_vs_pgbench_best", "submit", "pgbench_submit")
	best("callback_vs_pgbench_best", "callback", "pgbench_callback")
	r.pairContext(contextRatio)
	if x, y := bestOf("floor_hot"), bestOf("floor_place"); x > 0 && y > 0 {
		contextRatio("floor_hot_vs_floor_place_best", x/y)
	}
	// Context for the half-rate target: each side's spread over all its
	// rounds, and that of pgbench running takeout's own SQL (the first
	// round's target, p99 <= 3 x p50, retired: the database alone misses
	// it on this machine).
	for _, name := range []string{"submit_half_rate", "floor_place_half_rate", "pgbench_submit_half_rate"} {
		if x, ok := r.find(name, 64); ok && x.P50Ms > 0 {
			contextRatio(strings.TrimSuffix(name, "_half_rate")+"_p99_over_p50_at_half_rate", x.P99Ms/x.P50Ms)
		}
	}
	if r.L1Million != nil {
		ceiling("l1_million_peak_rss_mb", r.L1Million.PeakRSSMB, 300)
	}
	r.boardTargets(ceiling)
	r.journeyTargets(ceiling)
	if r.ReplayMillion != nil {
		ceiling("replay_million_heap_growth_mb", r.ReplayMillion.GrowthMB, replayHeapSlackMB)
	}
}

// cpuTargets sets the targets in CPU per request of every serving
// process; ceiling records an at-most target.
func (r *results) cpuTargets(ceiling func(name string, v, goal float64)) {
	// CPU, not time: what every process serving an order spends, against
	// what PostgreSQL spends on one in the grouped floor, each at its
	// best concurrency. The commit's wait is in neither.
	if x, ok := r.best("submit"); ok {
		if y, ok := r.best("floor_place_grouped"); ok && y.CPUUsPerRequest["postgres"] > 0 && serviceCPU(x) > 0 {
			ceiling("cpu_per_submit_vs_grouped_floor", serviceCPU(x)/y.CPUUsPerRequest["postgres"], 1.5)
		}
	}
	// A confirm against the submit it guards, every serving process, at
	// 64 clients (the two take turns).
	if x, ok := r.find("confirm", 64); ok {
		if y, ok := r.find("submit", 64); ok && serviceCPU(x) > 0 && serviceCPU(y) > 0 {
			ceiling("confirm_cpu_vs_submit", serviceCPU(x)/serviceCPU(y), 0.5)
		}
	}
}

// boardTargets sets the targets of the ten thousand boards.
func (r *results) boardTargets(ceiling func(name string, v, goal float64)) {
	b := r.Boards
	if b == nil {
		return
	}
	ceiling("stream_kb_each", b.KBEach, 20)
	ceiling("stream_p99_ms", b.P99Ms, 1000)
	if b.Missing > 0 {
		// An event that never reached its board is later than any
		// budget, whatever the others' p99.
		r.Targets[len(r.Targets)-1].Met = false
	}
}

// pairContext records the context ratios of one scenario against another
// at the same client count: the floor at 16 and 64 clients, and what
// HTTP alone costs a replay.
func (r *results) pairContext(contextRatio func(name string, v float64)) {
	// The floor at each client count, and takeout's own transaction.
	for _, c := range []int{16, 64} {
		for _, p := range [][3]string{{"submit_vs_floor", "submit", "floor_place"}, {"callback_vs_floor", "callback", "floor_pay"}, {"submit_vs_pgbench", "submit", "pgbench_submit"}} {
			x, ok1 := r.find(p[1], c)
			y, ok2 := r.find(p[2], c)
			if ok1 && ok2 && y.Throughput > 0 {
				contextRatio(fmt.Sprintf("%s_%d", p[0], c), x.Throughput/y.Throughput)
			}
		}
	}
	// What HTTP alone costs a replay and a duplicate callback: hello
	// answering their requests with their answers' bytes, against hello and
	// against takeout's own.
	for _, p := range [][3]string{{"hello_replay_vs_hello", "hello_replay", "hello"}, {"replay_vs_hello_replay", "replay", "hello_replay"},
		{"hello_callback_vs_hello", "hello_callback", "hello"}, {"callback_dup_vs_hello_callback", "callback_dup", "hello_callback"}} {
		x, ok1 := r.find(p[1], 64)
		y, ok2 := r.find(p[2], 64)
		if ok1 && ok2 && y.Throughput > 0 {
			contextRatio(p[0], x.Throughput/y.Throughput)
		}
	}
}

// tailAndScale sets the targets of the half-rate tail against the
// floor's, and of submit at 128 clients against submit at its best;
// ceiling records an at-most target.
func (r *results) tailAndScale(ceiling func(name string, v, goal float64)) {
	// The half-rate tail against the floor's at the same rate, round by
	// round (each pair saw the same minutes of the disk), the median pair.
	if x, ok := r.find("submit_half_rate", 64); ok {
		if y, ok := r.find("floor_place_half_rate", 64); ok && len(x.RoundTails) > 0 && len(x.RoundTails) == len(y.RoundTails) {
			pairs := make([]float64, len(x.RoundTails))
			for i := range pairs {
				pairs[i] = x.RoundTails[i] / y.RoundTails[i]
			}
			ceiling("half_rate_tail_vs_floor", median(pairs), 1.25)
		}
	}
	// Submit at 128 clients with three instances' pools against submit at
	// its best: no collapse with connections. Submit's best is taken in
	// the moments submit_128 ran: submit at 64 clients taking turns with
	// it, scaled by its best over its 64 in the main run (1 when 64 is
	// its best). The same over three api processes is context: what three
	// processes on this machine's cores cost.
	top := r.bestThroughput("submit")
	if x, ok := r.find("submit_128", 128); ok && top > 0 {
		best := top
		beside, ok1 := r.find("submit_beside_128", 64)
		at64, ok2 := r.find("submit", 64)
		if ok1 && ok2 && beside.Throughput > 0 && at64.Throughput > 0 {
			best = beside.Throughput * top / at64.Throughput
		}
		v := round3(x.Throughput / best)
		r.Ratios["submit_128_vs_best"] = v
		r.Targets = append(r.Targets, target{Name: "submit_128_vs_best >= 0.9", Ratio: v, Goal: 0.9, Met: v >= 0.9})
	}
	if x, ok := r.find("submit_128_instances", 128); ok && top > 0 {
		r.Ratios["submit_128_instances_vs_best"] = round3(x.Throughput / top)
	}
}

// heapRun is the api's memory around a long replay run.
type heapRun struct {
	Requests     int     `json:"requests"`
	Throughput   float64 `json:"throughput_per_s"`
	HeapBeforeMB float64 `json:"heap_inuse_before_mb"`
	HeapAfterMB  float64 `json:"heap_inuse_after_mb"`
	GrowthMB     float64 `json:"growth_mb"`
	RSSBeforeMB  float64 `json:"rss_before_mb"`
	RSSAfterMB   float64 `json:"rss_after_mb"`
}

// replayHeapSlackMB is how much the heap in use (after a GC) may differ
// between two samples without growth: span and cache bookkeeping moves
// by a few MB.
const replayHeapSlackMB = 4

func (r *results) write(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	name := "results-" + r.Started.Format("2006-01-02")
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	paths := []string{filepath.Join(dir, name+".json"), filepath.Join(dir, name+".md"), filepath.Join(dir, name+".svg")}
	for i, content := range [][]byte{append(b, '\n'), []byte(r.markdown()), []byte(r.svg())} {
		if err := os.WriteFile(paths[i], content, 0o600); err != nil { //nolint:gosec // G703: the output directory the operator chose
			return nil, err
		}
	}
	return paths, nil
}

func (r *results) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Bench %s\n\nCommand: `%s`; each scenario %.0fs after %.0fs of warmup "+
		"(the two sides of each ratio take turns, a third of each at a time (a sixth for the ones answered from memory), so that they see the same moments: "+
		"hello, hello_replay and hello_callback with replay and callback_dup; floor_place, floor_place_grouped, floor_hot and pgbench_submit with submit, hot_dish and confirm; floor_pay, floor_pay_grouped and pgbench_callback with callback; "+
		"submit_half_rate with floor_place_half_rate and pgbench_submit_half_rate at the same rate, a whole window each, three times; submit_128, one api with three instances' pools, with submit at 64 clients (submit_beside_128); submit_128_instances, when named, alone over three api processes). "+
		"Machine: %s, %s CPUs, %s, %s. The api's database pool: %d connections; tracing: %s. The run took %s.\n\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.Command, r.DurationS, r.WarmupS, r.Machine["cpu"], r.Machine["nproc"], r.Machine["memory"], r.Machine["go"], r.APIDatabaseConns,
		cmp.Or(r.Tracing, "none"), (time.Duration(r.ElapsedS) * time.Second).String())
	for _, p := range []struct {
		when string
		p    *commitProbe
	}{{"before", r.CommitLatency.Before}, {"after", r.CommitLatency.After}} {
		if p.p != nil {
			fmt.Fprintf(&b, "Commit latency %s the scenarios (one client committing one row at a time, %d commits): mean %.2f ms, p50 %.2f ms, p99 %.2f ms.\n", p.when, p.p.Commits, p.p.MeanMs, p.p.P50Ms, p.p.P99Ms)
		}
	}
	b.WriteString("\n| scenario | clients | req/s | p50 ms | p99 ms | p99.9 ms | errors |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.2f | %.2f | %.2f | %d |\n", x.Scenario, x.Concurrency, x.Throughput, x.P50Ms, x.P99Ms, x.P999Ms, x.Errors)
	}
	b.WriteString("\n| target (`_vs_floor`, `_vs_grouped_floor`: each side at its best concurrency; the others at 64 clients; CPU: api, PostgreSQL and Redis per request) | measured | met |\n|---|---:|---|\n")
	for _, t := range r.Targets {
		met := "no"
		if t.Met {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %.3f | %s |\n", t.Name, t.Ratio, met)
	}
	var contextRatios []string
	for _, k := range r.context {
		contextRatios = append(contextRatios, fmt.Sprintf("%s %.3f", k, r.Ratios[k]))
	}
	if len(contextRatios) > 0 {
		b.WriteString("\nContext, not targets (against the floor at 16 and 64 clients; against pgbench running takeout's own SQL; the database's own spread at half rate): " +
			strings.Join(contextRatios, ", ") + ".\n")
	}
	b.WriteString("\nCPU per request (µs of user and system time in the measured part, by process; pgbench's share of its whole run):\n\n" +
		"| scenario | clients | server (api or hello) | postgres | redis | load generator |\n|---|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Results {
		c := x.CPUUsPerRequest
		if c == nil {
			continue
		}
		server := c["api"]
		if strings.HasPrefix(x.Scenario, "hello") {
			server = c["hello"]
		} else if strings.HasPrefix(x.Scenario, "pgbench") {
			server = 0
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.0f | %.0f |\n", x.Scenario, x.Concurrency, server, c["postgres"], c["redis"], c["load"])
	}
	fmt.Fprintf(&b, "\nAPI resident memory after the run: %.0f MB.\n", r.APIRSSMB)
	if m := r.ReplayMillion; m != nil {
		fmt.Fprintf(&b, "\nA million replays (%d requests at %.0f/s, 64 clients): the api's heap in use after a GC went from %.1f MB to %.1f MB (%+.1f MB); its RSS from %.0f MB to %.0f MB.\n",
			m.Requests, m.Throughput, m.HeapBeforeMB, m.HeapAfterMB, m.GrowthMB, m.RSSBeforeMB, m.RSSAfterMB)
	}
	if l := r.L1Million; l != nil {
		fmt.Fprintf(&b, "\nA million completed responses (%d-byte bodies) through the api's L1 (budget %.0f MB), in a fresh process: %d held (their entries %.0f MB), heap in use %.0f MB, RSS %.0f MB, peak RSS %.0f MB; a garbage collection with L1 full takes %.1f ms of CPU.\n",
			l.BodyBytes, l.BudgetMB, l.HeldCount, l.HeldMB, l.HeapMB, l.RSSMB, l.PeakRSSMB, l.GCCPUMs)
	}
	if bd := r.Boards; bd != nil {
		fmt.Fprintf(&b, "\nBoards: %d order streams over %d merchants held open on the api: its heap in use after a GC went from %.0f MB to %.0f MB and its goroutines' stacks from %.1f MB to %.1f MB, %.1f KB a stream (its RSS from %.0f MB to %.0f MB, %.1f KB a stream, low where it reuses pages it held before); idle for %.0f s (a heartbeat each), it used %.2f%% of a core. %d events in %.1f s (%.0f/s), each to its merchant's %d boards: %d deliveries, %d missing; from the commit to the board's read, p50 %.1f ms, p99 %.1f ms, max %.1f ms.\n",
			bd.Streams, bd.Merchants, bd.HeapBeforeMB, bd.HeapAfterMB, bd.StacksBeforeMB, bd.StacksAfterMB, bd.KBEach, bd.RSSBeforeMB, bd.RSSAfterMB, bd.RSSKBEach, bd.IdleS, bd.IdleCPUPercent,
			bd.Events, bd.EventsS, bd.EventsPerS, bd.Streams/bd.Merchants, bd.Deliveries, bd.Missing, bd.P50Ms, bd.P99Ms, bd.MaxMs)
	}
	b.WriteString(r.Journey.markdown())
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}

// svg draws throughput (bars, left) and p99 (bars, right) per scenario at
// each concurrency.
func (r *results) svg() string {
	scenarios := []string{}
	seen := map[string]bool{}
	concs := []int{}
	seenC := map[int]bool{}
	maxT, maxP := 1.0, 1.0
	for _, x := range r.Results {
		if !seen[x.Scenario] {
			seen[x.Scenario] = true
			scenarios = append(scenarios, x.Scenario)
		}
		if !seenC[x.Concurrency] {
			seenC[x.Concurrency] = true
			concs = append(concs, x.Concurrency)
		}
		maxT, maxP = math.Max(maxT, x.Throughput), math.Max(maxP, x.P99Ms)
	}
	const rowH, barH, left, width = 34, 12, 150, 330
	h := 60 + rowH*len(scenarios)
	colors := []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", left+2*width+60, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">throughput (req/s)</text><text x="%d" y="18" font-size="13">p99 latency (ms)</text>`+"\n", left, left+width+40)
	for i, c := range concs {
		fmt.Fprintf(&b, `<rect x="%d" y="26" width="10" height="10" fill="%s"/><text x="%d" y="35">%d clients</text>`+"\n", left+i*90, colors[i%len(colors)], left+14+i*90, c)
	}
	for si, s := range scenarios {
		y := 50 + si*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+barH, s)
		for ci, c := range concs {
			x, ok := r.find(s, c)
			if !ok {
				continue
			}
			by := y + ci*(barH+2)
			tw := x.Throughput / maxT * (width - 60)
			pw := x.P99Ms / maxP * (width - 60)
			col := colors[ci%len(colors)]
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/><text x="%.1f" y="%d">%.0f</text>`+"\n", left, by, tw, barH, col, float64(left)+tw+3, by+barH-2, x.Throughput)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/><text x="%.1f" y="%d">%.2f</text>`+"\n", left+width+40, by, pw, barH, col, float64(left+width+40)+pw+3, by+barH-2, x.P99Ms)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// median is the middle of vs (the mean of the middle two for an even
// count).
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
