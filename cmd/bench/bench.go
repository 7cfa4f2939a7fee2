package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/config"
	"github.com/takeout/takeout/internal/lab"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/wxsim"
)

const benchMchID = "1900000109"

// env is everything the scenarios use.
type env struct {
	o        options
	client   *http.Client
	api      string
	hello    string
	db       *pgxpool.Pool
	dbURL    string
	floorDB  *pgxpool.Pool // the database floor's own database
	floorURL string
	merchant int64
	dishes   []int64
	hot      int64
	users    []string // session tokens
	userIDs  []int64  // the users' ids, in the order of users
	// voucherTpl is the platform template the carts' vouchers are of (0:
	// carts without), and claims how many each user holds.
	voucherTpl int64
	claims     map[int64]int32
	keys       wxsim.Keys
	apiPID     int
	// wxsim is WeChat's, the printers' and the couriers' simulator.
	wxsim    string
	wxsimPID int
	// apiEnv is the api's environment, for more instances like it.
	apiEnv   []string
	helloPID int
	debug    string        // the api's operations listener (metrics, pprof)
	apiCfg   config.Config // the api's configuration as the bench runs it
	work     string        // the work directory
	pgBin    string        // PostgreSQL's programs (pgbench)
	closers  []func()      // run in reverse by close
	// tokens issues the api's staff tokens; admin is an admin's.
	tokens *auth.Tokens
	admin  string
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// bench sets up, runs every scenario and returns the results.
func bench(ctx context.Context, o options, logf func(string, ...any)) (*results, error) {
	e, err := setup(ctx, o, logf)
	defer e.close() // e holds what was started, even on an error
	if err != nil {
		return nil, err
	}
	r, err := newRunner(ctx, e, logf)
	if err != nil {
		return nil, err
	}
	probe := func(name string) *commitProbe {
		p, err := e.probeCommits(ctx, name, 3*time.Second)
		if err != nil {
			logf("%v", err)
			return nil
		}
		logf("commit latency %s: mean %.2f ms, p50 %.2f ms, p99 %.2f ms (%d commits)", name, p.MeanMs, p.P50Ms, p.P99Ms, p.Commits)
		return p
	}
	r.res.CommitLatency.Before = probe("commit_probe_before")
	for _, c := range o.conc {
		if err := r.closedLoops(ctx, c); err != nil {
			return nil, err
		}
	}
	if r.want("submit_128") || r.named("submit_128_instances") {
		if err := r.manyConnections(ctx); err != nil {
			return nil, err
		}
	}
	if r.want("submit_half_rate") {
		if err := r.halfRate(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.memory(ctx); err != nil {
		return nil, err
	}
	r.res.APIRSSMB = rssMB(e.apiPID)
	if r.want("journey") {
		if r.res.Journey, err = r.journey(ctx); err != nil {
			return nil, err
		}
	}
	if r.want("boards") {
		if r.res.Boards, err = r.boards(ctx); err != nil {
			return nil, fmt.Errorf("boards: %w", err)
		}
	}
	r.res.CommitLatency.After = probe("commit_probe_after")
	r.res.finish()
	return r.res, nil
}

// onClose adds f to what close runs, last first.
func (e *env) onClose(f func()) { e.closers = append(e.closers, f) }

// close stops what setup started, last first.
func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// setup makes a fresh database, starts wxsim, the api and the hello
// floor, and seeds the catalog and the users.
func setup(ctx context.Context, o options, logf func(string, ...any)) (*env, error) {
	e := &env{o: o, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}}
	var err error
	if e.work, err = filepath.Abs(o.work); err != nil {
		return e, err
	}
	if err := os.MkdirAll(e.work, 0o750); err != nil {
		return e, err
	}
	if e.pgBin, err = lab.PGBinDir(o.pgBin); err != nil {
		return e, err
	}
	if e.dbURL, err = freshDatabase(ctx, o.adminURL, "takeout_bench"); err != nil {
		return e, err
	}
	logf("seeding the database floor: 1,000 dishes, 1,000,000 pending orders")
	if err := e.setupFloor(ctx); err != nil {
		return e, err
	}
	sessionSecret, staffSecret, err := e.startServers(ctx)
	if err != nil {
		return e, err
	}
	if e.db, err = pgxpool.New(ctx, e.dbURL); err != nil {
		return e, err
	}
	e.onClose(e.db.Close)
	e.tokens = auth.NewTokens([]byte(sessionSecret), []byte(staffSecret), time.Hour, time.Now)
	if e.admin, _, err = e.tokens.IssueStaff("bench", auth.Role{Admin: true}, time.Hour); err != nil {
		return e, err
	}
	logf("seeding: 1 merchant, 256 dishes, a hot dish, 64 users")
	if err := e.seed(ctx, e.admin); err != nil {
		return e, fmt.Errorf("seed: %w", err)
	}
	return e, nil
}

// freshDatabase drops and creates the database name on the server of
// adminURL and returns its URL.
func freshDatabase(ctx context.Context, adminURL, name string) (string, error) {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect %s: %w", adminURL, err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "CREATE DATABASE " + name} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return "", err
		}
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// startServers starts wxsim (whose platform key the bench signs callbacks
// with), the api and the hello floor, each answering before the next
// starts; it returns the api's session and staff secrets.
func (e *env) startServers(ctx context.Context) (sessionSecret, staffSecret string, err error) {
	wxDir := filepath.Join(e.work, "wxsim")
	if e.keys, err = wxsim.LoadOrCreateKeys(wxDir, benchMchID); err != nil {
		return "", "", err
	}
	wxEnv, err := wxsim.ReadAPIEnv(wxDir)
	if err != nil {
		return "", "", err
	}
	wxAddr, err := lab.FreeAddr()
	if err != nil {
		return "", "", err
	}
	apiAddr, err := lab.FreeAddr()
	if err != nil {
		return "", "", err
	}
	appSecret := randomHex(16)
	sessionSecret, staffSecret = randomHex(24), randomHex(24)
	base := os.Environ()
	// The printers' and couriers' simulators call the api back; the
	// journey's riders move when it says (couriersim's advance), not on a
	// clock of their own.
	wx, err := e.startAndWait(ctx, "wxsim", e.o.wxsim, append(append([]string{}, base...), "TAKEOUT_WXSIM_ADDR="+wxAddr, "TAKEOUT_WXSIM_DIR="+wxDir,
		"TAKEOUT_WECHAT_APP_SECRET="+appSecret, "TAKEOUT_WXPAY_MCHID="+benchMchID, "TAKEOUT_WXSIM_COURIER_STEP=0",
		"TAKEOUT_WXSIM_YILIANYUN_CALLBACK_URL=http://"+apiAddr+"/v1/printers/yilianyun/callback",
		"TAKEOUT_WXSIM_MEITUAN_CALLBACK_URL=http://"+apiAddr+"/v1/couriers/meituan/callback"), "http://"+wxAddr+"/healthz")
	if err != nil {
		return "", "", err
	}
	e.wxsim, e.wxsimPID = "http://"+wxAddr, wx.PID()
	if e.debug, err = lab.FreeAddr(); err != nil {
		return "", "", err
	}
	apiEnv := map[string]string{
		"TAKEOUT_HTTP_ADDR": apiAddr, "TAKEOUT_OPS_ADDR": e.debug, "TAKEOUT_DATABASE_URL": e.dbURL, "TAKEOUT_DATABASE_MAX_CONNS": strconv.Itoa(e.o.apiDBConns),
		"TAKEOUT_REDIS_URL": e.o.redisURL, "TAKEOUT_REDIS_PREFIX": "bench:" + randomHex(4) + ":",
		"TAKEOUT_SESSION_SECRET": sessionSecret, "TAKEOUT_STAFF_SECRET": staffSecret, "TAKEOUT_CONFIRM_SECRET": randomHex(24),
		"TAKEOUT_WECHAT_API_BASE": "http://" + wxAddr, "TAKEOUT_WECHAT_APP_SECRET": appSecret, "TAKEOUT_WXPAY_API_BASE": "http://" + wxAddr,
		"TAKEOUT_WXPAY_NOTIFY_URL": "http://" + apiAddr + "/v1/payments/wechat/notify", "TAKEOUT_WXPAY_MCHID": benchMchID,
		"TAKEOUT_RATE_LIMIT_IP": "0", "TAKEOUT_RATE_LIMIT_USER": "0", "TAKEOUT_LOG_LEVEL": "warn",
		// An instance serving a platform's boards (the boards scenario):
		// 10,000 streams, 50 per merchant and per kitchen's token.
		"TAKEOUT_STREAM_MAX": strconv.Itoa(boardStreams + 2000), "TAKEOUT_STREAM_MAX_PER_TOKEN": "50",
		"TAKEOUT_WXPAY_RECONCILE_INTERVAL": "1h", "TAKEOUT_ORDER_PAY_WINDOW": "1h", "TAKEOUT_CONFIRM_TOKEN_TTL": "1h",
		// The journey's printer and couriers, in wxsim (the other
		// scenarios' merchant has neither).
		"TAKEOUT_YILIANYUN_API_BASE": "http://" + wxAddr + "/yilianyun", "TAKEOUT_FEIE_API_BASE": "http://" + wxAddr + "/feie",
		"TAKEOUT_FEIE_CALLBACK_URL": "http://" + apiAddr + "/v1/printers/feie/callback",
		"TAKEOUT_DADA_API_BASE":     "http://" + wxAddr + "/dada", "TAKEOUT_MEITUAN_API_BASE": "http://" + wxAddr + "/meituan",
		"TAKEOUT_COURIER_CALLBACK_BASE": "http://" + apiAddr,
		"OTEL_TRACES_EXPORTER":          e.o.trace,
	}
	maps.Copy(apiEnv, wxEnv)
	if e.apiCfg, err = config.Load(func(k string) string { return apiEnv[k] }); err != nil {
		return "", "", fmt.Errorf("the api's configuration: %w", err)
	}
	var apiEnvList []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, "TAKEOUT_") {
			apiEnvList = append(apiEnvList, kv)
		}
	}
	for k, v := range apiEnv {
		apiEnvList = append(apiEnvList, k+"="+v)
	}
	e.apiEnv = apiEnvList
	api, err := e.startAndWait(ctx, "api", e.o.apiBin, apiEnvList, "http://"+apiAddr+"/readyz", "serve")
	if err != nil {
		return "", "", err
	}
	e.api, e.apiPID = "http://"+apiAddr, api.PID()
	helloAddr, err := lab.FreeAddr()
	if err != nil {
		return "", "", err
	}
	self, err := os.Executable()
	if err != nil {
		return "", "", err
	}
	hp, err := e.startAndWait(ctx, "hello", self, base, "http://"+helloAddr+"/hello", "hello", "-addr", helloAddr)
	if err != nil {
		return "", "", err
	}
	e.hello, e.helloPID = "http://"+helloAddr, hp.PID()
	return sessionSecret, staffSecret, nil
}

