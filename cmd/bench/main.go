// Command bench measures takeout against this machine's own limits in one
// run: a bare chi JSON handler (the HTTP floor), pgbench running the very
// SQL transactions of a submit and of a payment callback (the database
// floor), and the real api binary on the same PostgreSQL and Redis for
// unique submits, replays, unique and duplicate callbacks, the menu and a
// hot dish, each at concurrency 16 and 64. It writes
// docs/bench/results-<date>.json (every figure, the ratios the targets are
// stated in, the machine), a Markdown table and an SVG chart.
//
//	make bench    (go run ./cmd/bench -out docs/bench)
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	duration, warmup time.Duration
	conc             []int
	out              string
	work             string
	apiBin, wxsim    string
	pgBin            string
	adminURL         string
	redisURL         string
	only             map[string]bool
	// apiDBConns is the api's pool size (TAKEOUT_DATABASE_MAX_CONNS).
	apiDBConns int
	// trace is the api's OTEL_TRACES_EXPORTER: none, or console (its
	// spans go to api.log in the work directory).
	trace string
	// vouchers: each submitted cart spends a voucher of its customer's.
	vouchers bool
	// floorGroup is how many orders (payments) the grouped floor
	// commits in one transaction.
	floorGroup int
	// promotion: the merchant runs a spend-and-save promotion with a
	// budget that every cart gets.
	promotion bool
}

// defaultAPIDBConns sizes the api's pool as PostgreSQL's own guidance
// does, about twice the database's cores: the database runs on this
// machine, and more backends than that only take turns on its cores and
// contend for its locks.
func defaultAPIDBConns() int { return max(4, 2*runtime.NumCPU()) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 1 && args[1] == "hello" {
		return hello(ctx, args[2:])
	}
	if len(args) > 1 && args[1] == "l1" {
		return l1Fill(ctx, args[2:], stdout)
	}
	began := time.Now()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var conc, only string
	fs.DurationVar(&o.duration, "duration", 6*time.Second, "measured time of each scenario at each concurrency")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before each measurement")
	fs.StringVar(&conc, "concurrency", "16,64", "client concurrencies")
	fs.StringVar(&o.out, "out", "docs/bench", "where results-<date>.{json,md,svg} go")
	fs.StringVar(&o.work, "work-dir", ".dev/bench", "logs, keys and pgbench scripts")
	fs.StringVar(&o.apiBin, "api-bin", "bin/api", "the api binary")
	fs.StringVar(&o.wxsim, "wxsim-bin", "bin/wxsim", "the wxsim binary")
	fs.StringVar(&o.pgBin, "pg-bin", "", "PostgreSQL programs (pgbench); default the newest /usr/lib/postgresql/*/bin")
	fs.StringVar(&o.adminURL, "database-url", os.Getenv("TAKEOUT_TEST_DATABASE_URL"), "PostgreSQL to create the bench database in (default $TAKEOUT_TEST_DATABASE_URL)")
	fs.StringVar(&o.redisURL, "redis-url", os.Getenv("TAKEOUT_TEST_REDIS_URL"), "Redis (default $TAKEOUT_TEST_REDIS_URL)")
	fs.StringVar(&only, "only", "", "comma-separated scenarios to run (default all)")
	fs.StringVar(&o.trace, "trace", "none", "the api's OTEL_TRACES_EXPORTER: none, or console (every span written to api.log): what tracing costs")
	fs.BoolVar(&o.promotion, "promotion", true, "the merchant runs a spend-and-save promotion with a budget that every cart gets (taken in the placement); false: none")
	fs.BoolVar(&o.vouchers, "vouchers", true, "each submitted cart spends a voucher of its customer's (a platform voucher of 100 fen, taken in the placement); false: carts without")
	fs.IntVar(&o.floorGroup, "floor-group", floorGroup, "orders (and payments) the grouped floor commits per transaction")
	fs.IntVar(&o.apiDBConns, "api-db-conns", defaultAPIDBConns(), "the api's database pool (TAKEOUT_DATABASE_MAX_CONNS); default twice the CPUs, at least 4")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if o.floorGroup < 1 {
		return fmt.Errorf("-floor-group: want at least 1, got %d", o.floorGroup)
	}
	if o.apiDBConns < 2 {
		return fmt.Errorf("-api-db-conns: want at least 2, got %d", o.apiDBConns)
	}
	if o.adminURL == "" || o.redisURL == "" {
		return errors.New("no PostgreSQL or Redis: run `make bench` (it starts them), or set TAKEOUT_TEST_DATABASE_URL and TAKEOUT_TEST_REDIS_URL")
	}
	for _, c := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("-concurrency: %q", c)
		}
		o.conc = append(o.conc, n)
	}
	if only != "" {
		o.only = map[string]bool{}
		for _, s := range strings.Split(only, ",") {
			o.only[strings.TrimSpace(s)] = true
		}
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	res, err := bench(ctx, o, logf)
	if err != nil {
		return err
	}
	res.ElapsedS = math.Round(time.Since(began).Seconds())
	res.Command = strings.Join(args, " ")
	if c := os.Getenv("TAKEOUT_BENCH_COMMAND"); c != "" {
		res.Command = c
	}
	paths, err := res.write(o.out)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, res.markdown())
	fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join(paths, ", "))
	return nil
}

// hello serves the HTTP floor: a bare chi router with one JSON handler,
// one that answers a replay's request the way a replay is answered and
// one that answers a callback's the way a duplicate is.
func hello(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hello", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r := chi.NewRouter()
	r.Get("/hello", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"hello": "world"})
	})
	// A replay's HTTP exchange with nothing behind it: the same request
	// read whole, and an answer with a replay's status, header names and
	// body length (?bytes=), from memory.
	answer := bytes.Repeat([]byte("x"), 16<<10)
	r.Post("/replay", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("bytes"))
		if err != nil || n < 0 || n > len(answer) {
			http.Error(w, "bytes: 0 to 16384", http.StatusBadRequest)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		h.Set("X-Request-Id", "0123456789abcdef01234567")
		h.Set("Content-Type", "application/json")
		h.Set("Location", "/v1/orders/1000000000000000000")
		h.Set("Idempotent-Replayed", "true")
		h.Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer[:n])
	})
	// A duplicate callback's HTTP exchange with nothing behind it: the
	// notification read whole, answered 204 as the api answers one.
	r.Post("/notify", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Request-Id", "0123456789abcdef01234567")
		w.WriteHeader(http.StatusNoContent)
	})
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
