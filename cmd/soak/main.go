// Command soak runs takeout the way production will: several api
// processes and wxsim on loopback, in front of a private PostgreSQL and
// Redis reached through toxiproxy, under a mixed workload of simulated
// users full of duplicate requests, while faults are injected on a
// schedule (Redis killed and flushed, latency, black holes and resets on
// both connections, PostgreSQL crash-restarted, instances SIGKILLed).
// After a settle period it checks the system's invariants against the
// database and the client log, writes a JSON report and a Markdown table,
// and exits 1 when any invariant is broken.
//
//	go run ./cmd/soak -duration 30m -users 64 -dup 4 -report-dir docs/soak
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the soak's flags.
type options struct {
	duration   time.Duration
	settle     time.Duration
	instances  int
	users      int
	dup        int
	faults     []string
	faultEvery time.Duration
	hotStock   int
	payWindow  time.Duration
	workDir    string
	reportDir  string
	reportName string
	apiBin     string
	wxsimBin   string
	pgBin      string
	// ha runs on a Redis Cluster and a Patroni cluster instead of one
	// server of each behind toxiproxy.
	ha bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var faults string
	fs.DurationVar(&o.duration, "duration", 2*time.Minute, "how long the workload runs")
	fs.DurationVar(&o.settle, "settle", 90*time.Second, "the longest wait, after the workload and the faults stop, for deadlines and retries to play out")
	fs.IntVar(&o.instances, "instances", 3, "api processes")
	fs.IntVar(&o.users, "users", 48, "simulated users, each placing orders one after another")
	fs.IntVar(&o.dup, "dup", 4, "duplicate factor: copies of each submit sent at once")
	fs.StringVar(&faults, "faults", "all", "fault kinds to inject, comma-separated ('all' for every kind of the mode, 'none' for none)")
	fs.BoolVar(&o.ha, "ha", false, "run on a 3-master Redis Cluster with a replica each and a 3-member Patroni cluster (synchronous replication) on etcd")
	fs.DurationVar(&o.faultEvery, "fault-every", 20*time.Second, "time between the starts of two faults")
	fs.IntVar(&o.hotStock, "hot-stock", 400, "stock of the hot dish that every other order wants")
	fs.DurationVar(&o.payWindow, "pay-window", 40*time.Second, "TAKEOUT_ORDER_PAY_WINDOW of the instances")
	fs.StringVar(&o.workDir, "work-dir", "", "where servers, logs and the client log go (default .dev/soak/<time>)")
	fs.StringVar(&o.reportDir, "report-dir", "", "where report JSON and Markdown go (default the work directory)")
	fs.StringVar(&o.reportName, "report-name", "", "report file name without extension (default soak-<date>-<duration>)")
	fs.StringVar(&o.apiBin, "api-bin", "bin/api", "the api binary")
	fs.StringVar(&o.wxsimBin, "wxsim-bin", "bin/wxsim", "the wxsim binary")
	fs.StringVar(&o.pgBin, "pg-bin", "", "PostgreSQL server binaries (default the newest /usr/lib/postgresql/*/bin)")
	if err := fs.Parse(args[1:]); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.instances < 1 || o.users < 1 || o.dup < 1 || o.hotStock < 1 {
		return o, errors.New("-instances, -users, -dup and -hot-stock must be at least 1")
	}
	kinds := allFaults
	if o.ha {
		kinds = haFaults
	}
	if faults == "all" {
		faults = strings.Join(kinds, ",")
	}
	if faults != "none" && faults != "" {
		known := map[string]bool{}
		for _, f := range kinds {
			known[f] = true
		}
		for _, f := range strings.Split(faults, ",") {
			f = strings.TrimSpace(f)
			if !known[f] {
				return o, fmt.Errorf("-faults: unknown fault %q (known with -ha=%v: %s)", f, o.ha, strings.Join(kinds, ", "))
			}
			o.faults = append(o.faults, f)
		}
	}
	if o.workDir == "" {
		o.workDir = filepath.Join(".dev", "soak", time.Now().UTC().Format("20060102-150405"))
	}
	if o.reportDir == "" {
		o.reportDir = o.workDir
	}
	if o.reportName == "" {
		o.reportName = fmt.Sprintf("soak-%s-%s", time.Now().UTC().Format("2006-01-02"), o.duration)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "soak:", err)
		return 2
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "soak %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	rep, err := soak(ctx, o, logf)
	if err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		return 1
	}
	rep.Command = strings.Join(args, " ")
	if cmd := os.Getenv("TAKEOUT_SOAK_COMMAND"); cmd != "" {
		rep.Command = cmd // the make target that ran us
	}
	jsonPath, mdPath, err := rep.write(o.reportDir, o.reportName)
	if err != nil {
		fmt.Fprintln(stderr, "soak: write report:", err)
		return 1
	}
	fmt.Fprint(stdout, rep.markdown())
	fmt.Fprintf(stdout, "\nreport: %s and %s\n", jsonPath, mdPath)
	if rep.ViolationsTotal > 0 {
		fmt.Fprintf(stdout, "FAIL: %d invariant violations\n", rep.ViolationsTotal)
		return 1
	}
	// A fault that did not heal in time means the stack was not whole
	// for what followed: the run proves less than it says.
	for _, ev := range rep.FaultTimeline {
		if ev.Error != "" {
			fmt.Fprintf(stdout, "FAIL: fault %s at %.0f s did not heal: %s\n", ev.Kind, ev.AtS, ev.Error)
			return 1
		}
	}
	fmt.Fprintln(stdout, "PASS: every invariant holds")
	return 0
}

func randomSecret() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