// startInstances starts n more api instances like the first (same
// database, Redis, secrets and pool size), with env's settings over the
// first's, and returns their base URLs and process ids.
func (e *env) startInstances(ctx context.Context, name string, n int, env ...string) (urls []string, pids []int, err error) {
	for i := range n {
		addr, err := lab.FreeAddr()
		if err != nil {
			return nil, nil, err
		}
		ops, err := lab.FreeAddr()
		if err != nil {
			return nil, nil, err
		}
		// The last of a repeated variable is the one the process sees.
		vars := append(append(slices.Clone(e.apiEnv), env...), "TAKEOUT_HTTP_ADDR="+addr, "TAKEOUT_OPS_ADDR="+ops)
		p, err := e.startAndWait(ctx, fmt.Sprintf("%s-%d", name, i+1), e.o.apiBin, vars, "http://"+addr+"/readyz", "serve")
		if err != nil {
			return nil, nil, err
		}
		urls, pids = append(urls, "http://"+addr), append(pids, p.PID())
	}
	return urls, pids, nil
}

// startAndWait starts a server logging to <name>.log in the work
// directory and waits until ready answers 200.
func (e *env) startAndWait(ctx context.Context, name, bin string, env []string, ready string, args ...string) (*lab.Process, error) {
	logPath := filepath.Join(e.work, name+".log")
	_ = os.Remove(logPath) // each run's log alone
	p, err := lab.Start(ctx, logPath, bin, env, args...)
	if err != nil {
		return nil, err
	}
	e.onClose(func() { p.Stop(20 * time.Second) })
	if err := lab.WaitHTTP(ctx, ready, p.Exited(), 90*time.Second); err != nil {
		return nil, fmt.Errorf("%s: %w (log %s)", name, err, logPath)
	}
	return p, nil
}

// rounds is how many times over the two sides of a ratio take turns.
const rounds = 3

// runner runs the scenarios against a set-up env and collects results.
type runner struct {
	e    *env
	o    options
	logf func(string, ...any)
	res  *results
	// submitSQL and callbackSQL are pgbench's scripts of takeout's own
	// transactions.
	submitSQL, callbackSQL string
	// groupedPlaceSQL and groupedPaySQL are the floor's placement and
	// payment, o.floorGroup of them per transaction.
	groupedPlaceSQL, groupedPaySQL string
	profiles                       string
	meter                          cpuMeter
	// unique is how many unique inputs a run at up to 4,000 per second
	// needs: a run that used them up would end early and measure less.
	unique int
}

func newRunner(ctx context.Context, e *env, logf func(string, ...any)) (*runner, error) {
	o := e.o
	r := &runner{e: e, o: o, logf: logf, unique: int(4000 * (o.warmup + o.duration).Seconds()),
		profiles: filepath.Join(e.work, "profiles"),
		meter:    processCPU("/proc", map[string]int{"api": e.apiPID, "hello": e.helloPID}),
		res: &results{Started: time.Now().UTC(), Machine: lab.HostFacts(), DurationS: o.duration.Seconds(), WarmupS: o.warmup.Seconds(),
			APIDatabaseConns: o.apiDBConns, Tracing: o.trace}}
	if e.voucherTpl != 0 {
		r.res.Notes = append(r.res.Notes, "Every cart the api's submits place spends a voucher of its customer's (a platform voucher of 100 fen off, issued to the bench's users beforehand): the placement takes it in the same statement as the stock (`-vouchers=false` measures carts without).")
	}
	if o.promotion {
		r.res.Notes = append(r.res.Notes, "Every cart gets the merchant's spend-and-save promotion (50 fen off 10 yuan, with a budget): the placement takes its part of the budget from a shard in the same statement as the stock (`-promotion=false` measures carts without).")
	}
	queries, err := namedQueries("db/queries")
	if err != nil {
		return nil, err
	}
	if r.submitSQL, err = submitScript(queries, e.merchant, e.dishes); err != nil {
		return nil, err
	}
	if r.callbackSQL, err = callbackScript(queries, benchMchID); err != nil {
		return nil, err
	}
	if r.groupedPlaceSQL, err = groupedFloor("place.sql", o.floorGroup, "m"); err != nil {
		return nil, err
	}
	if r.groupedPaySQL, err = groupedFloor("pay.sql", o.floorGroup, "id"); err != nil {
		return nil, err
	}
	if err := e.seedPgbenchPayments(ctx, 100_000); err != nil {
		return nil, fmt.Errorf("seed pgbench payments: %w", err)
	}
	return r, os.MkdirAll(r.profiles, 0o750)
}

func (r *runner) want(s string) bool { return r.o.only == nil || r.o.only[s] }

// named reports whether -only names s: a scenario that runs only when
// asked for (context that would lengthen every run).
func (r *runner) named(s string) bool { return r.o.only[s] }

func (r *runner) add(x result) {
	r.logf("%-16s c=%-3d %9.0f/s  p50 %7.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  errors %d %s", x.Scenario, x.Concurrency, x.Throughput, x.P50Ms, x.P99Ms, x.P999Ms, x.Errors, x.FirstError)
	r.res.Results = append(r.res.Results, x)
}

// cpuProfile starts a CPU profile of the api process for secs seconds,
// written as name-c<c>.cpu.pprof (go tool pprof reads it); what it
// returns waits for the profile to be written.
func (r *runner) cpuProfile(ctx context.Context, name string, c, secs int) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", r.e.debug, secs), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		_ = os.WriteFile(filepath.Join(r.profiles, fmt.Sprintf("%s-c%d.cpu.pprof", name, c)), b, 0o600)
	}()
	return func() { <-done }
}

// heapProfile writes the api's heap profile (after a GC) as
// name.heap.pprof.
func (r *runner) heapProfile(ctx context.Context, name string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", r.e.debug), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_ = os.WriteFile(filepath.Join(r.profiles, name+".heap.pprof"), b, 0o600)
}

// settle makes every scenario that writes start from a vacuumed and
// checkpointed database, so that none pays for the dead rows, the
// autovacuum or the dirty pages the one before left.
func (r *runner) settle(ctx context.Context) func() error {
	return func() error {
		for _, stmt := range []string{"VACUUM (ANALYZE)", "CHECKPOINT"} {
			if _, err := r.e.db.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%s before a scenario: %w", stmt, err)
			}
		}
		return nil
	}
}

// turns runs scenarios interleaved over n rounds (see interleaved), with
// a CPU profile of each API scenario from its middle round at the highest
// concurrency.
func (r *runner) turns(ctx context.Context, c int, ss []scenario, n int) error {
	if len(ss) == 0 {
		return nil
	}
	top := r.o.conc[len(r.o.conc)-1]
	rs, err := interleaved(ctx, c, r.o.warmup, r.o.duration, n, ss, func(s scenario, round int, window time.Duration) func() {
		if strings.HasPrefix(s.name, "pgbench") || s.name == "hello" || round != n/2 || c != top || window < time.Second {
			return func() {}
		}
		return r.cpuProfile(ctx, s.name, c, int(window.Seconds()))
	})
	for _, x := range rs {
		r.add(x)
	}
	return err
}

// closedLoops runs the closed-loop scenarios at c clients. Each ratio's
// two sides take turns (see interleaved): the HTTP floor with the answers
// from memory, pgbench's placement with the API's, pgbench's callback
// with the API's.
func (r *runner) closedLoops(ctx context.Context, c int) error {
	floor, err := r.floorScenarios(ctx, c)
	if err != nil {
		return err
	}
	placement, callbacks, err := r.writeScenarios(ctx, c)
	if err != nil {
		return err
	}
	var menu []scenario // compared with nothing: it runs alone, in the same rounds
	if r.want("menu") {
		menu = append(menu, closedScenario("menu", c, nil, r.meter, r.e.get(r.e.api+"/v1/merchants/"+strconv.FormatInt(r.e.merchant, 10)+"/menu")))
	}
	for _, t := range []struct {
		ss     []scenario
		rounds int
	}{{floor, memoryRounds}, {placement, rounds}, {callbacks, rounds}, {menu, rounds}} {
		if err := r.turns(ctx, c, t.ss, t.rounds); err != nil {
			return err
		}
	}
	return nil
}

// memoryRounds is how many times over the scenarios answered from memory
// take turns: each costs some 40 µs of CPU a request, so a second of
// this machine's steal or frequency decides a window's figure, and
// shorter turns put both sides of a ratio in more of the same moments.
// Each turn stays a second long or more, for its profile.
const memoryRounds = 2 * rounds

// floorScenarios are the ones answered from memory: hello, a replayed
// submit and a duplicate callback.
func (r *runner) floorScenarios(ctx context.Context, c int) ([]scenario, error) {
	e := r.e
	var floor []scenario
	if r.want("hello") {
		floor = append(floor, closedScenario("hello", c, nil, r.meter, e.get(e.hello+"/hello")))
	}
	if r.want("replay") {
		toks, err := e.confirmMany(ctx, 1, false)
		if err != nil {
			return nil, err
		}
		// The first submit places the order; every one after it replays.
		n, err := e.postLen(ctx, e.api+"/v1/orders", toks[0].header, toks[0].body, http.StatusCreated)
		if err != nil {
			return nil, err
		}
		floor = append(floor, closedScenario("replay", c, nil, r.meter, e.replay(toks[0])))
		if r.want("hello_replay") {
			u := e.hello + "/replay?bytes=" + strconv.FormatInt(n, 10)
			floor = append(floor, closedScenario("hello_replay", c, nil, r.meter, func(ctx context.Context, _ int, _ int64) error {
				return e.post(ctx, u, toks[0].header, toks[0].body, http.StatusCreated)
			}))
		}
	}
	if r.want("callback_dup") {
		notes, err := e.notifications(ctx, 1)
		if err != nil {
			return nil, err
		}
		floor = append(floor, closedScenario("callback_dup", c, nil, r.meter, e.callbackSame(notes[0])))
		if r.want("hello_callback") {
			nt := notes[0]
			floor = append(floor, closedScenario("hello_callback", c, nil, r.meter, func(ctx context.Context, _ int, _ int64) error {
				return e.post(ctx, e.hello+"/notify", nt.header, nt.body, http.StatusNoContent)
			}))
		}
	}
	return floor, nil
}

// writeScenarios are the placements (pgbench's, submit, the hot dish) and
// the callbacks (pgbench's, the api's).
func (r *runner) writeScenarios(ctx context.Context, c int) (placement, callbacks []scenario, err error) {
	e, settle := r.e, r.settle(ctx)
	if r.want("pgbench_submit") {
		placement = append(placement, pgbenchScenario(e.pgBin, e.dbURL, "pgbench_submit", r.submitSQL, c, 0, e.work, settle, r.meter))
	}
	for _, f := range [][2]string{{"floor_place", "place.sql"}, {"floor_hot", "hot_place.sql"}} {
		if r.want(f[0]) {
			placement = append(placement, pgbenchScenario(e.pgBin, e.floorURL, f[0], floorSQL(f[1]), c, 0, e.work, r.floorSettle(ctx, false), r.meter))
		}
	}
	if r.want("confirm") {
		confirm, err := e.confirmEach(ctx)
		if err != nil {
			return nil, nil, err
		}
		// Settled like the others, though it writes nothing: PostgreSQL's
		// background work after the scenario before it (the checkpointer,
		// autovacuum of the orders just placed) would land in its window.
		placement = append(placement, closedScenario("confirm", c, settle, r.meter, confirm))
	}
	if r.want("floor_place_grouped") {
		placement = append(placement, perTransaction(pgbenchScenario(e.pgBin, e.floorURL, "floor_place_grouped", r.groupedPlaceSQL, c, 0, e.work, r.floorSettle(ctx, false), r.meter), r.o.floorGroup))
	}
	for _, name := range []string{"submit", "hot_dish"} {
		if r.want(name) {
			toks, err := e.confirmMany(ctx, r.unique, name == "hot_dish")
			if err != nil {
				return nil, nil, err
			}
			placement = append(placement, closedScenario(name, c, settle, r.meter, e.submitEach(toks)))
		}
	}
	if r.want("pgbench_callback") {
		callbacks = append(callbacks, pgbenchScenario(e.pgBin, e.dbURL, "pgbench_callback", r.callbackSQL, c, 0, e.work, settle, r.meter))
	}
	if r.want("floor_pay") {
		callbacks = append(callbacks, pgbenchScenario(e.pgBin, e.floorURL, "floor_pay", floorSQL("pay.sql"), c, 0, e.work, r.floorSettle(ctx, true), r.meter))
	}
	if r.want("floor_pay_grouped") {
		callbacks = append(callbacks, perTransaction(pgbenchScenario(e.pgBin, e.floorURL, "floor_pay_grouped", r.groupedPaySQL, c, 0, e.work, r.floorSettle(ctx, true), r.meter), r.o.floorGroup))
	}
	if r.want("callback") {
		notes, err := e.notifications(ctx, r.unique)
		if err != nil {
			return nil, nil, err
		}
		callbacks = append(callbacks, closedScenario("callback", c, settle, r.meter, e.callbackEach(notes)))
	}
	return placement, callbacks, nil
}

// manyInstances is how many api instances' pools submit_128 stands for.
const manyInstances = 3

// manyConnections is submit at 128 clients against an api whose pool is
// as large as a deployment of three opens (3 x the pool, with a group
// commit slot for each instance): the database sees the connections and
// the concurrent groups of three instances, where pgbench's own
// transaction collapses. submit_128_instances (only when -only names it)
// is the same load over three api processes, for context: on this
// machine their CPU is the database's, which a deployment's three
// machines would not share.
func (r *runner) manyConnections(ctx context.Context) error {
	e := r.e
	if r.want("submit_128") {
		conns := manyInstances * r.o.apiDBConns
		wide, widePIDs, err := e.startInstances(ctx, "api-wide", 1,
			"TAKEOUT_DATABASE_MAX_CONNS="+strconv.Itoa(conns), "TAKEOUT_DATABASE_GROUP_COMMIT_SLOTS="+strconv.Itoa(manyInstances))
		if err != nil {
			return err
		}
		toks, err := e.confirmMany(ctx, r.unique, false)
		if err != nil {
			return err
		}
		ss := []scenario{closedScenario("submit_128", 128, r.settle(ctx), processCPU("/proc", map[string]int{"api": widePIDs[0]}), e.submitAcross(toks, wide))}
		// Submit at 64 clients takes turns with it, as the two sides of
		// every other ratio do: its best, measured minutes earlier, saw
		// other moments of this machine.
		if r.want("submit") {
			beside, err := e.confirmMany(ctx, r.unique, false)
			if err != nil {
				return err
			}
			ss = append(ss, closedScenario("submit_beside_128", 64, r.settle(ctx), r.meter, e.submitEach(beside)))
		}
		rs, err := interleaved(ctx, 128, r.o.warmup, r.o.duration, rounds, ss, nil)
		for _, x := range rs {
			if x.Scenario == "submit_beside_128" {
				x.Concurrency = 64
			} else {
				x.Note = strings.TrimPrefix(x.Note+"; ", "; ") +
					fmt.Sprintf("one api instance with three instances' pools: %d database connections, %d group commit slots", conns, manyInstances)
			}
			r.add(x)
		}
		if err != nil {
			return err
		}
	}
	if !r.named("submit_128_instances") {
		return nil
	}
	urls, pids, err := e.startInstances(ctx, "api", manyInstances-1)
	if err != nil {
		return err
	}
	toks, err := e.confirmMany(ctx, r.unique, false)
	if err != nil {
		return err
	}
	procs := map[string]int{"api": e.apiPID}
	for i, pid := range pids {
		procs[fmt.Sprintf("api-%d", i+2)] = pid
	}
	s := closedScenario("submit_128_instances", 128, r.settle(ctx), processCPU("/proc", procs), e.submitAcross(toks, append([]string{e.api}, urls...)))
	rs, err := interleaved(ctx, 128, r.o.warmup, r.o.duration, rounds, []scenario{s}, nil)
	for _, x := range rs {
		for k, v := range x.CPUUsPerRequest {
			if strings.HasPrefix(k, "api-") {
				x.CPUUsPerRequest["api"] += v
				delete(x.CPUUsPerRequest, k)
			}
		}
		x.Note = strings.TrimPrefix(x.Note+"; ", "; ") + fmt.Sprintf("three api instances, %d database connections each", r.o.apiDBConns)
		r.add(x)
	}
	return err
}

// halfRate measures latency at half of the closed loop's maximum:
// headroom, not saturation, is where a p99 should stay near the p50. The
// database's own floor by the same measure, submit's transaction in
// pgbench at the same rate, takes turns with it, so that both see the
// same moments of the disk. pgbench holds as many connections as the
// api's pool: with 64 it contends on its own locks and cannot carry the
// rate at all, which says nothing of the database's spread.
func (r *runner) halfRate(ctx context.Context) error {
	e := r.e
	top, ok := r.res.find("submit", 64)
	if !ok || top.Throughput == 0 {
		return errors.New("submit_half_rate needs submit at 64 clients in the same run")
	}
	rate := top.Throughput / 2
	// Each round is a whole window, not a third of one: a 99th percentile
	// of one 6 s window at a few hundred requests a second rests on its
	// 30-odd slowest, which one stall of the disk decides.
	toks, err := e.confirmMany(ctx, int(rate*(r.o.warmup+r.o.duration).Seconds())*rounds+64, false)
	if err != nil {
		return err
	}
	// Every request's due time and latency, to read the tail against time
	// (and against pgbench's log of its own).
	reqLog, err := os.Create(filepath.Join(e.work, "submit_half_rate.log")) //nolint:gosec // G304: our work directory
	if err != nil {
		return err
	}
	api := pacedScenario("submit_half_rate", rate, r.settle(ctx), e.submitEach(toks), reqLog)
	collections := e.countCollections(&api)
	// The floor's placement at the same rate over as many connections as
	// the api's pool: the spread the database itself adds at this rate.
	floor := pgbenchScenario(e.pgBin, e.floorURL, "floor_place_half_rate", floorSQL("place.sql"), r.o.apiDBConns, rate, e.work, r.floorSettle(ctx, false), nil)
	api.tails, floor.tails = true, true
	ss := []scenario{api, floor, pgbenchScenario(e.pgBin, e.dbURL, "pgbench_submit_half_rate", r.submitSQL, r.o.apiDBConns, rate, e.work, r.settle(ctx), nil)}
	rs, err := interleaved(ctx, 64, r.o.warmup*rounds, r.o.duration*rounds, rounds, ss, func(s scenario, round int, window time.Duration) func() {
		if s.name != "submit_half_rate" || round != rounds/2 {
			return func() {}
		}
		return r.cpuProfile(ctx, s.name, 64, int(window.Seconds()))
	})
	if cerr := reqLog.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The api's own collections were this tail on the machine of
	// 2026-11-30 (see docs/performance.md): the note says how many fell in
	// the measured parts.
	if n := *collections; n >= 0 {
		rs[0].Note += fmt.Sprintf("; the api's garbage collections in the measured parts: %d", n)
	}
	for _, x := range rs {
		r.add(x)
	}
	return nil
}

// countCollections makes s count the api's garbage collections in its
// measured parts into the value returned (-1 when unknown).
func (e *env) countCollections(s *scenario) *int {
	collections := 0
	measure := s.measure
	s.measure = func(ctx context.Context, warmup, d time.Duration) (window, error) {
		before := make(chan int, 1)
		go func() {
			time.Sleep(warmup)
			n, err := e.gcCycles(ctx)
			if err != nil {
				n = -1
			}
			before <- n
		}()
		w, err := measure(ctx, warmup, d)
		after, aerr := e.gcCycles(ctx)
		if n := <-before; n < 0 || aerr != nil || collections < 0 {
			collections = -1
		} else {
			collections += after - n
		}
		return w, err
	}
	return &collections
}

// memory runs the memory scenarios: a million replays (heap growth) and a
// million responses in L1 (RSS).
func (r *runner) memory(ctx context.Context) error {
	if r.want("replay_million") {
		m, x, err := r.e.replayMillion(ctx)
		if err != nil {
			return err
		}
		r.add(x)
		r.res.ReplayMillion = m
	}
	if r.want("l1_million") {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		l, err := r.e.l1Million(ctx, self)
		if err != nil {
			return err
		}
		r.res.L1Million = l
	}
	return nil
}

func (e *env) do(ctx context.Context, method, path, token string, body any, header map[string]string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.api+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// benchPromotion is the merchant's promotion with -promotion: every cart
// reaches it, and its budget is taken in each placement.
func benchPromotion() map[string]any {
	return map[string]any{
		"kind": "spend_save", "name": "bench", "funded_by": "merchant", "budget_fen": 10_000_000_000,
		"tiers": []map[string]int64{{"threshold_fen": 1000, "off_fen": 50}},
	}
}

func (e *env) seed(ctx context.Context, admin string) error {
	post := func(path string, body any, out any) error {
		st, b, err := e.do(ctx, "POST", path, admin, body, nil)
		if err != nil {
			return fmt.Errorf("POST %s: %w", path, err)
		}
		if st != 201 {
			return fmt.Errorf("POST %s: %d %s", path, st, b)
		}
		return json.Unmarshal(b, out)
	}
	var m struct {
		ID string `json:"id"`
	}
	// Every paid order gets an accept deadline, as in production, and
	// one long enough that none falls during the run: the callbacks pay
	// for writing it, and no reject's refund runs beside what is measured.
	if err := post("/admin/v1/merchants", map[string]any{"name": "Bench Kitchen", "delivery_fee_fen": 300,
		"accept_within_seconds": 7200, "accept_timeout_action": "reject"}, &m); err != nil {
		return err
	}
	e.merchant, _ = strconv.ParseInt(m.ID, 10, 64)
	for i := range 257 {
		var d struct {
			ID string `json:"id"`
		}
		name := fmt.Sprintf("Dish %03d", i)
		if i == 256 {
			name = "The Hot Dish"
		}
		if err := post("/admin/v1/merchants/"+m.ID+"/dishes", map[string]any{"name": name, "price_fen": 1000, "stock": 1_000_000}, &d); err != nil {
			return err
		}
		id, _ := strconv.ParseInt(d.ID, 10, 64)
		if i == 256 {
			e.hot = id
		} else {
			e.dishes = append(e.dishes, id)
		}
	}
	if e.o.vouchers {
		now := time.Now().UTC()
		var tpl struct {
			ID string `json:"id"`
		}
		if err := post("/admin/v1/voucher-templates", map[string]any{
			"name": "bench", "amount_fen": 100, "funded_by": "platform", "claim_from": now.Format(time.RFC3339),
			"claim_until": now.Add(24 * time.Hour).Format(time.RFC3339), "valid_days": 1, "budget": 10_000_000, "per_user_limit": 100,
		}, &tpl); err != nil {
			return err
		}
		e.voucherTpl, _ = strconv.ParseInt(tpl.ID, 10, 64)
		e.claims = map[int64]int32{}
	}
	if e.o.promotion {
		if err := post("/admin/v1/merchants/"+m.ID+"/promotions", benchPromotion(), &struct{}{}); err != nil {
			return err
		}
	}
	for i := range 64 {
		st, b, err := e.do(ctx, "POST", "/v1/auth/wx-login", "", map[string]string{"code": fmt.Sprintf("bench-%d", i)}, nil)
		if err != nil {
			return fmt.Errorf("login: %w", err)
		}
		if st != 200 {
			return fmt.Errorf("login: %d %s", st, b)
		}
		var v struct {
			Token string `json:"token"`
		}
		_ = json.Unmarshal(b, &v)
		e.users = append(e.users, v.Token)
	}
	// The users were made one after another by those logins: their ids
	// ascend in the same order.
	rows, err := e.db.Query(ctx, "SELECT id FROM users ORDER BY id")
	if err != nil {
		return err
	}
	if e.userIDs, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		return err
	}
	if len(e.userIDs) != len(e.users) {
		return fmt.Errorf("%d users in the database after %d logins", len(e.userIDs), len(e.users))
	}
	return nil
}

// prepared is a confirmed cart ready to submit.
type prepared struct {
	user  string
	token string
	key   string
	// The submit request, encoded once: the load generator shares the
	// machine, so it spends as little per request as it can.
	header http.Header
	body   []byte
}

// confirmMany confirms n distinct carts (one dish each; the hot dish when
// hot; with vouchers, each spending one) spread over the users, 16 at a
// time.
func (e *env) confirmMany(ctx context.Context, n int, hot bool) ([]prepared, error) {
	vouchers, err := e.issueVouchers(ctx, n)
	if err != nil {
		return nil, err
	}
	out := make([]prepared, n)
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := randomHex(4)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				dish := e.hot
				if !hot {
					dish = e.dishes[i%len(e.dishes)]
				}
				user := e.users[i%len(e.users)]
				var v int64
				if vouchers != nil {
					v = vouchers[i]
				}
				st, b, err := e.do(ctx, "POST", "/v1/orders/confirm", user, e.cart(dish, v, fmt.Sprintf("bench %s %d", run, i)), nil)
				if err != nil || st != 200 {
					mu.Lock()
					firstErr = errors.Join(firstErr, fmt.Errorf("confirm: %d %s: %w", st, b, err))
					mu.Unlock()
					return
				}
				var c struct {
					Token string `json:"confirm_token"`
				}
				_ = json.Unmarshal(b, &c)
				p := prepared{user: user, token: c.Token, key: fmt.Sprintf("bench-%s-%d", run, i)}
				p.body, _ = json.Marshal(map[string]string{"confirm_token": p.token})
				p.header = http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + p.user}, "Idempotency-Key": {p.key}}
				out[i] = p
			}
		})
	}
	wg.Wait()
	return out, firstErr
}

// cart is a confirm's request: one of dish, with voucher v (none when 0).
func (e *env) cart(dish, v int64, remark string) map[string]any {
	cart := map[string]any{
		"merchant_id": strconv.FormatInt(e.merchant, 10), "items": []map[string]any{{"dish_id": strconv.FormatInt(dish, 10), "qty": 1}},
		"address": map[string]string{"name": "Bench", "phone": "13800138000", "detail": "1 Bench Road"},
		"remark":  remark,
	}
	if v != 0 {
		cart["voucher_id"] = strconv.FormatInt(v, 10)
	}
	return cart
}

// confirmEach confirms the carts a submit places (one dish each, a
// voucher each with vouchers), over and over: a confirm writes nothing,
// so the same carts serve a whole run. Each user has one cart of its
// own voucher, spread over the dishes.
func (e *env) confirmEach(ctx context.Context) (op, error) {
	vouchers, err := e.issueVouchers(ctx, len(e.users))
	if err != nil {
		return nil, err
	}
	type req struct {
		header http.Header
		body   []byte
	}
	reqs := make([]req, len(e.users))
	for i, user := range e.users {
		var v int64
		if vouchers != nil {
			v = vouchers[i]
		}
		body, err := json.Marshal(e.cart(e.dishes[(i*7)%len(e.dishes)], v, "bench confirm "+strconv.Itoa(i)))
		if err != nil {
			return nil, err
		}
		reqs[i] = req{header: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + user}}, body: body}
	}
	u := e.api + "/v1/orders/confirm"
	return func(ctx context.Context, _ int, n int64) error {
		q := reqs[n%int64(len(reqs))]
		return e.post(ctx, u, q.header, q.body, http.StatusOK)
	}, nil
}

// issueVouchers gives the users n vouchers of the bench's template, the
// i-th to the user of the i-th cart, and returns their ids (nil when carts
// go without). They are written straight into the database, as the
// floor's rows are: what is measured is spending them, not claiming.
func (e *env) issueVouchers(ctx context.Context, n int) ([]int64, error) {
	if e.voucherTpl == 0 {
		return nil, nil
	}
	users, claimNos := make([]int64, n), make([]int32, n)
	for i := range n {
		users[i] = e.userIDs[i%len(e.userIDs)]
		e.claims[users[i]]++
		claimNos[i] = e.claims[users[i]]
	}
	rows, err := e.db.Query(ctx, `
		INSERT INTO vouchers (template_id, user_id, claim_no, valid_until)
		SELECT $1, u, c, now() + interval '1 day' FROM unnest($2::bigint[], $3::int[]) AS x(u, c)
		RETURNING id, user_id, claim_no`, e.voucherTpl, users, claimNos)
	if err != nil {
		return nil, fmt.Errorf("issue vouchers: %w", err)
	}
	type claim struct {
		user int64
		no   int32
	}
	byClaim := make(map[claim]int64, n)
	for rows.Next() {
		var id int64
		var c claim
		if err := rows.Scan(&id, &c.user, &c.no); err != nil {
			return nil, err
		}
		byClaim[c] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("issue vouchers: %w", err)
	}
	ids := make([]int64, n)
	for i := range n {
		ids[i] = byClaim[claim{users[i], claimNos[i]}]
	}
	return ids, nil
}

func (e *env) get(u string) op {
	return func(ctx context.Context, _ int, _ int64) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := e.client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %d", u, resp.StatusCode)
		}
		return nil
	}
}

func (e *env) submit(ctx context.Context, p prepared) error {
	return e.post(ctx, e.api+"/v1/orders", p.header, p.body, http.StatusCreated)
}

// post sends body with header (shared between requests, never written)
// and expects status want; the answer is read only when it is not.
func (e *env) post(ctx context.Context, url string, header http.Header, body []byte, want int) error {
	_, err := e.postLen(ctx, url, header, body, want)
	return err
}

// postLen is post, returning the length of the answer's body.
func (e *env) postLen(ctx context.Context, url string, header http.Header, body []byte, want int) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = header
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("POST %s: %d %.200s", url, resp.StatusCode, b)
	}
	return io.Copy(io.Discard, resp.Body)
}

func (e *env) submitEach(ps []prepared) op {
	return func(ctx context.Context, _ int, n int64) error {
		if n >= int64(len(ps)) {
			return errExhausted
		}
		return e.submit(ctx, ps[n])
	}
}

// submitAcross submits each prepared cart once, to the instances at
// bases in turn.
func (e *env) submitAcross(ps []prepared, bases []string) op {
	return func(ctx context.Context, _ int, n int64) error {
		if n >= int64(len(ps)) {
			return errExhausted
		}
		return e.post(ctx, bases[n%int64(len(bases))]+"/v1/orders", ps[n].header, ps[n].body, http.StatusCreated)
	}
}

func (e *env) replay(p prepared) op {
	return func(ctx context.Context, _ int, _ int64) error { return e.submit(ctx, p) }
}

// notification is a signed, encrypted v3 callback ready to send.
type notification struct {
	header http.Header
	body   []byte
}

// notifications creates n unpaid orders of two lines with an open
// payment each (as a prepay leaves them) and signs a TRANSACTION.SUCCESS notification for
// each, as the platform would send it.
func (e *env) notifications(ctx context.Context, n int) ([]notification, error) {
	rows, err := e.db.Query(ctx, `WITH o AS (
	    INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
	      items_total_fen, delivery_fee_fen, total_fen, address, pay_deadline, created_at, updated_at)
	    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint * 1000000 + g, (SELECT min(id) FROM users), $1,
	      sha256(convert_to('i' || g || clock_timestamp(), 'UTF8')), sha256(convert_to('c' || g || clock_timestamp(), 'UTF8')), 1, 'SM3',
	      'PENDING_PAYMENT', 1000, 300, 1300, '{"name":"B","phone":"1","detail":"d"}', now() + interval '1 hour', now(), now()
	    FROM generate_series(1, $2) g RETURNING id),
	  h AS (INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) SELECT id, NULL, 'PENDING_PAYMENT', 1, 'user:bench' FROM o),
	  i AS (INSERT INTO order_items (order_id, line, dish_id, name, qty, unit_price_fen, line_total_fen)
	    SELECT o.id, l.line, d.id, d.name, l.qty, l.price, l.qty * l.price
	    FROM o, (VALUES (0::smallint, 2, 300::bigint, 0), (1::smallint, 1, 400::bigint, 1)) AS l(line, qty, price, pick),
	      LATERAL (SELECT id, name FROM dishes WHERE merchant_id = $1 ORDER BY id OFFSET l.pick LIMIT 1) d)
	  INSERT INTO payments (order_id, channel, mchid, appid, out_trade_no, amount_fen, prepay_id, prepay_expires_at)
	  SELECT id, $5, $3, $4, 'T' || id || '-1', 1300, 'wx-prepay-' || id, now() + interval '1 hour' FROM o
	  RETURNING order_id`, e.merchant, n, benchMchID, "wxd0000000000000sim", payment.Channel)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]notification, len(ids))
	var wg sync.WaitGroup
	var next atomic.Int64
	var firstErr atomic.Value
	for range 2 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				nt, err := e.signNotification(ids[i])
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				out[i] = nt
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return nil, err
	}
	return out, nil
}

func (e *env) signNotification(orderID int64) (notification, error) {
	return e.signPayment(orderID, 1300)
}

// signPayment is WeChat Pay's TRANSACTION.SUCCESS notification of the
// order's first payment, of amount fen, signed as the platform signs it.
func (e *env) signPayment(orderID, amount int64) (notification, error) {
	plain, _ := json.Marshal(map[string]any{
		"appid": "wxd0000000000000sim", "mchid": benchMchID, "out_trade_no": payment.OutTradeNo(orderID, 1),
		"transaction_id": "42" + strconv.FormatInt(orderID, 10), "trade_type": "JSAPI", "trade_state": "SUCCESS",
		"success_time": time.Now().Format(time.RFC3339), "payer": map[string]string{"openid": "sim-bench"},
		"amount": map[string]any{"total": amount, "payer_total": amount, "currency": "CNY", "payer_currency": "CNY"},
	})
	nonce := randomHex(6)
	ct, err := wxpay.EncryptAEAD(e.keys.APIv3Key, nonce, "transaction", plain)
	if err != nil {
		return notification{}, err
	}
	body, _ := json.Marshal(wxpay.Notification{ID: "EV-" + randomHex(8), CreateTime: time.Now().Format(time.RFC3339), EventType: "TRANSACTION.SUCCESS",
		ResourceType: "encrypt-resource", Summary: "paid", Resource: wxpay.Resource{OriginalType: "transaction", Algorithm: "AEAD_AES_256_GCM",
			Ciphertext: ct, AssociatedData: "transaction", Nonce: nonce}})
	ts, n := strconv.FormatInt(time.Now().Unix(), 10), randomHex(8)
	sig, err := wxpay.SignSHA256WithRSA(e.keys.Platform, []byte(ts+"\n"+n+"\n"+string(body)+"\n"))
	if err != nil {
		return notification{}, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Wechatpay-Timestamp", ts)
	h.Set("Wechatpay-Nonce", n)
	h.Set("Wechatpay-Serial", e.keys.PlatformSerial)
	h.Set("Wechatpay-Signature", sig)
	return notification{header: h, body: body}, nil
}

func (e *env) callback(ctx context.Context, nt notification) error {
	return e.post(ctx, e.api+"/v1/payments/wechat/notify", nt.header, nt.body, http.StatusNoContent)
}

func (e *env) callbackEach(ns []notification) op {
	return func(ctx context.Context, _ int, n int64) error {
		if n >= int64(len(ns)) {
			return errExhausted
		}
		return e.callback(ctx, ns[n])
	}
}

func (e *env) callbackSame(nt notification) op {
	return func(ctx context.Context, _ int, _ int64) error { return e.callback(ctx, nt) }
}

// seedPgbenchPayments writes n unpaid orders with open payments PB1..PBn
// for the pgbench callback script, and its sequence.
func (e *env) seedPgbenchPayments(ctx context.Context, n int) error {
	_, err := e.db.Exec(ctx, `
	  CREATE SEQUENCE bench_callback_seq;
	  WITH o AS (
	    INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
	      items_total_fen, delivery_fee_fen, total_fen, address, pay_deadline, created_at, updated_at)
	    SELECT 900000000000000000 + g, (SELECT min(id) FROM users), (SELECT min(id) FROM merchants),
	      sha256(convert_to('pi' || g, 'UTF8')), sha256(convert_to('pc' || g, 'UTF8')), 1, 'SM3',
	      'PENDING_PAYMENT', 1000, 300, 1300, '{}', now() + interval '1 hour', now(), now()
	    FROM generate_series(1, `+strconv.Itoa(n)+`) g RETURNING id)
	  INSERT INTO payments (order_id, channel, mchid, appid, out_trade_no, amount_fen, prepay_id)
	  SELECT id, '`+payment.Channel+`', '`+benchMchID+`', 'wxd0000000000000sim', 'PB' || (id - 900000000000000000), 1300, 'p' || id FROM o;
	  ANALYZE;`)
	return err
}

// rssMB is a process's resident set size.
func rssMB(pid int) float64 { return procStatusMB(pid, "VmRSS:") }
