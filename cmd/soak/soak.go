package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/courier"
	"github.com/takeout/takeout/internal/couriersim"
	"github.com/takeout/takeout/internal/lab"
	"github.com/takeout/takeout/internal/lab/ha"
	"github.com/takeout/takeout/internal/printsim"
	"github.com/takeout/takeout/internal/wxsim"
)

// settings of the instances that the checker needs too.
const (
	autoCompleteAfter = 15 * time.Second
	deadlineGrace     = 45 * time.Second
)

// soak sets everything up, runs the workload and the faults, settles,
// checks, and returns the report.
func soak(ctx context.Context, o options, logf func(string, ...any)) (*report, error) {
	started := time.Now()
	st, err := startStack(ctx, &o, logf)
	defer func() { st.close(logf) }() // st holds what was started, even on an error
	if err != nil {
		return nil, err
	}
	d := &driver{o: o, insts: st.insts, wxsimURL: st.wxsimURL, log: st.clog,
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}}}
	tokens := auth.NewTokens([]byte(st.sessionSecret), []byte(st.staffSecret), time.Hour, time.Now)
	admin, _, err := tokens.IssueStaff("soak-admin", auth.Role{Admin: true}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	d.wallets = newWallets(admin, o.users)
	if err := d.seed(ctx, admin, tokens); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	initial, err := stockNow(ctx, st.direct)
	if err != nil {
		return nil, err
	}
	bs, err := startBoards(ctx, d)
	if err != nil {
		return nil, err
	}
	run := st.runWorkload(ctx, o, d, logf)
	settled := st.settle(ctx, o, d, logf)
	if err := ctx.Err(); err != nil {
		bs.close()
		return nil, err
	}
	// The boards must have every paid order while the instances still run.
	boardStats, boardMissed, boardRepeated, err := bs.verify(ctx, st.direct, 60*time.Second)
	st.stopInstances()
	stopped := time.Now()
	if err != nil {
		return nil, err
	}
	if err := st.clog.close(); err != nil {
		return nil, err
	}
	acks, err := readAcks(filepath.Join(st.workDir, "client.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("client log: %w", err)
	}
	f, err := check(ctx, st.direct, acks, initial, run.restocked, run.claimed, deadlines{grace: deadlineGrace, autoComplete: autoCompleteAfter, stopped: stopped})
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	kitchen, err := st.checkKitchen(ctx, d, &f)
	if err != nil {
		return nil, err
	}
	f.add(invBoardRepeated, boardStats.Repeats, "")
	for _, ex := range boardRepeated {
		f.add(invBoardRepeated, 0, ex)
	}
	f.add(invBoardMissed, boardStats.Missed, "")
	for _, ex := range boardMissed {
		f.add(invBoardMissed, 0, ex)
	}
	if err := recoveries(ctx, st.direct, run.inj.start, run.inj.timeline); err != nil {
		return nil, fmt.Errorf("recoveries: %w", err)
	}
	rep := st.report(o, d, run, f, acks)
	rep.Boards = boardStats
	rep.Started, rep.SettleS = started, settled.Seconds()
	st.keepPG = rep.ViolationsTotal > 0
	if rep.OrdersByStatus, err = ordersByStatus(ctx, st.direct); err != nil {
		return nil, err
	}
	for _, n := range rep.OrdersByStatus {
		rep.OrdersCreated += n
	}
	discounts, err := discountCounts(ctx, st.direct)
	if err != nil {
		return nil, fmt.Errorf("discount counts: %w", err)
	}
	maps.Copy(rep.Workload, discounts)
	maps.Copy(rep.Workload, kitchen)
	return rep, nil
}

// stack is what a soak runs on: a private PostgreSQL and Redis behind
// toxiproxy, wxsim, a webhook receiver, the api instances and the
// callbacks' gateway, and the client log.
type stack struct {
	workDir, pgDir string
	pg             *postgres
	rs             *redisServer
	px             *proxies
	rc             *ha.RedisCluster // -ha
	pat            *ha.Patroni      // -ha
	wxsimURL       string
	webhooks       atomic.Int64
	insts          []*instance
	gw             *gateway
	clog           *clientLog
	direct         *pgxpool.Pool // the checker's own connections, past the proxy

	appSecret, sessionSecret, staffSecret string

	closers []func() // run in reverse by close
	// keepPG keeps the PostgreSQL data directory for inspection.
	keepPG bool

	// runStart is when the workload started; backlog holds the samples
	// of what was left to do, taken during the load and the settle.
	runStart time.Time
	backlog  []backlogSample
}

func (st *stack) onClose(f func()) { st.closers = append(st.closers, f) }

// close stops what was started, last first, and removes the PostgreSQL
// data directory unless it is kept.
func (st *stack) close(logf func(string, ...any)) {
	for i := len(st.closers) - 1; i >= 0; i-- {
		st.closers[i]()
	}
	if st.pgDir == "" {
		return
	}
	if st.keepPG {
		logf("invariants broken: the PostgreSQL data directory stays for inspection: %s (pg_ctl -D %s/pg start)", st.pgDir, st.pgDir)
		return
	}
	os.RemoveAll(st.pgDir) //nolint:gosec // G703: the temporary directory made for this run
}

// startStack starts everything the workload runs against; o's binaries
// are made absolute. On an error, the stack holds what was started.
func startStack(ctx context.Context, o *options, logf func(string, ...any)) (*stack, error) {
	st := &stack{appSecret: randomSecret(), sessionSecret: randomSecret(), staffSecret: randomSecret()}
	var err error
	if st.workDir, err = filepath.Abs(o.workDir); err != nil {
		return st, err
	}
	if err := os.MkdirAll(st.workDir, 0o750); err != nil {
		return st, err
	}
	for _, bin := range []*string{&o.apiBin, &o.wxsimBin} {
		if *bin, err = filepath.Abs(*bin); err != nil {
			return st, err
		}
		if _, err := os.Stat(*bin); err != nil { //nolint:gosec // G703: the binaries the operator names
			return st, fmt.Errorf("%s: %w (build it: make build)", *bin, err)
		}
	}
	start := st.startData
	if o.ha {
		start = st.startHA
	}
	if err := start(ctx, o.pgBin, logf); err != nil {
		return st, err
	}
	wxsimURL, wxEnv, stopWxsim, err := startWxsim(ctx, o.wxsimBin, st.workDir, st.appSecret)
	if err != nil {
		return st, err
	}
	st.wxsimURL = wxsimURL
	st.onClose(stopWxsim)
	if err := st.startInstances(ctx, *o, wxEnv); err != nil {
		return st, err
	}
	logf("%d api instances ready; wxsim %s; callback gateway %s", len(st.insts), wxsimURL, st.gw.url)
	if err := setPrintFaults(ctx, &http.Client{Timeout: 10 * time.Second}, wxsimURL, printFaults(st.gw.url+"/v1/printers/yilianyun/callback")); err != nil {
		return st, err
	}
	if err := setCourierFaults(ctx, &http.Client{Timeout: 10 * time.Second}, wxsimURL, courierFaults(st.gw.url)); err != nil {
		return st, err
	}
	if st.clog, err = openClientLog(filepath.Join(st.workDir, "client.jsonl")); err != nil {
		return st, err
	}
	st.onClose(func() { _ = st.clog.close() })
	if st.direct, err = pgxpool.New(ctx, st.dbURL("takeout")); err != nil {
		return st, err
	}
	st.onClose(st.direct.Close)
	return st, nil
}

// startData starts the private PostgreSQL (the postgres user must reach
// its directory) and Redis, and the proxies the faults act on.
func (st *stack) startData(ctx context.Context, pgBinGiven string, logf func(string, ...any)) error {
	pgBin, err := lab.PGBinDir(pgBinGiven)
	if err != nil {
		return err
	}
	if st.pgDir, err = os.MkdirTemp("", "takeout-soak-"); err != nil {
		return err
	}
	if st.pg, err = startPostgres(ctx, pgBin, st.pgDir, 300); err != nil {
		return err
	}
	st.onClose(func() {
		st.pg.stop()
		copyFile(st.pg.logFile, filepath.Join(st.workDir, "postgres.log"))
	})
	if err := createDatabase(ctx, st.dbURL("postgres"), "takeout"); err != nil {
		return err
	}
	if st.rs, err = startRedis(ctx, st.workDir); err != nil {
		return err
	}
	st.onClose(st.rs.kill)
	if st.px, err = startProxies(fmt.Sprintf("127.0.0.1:%d", st.pg.port), st.rs.addr()); err != nil {
		return err
	}
	st.onClose(st.px.stop)
	logf("PostgreSQL :%d (proxy %s), Redis %s (proxy %s), work directory %s", st.pg.port, st.px.pg[0].Listen, st.rs.addr(), st.px.redis[0].Listen, st.workDir)
	return nil
}

// startHA starts the HA stack instead: a Redis Cluster of three masters
// with a replica each, and three PostgreSQL members under Patroni with
// synchronous replication, on three etcd members. The instances reach
// each server through a proxy of its own (the nodes announce theirs, so
// the cluster's redirections and its replicas go through them too; the
// cluster bus, Patroni and etcd do not): the HA faults are the servers'
// own deaths, and the network's faults act on every proxy of an engine
// at once.
func (st *stack) startHA(ctx context.Context, pgBin string, logf func(string, ...any)) error {
	var err error
	if st.pgDir, err = os.MkdirTemp("", "takeout-soak-ha-"); err != nil {
		return err
	}
	st.px = newProxies()
	st.onClose(st.px.stop)
	if st.rc, err = ha.StartRedisClusterBehind(ctx, filepath.Join(st.workDir, "redis"), 3, 1, st.px.addRedis); st.rc != nil {
		st.onClose(st.rc.Stop)
	}
	if err != nil {
		return err
	}
	st.pat, err = ha.StartPatroni(ctx, ha.PatroniOptions{Dir: st.pgDir, PGBin: pgBin, Members: 3, MaxConnections: 300})
	if st.pat != nil {
		st.onClose(func() {
			st.pat.Stop()
			for _, log := range []string{"pg1", "pg2", "pg3", "etcd1", "etcd2", "etcd3"} {
				copyFile(filepath.Join(st.pgDir, log+".log"), filepath.Join(st.workDir, log+".log"))
			}
		})
	}
	if err != nil {
		return err
	}
	for _, a := range st.pat.MemberAddrs() {
		if _, err := st.px.addPG(a); err != nil {
			return err
		}
	}
	if err := createDatabase(ctx, st.dbURL("postgres"), "takeout"); err != nil {
		return err
	}
	logf("Redis Cluster %s; Patroni %s (the instances' %s); work directory %s", st.rc.URL(), st.pat.URL("takeout"), st.apiDatabaseURL(), st.workDir)
	return nil
}

// dbURL is the checker's URL of database db: the primary, whichever
// member it is.
func (st *stack) dbURL(db string) string {
	if st.pat != nil {
		return st.pat.URL(db)
	}
	return st.pg.url(db)
}

// apiDatabaseURL is the instances' URL: through the proxies, to whichever
// member is the primary with the HA stack.
func (st *stack) apiDatabaseURL() string {
	if st.pat != nil {
		return fmt.Sprintf("postgres://postgres@%s/takeout?sslmode=disable&target_session_attrs=read-write&connect_timeout=5", strings.Join(addrs(st.px.pg), ","))
	}
	return fmt.Sprintf("postgres://postgres@%s/takeout?sslmode=disable&connect_timeout=5", st.px.pg[0].Listen)
}

func (st *stack) apiRedisURL() string {
	if st.rc != nil {
		return st.rc.URL()
	}
	return "redis://" + st.px.redis[0].Listen + "/0"
}

// startInstances starts the webhook receiver, the gateway and the api
// instances, each ready before the next starts.
func (st *stack) startInstances(ctx context.Context, o options, wxEnv map[string]string) error {
	hook, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		st.webhooks.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		return err
	}
	st.onClose(hook.Close)
	st.insts = make([]*instance, o.instances)
	// Each instance listens on two ports chosen here, all different: an
	// operations listener left to the kernel (port 0) was once given the
	// port just chosen for an instance's HTTP, and that instance could not
	// start.
	taken := map[int]bool{}
	pick := func() (string, error) {
		for {
			port, err := lab.FreePort()
			if err != nil {
				return "", err
			}
			if !taken[port] {
				taken[port] = true
				return fmt.Sprintf("127.0.0.1:%d", port), nil
			}
		}
	}
	for i := range st.insts {
		addr, err := pick()
		if err != nil {
			return err
		}
		ops, err := pick()
		if err != nil {
			return err
		}
		st.insts[i] = &instance{n: i, addr: addr, ops: ops, bin: o.apiBin, logPath: filepath.Join(st.workDir, fmt.Sprintf("api-%d.log", i))}
	}
	if st.gw, err = startGateway(st.insts); err != nil {
		return err
	}
	st.onClose(func() { _ = st.gw.srv.Close() })
	env := st.apiEnv(o, hook.url)
	for k, v := range wxEnv {
		env[k] = v
	}
	st.onClose(func() {
		for _, in := range st.insts {
			in.kill()
		}
	})
	for i, in := range st.insts {
		in.env = instanceEnv(env, in.addr, in.ops)
		if err := in.start(ctx); err != nil {
			return fmt.Errorf("instance %d: %w (log: %s)", i, err, in.logPath)
		}
	}
	return nil
}

// apiEnv is the instances' common configuration.
func (st *stack) apiEnv(o options, webhookURL string) map[string]string {
	return map[string]string{
		"TAKEOUT_DATABASE_URL":               st.apiDatabaseURL(),
		"TAKEOUT_DATABASE_MAX_CONNS":         "16",
		"TAKEOUT_REDIS_URL":                  st.apiRedisURL(),
		"TAKEOUT_REDIS_PREFIX":               "soak:",
		"TAKEOUT_SESSION_SECRET":             st.sessionSecret,
		"TAKEOUT_STAFF_SECRET":               st.staffSecret,
		"TAKEOUT_CONFIRM_SECRET":             randomSecret(),
		"TAKEOUT_WECHAT_API_BASE":            st.wxsimURL,
		"TAKEOUT_WECHAT_APP_SECRET":          st.appSecret,
		"TAKEOUT_WXPAY_API_BASE":             st.wxsimURL,
		"TAKEOUT_WXPAY_NOTIFY_URL":           st.gw.url + "/v1/payments/wechat/notify",
		"TAKEOUT_WXPAY_RECONCILE_INTERVAL":   "5s",
		"TAKEOUT_WXPAY_QUERY_AFTER":          "5s",
		"TAKEOUT_WXPAY_REFUND_GAP":           refundGap.String(),
		"TAKEOUT_AFTER_SALES_RESPOND_WITHIN": afterSalesRespondWithin,
		// The service-provider mode: every shop a sub-merchant (seed),
		// its payments shared on completion, or at a compressed deadline.
		"TAKEOUT_WXPAY_MODE":                   "partner",
		"TAKEOUT_SHARING_AFTER_PAY":            sharingAfterPay.String(),
		"TAKEOUT_SHARING_FINISH_AFTER":         "2m",
		"TAKEOUT_SHARING_SWEEP_INTERVAL":       "5s",
		"TAKEOUT_SHARING_POLL":                 "500ms",
		"TAKEOUT_WEBHOOK_URL":                  webhookURL,
		"TAKEOUT_WEBHOOK_SECRET":               randomSecret(),
		"TAKEOUT_WEBHOOK_RETRY_BASE":           "1s",
		"TAKEOUT_ORDER_PAY_WINDOW":             o.payWindow.String(),
		"TAKEOUT_ORDER_AUTO_COMPLETE_AFTER":    autoCompleteAfter.String(),
		"TAKEOUT_JOB_POLL_INTERVAL":            "200ms",
		"TAKEOUT_ORDER_TIMEOUT_SWEEP_INTERVAL": "1s",
		"TAKEOUT_JOB_RETRY_MAX_DELAY":          "5s",
		"TAKEOUT_JOB_RESCUE_AFTER":             "20s", // jobs of SIGKILLed instances
		"TAKEOUT_RATE_LIMIT_IP":                "0",   // every simulated user shares 127.0.0.1
		"TAKEOUT_RATE_LIMIT_USER":              "0",
		"TAKEOUT_SHUTDOWN_TIMEOUT":             "10s",
		"TAKEOUT_LOG_LEVEL":                    "info",
		"TAKEOUT_IDEMPOTENCY_COALESCE_WAIT":    "2s",
		"TAKEOUT_IDEMPOTENCY_INFLIGHT_TTL":     "45s",
		"TAKEOUT_HTTP_WRITE_TIMEOUT":           "30s",
		"TAKEOUT_WORKER_LEASE_TTL":             "30s",
		"TAKEOUT_CATALOG_CACHE_TTL":            "60s",
		"TAKEOUT_IDEMPOTENCY_PRUNE_INTERVAL":   "10m",
		// The printer providers, in wxsim, with their faults (printFaults).
		"TAKEOUT_YILIANYUN_API_BASE":  st.wxsimURL + "/yilianyun",
		"TAKEOUT_FEIE_API_BASE":       st.wxsimURL + "/feie",
		"TAKEOUT_FEIE_CALLBACK_URL":   st.gw.url + "/v1/printers/feie/callback",
		"TAKEOUT_PRINT_TIMEOUT":       "2s",
		"TAKEOUT_PRINT_CONFIRM_AFTER": "5s",
		// The courier providers, in wxsim, with their faults
		// (courierFaults); their riders move a step a second.
		"TAKEOUT_DADA_API_BASE":          st.wxsimURL + "/dada",
		"TAKEOUT_MEITUAN_API_BASE":       st.wxsimURL + "/meituan",
		"TAKEOUT_COURIER_CALLBACK_BASE":  st.gw.url,
		"TAKEOUT_COURIER_TIMEOUT":        "2s",
		"TAKEOUT_COURIER_ASSIGN_WITHIN":  "6s",
		"TAKEOUT_COURIER_LATE_AFTER":     "4s",
		"TAKEOUT_COURIER_SWEEP_INTERVAL": "1s",
		// Every dispatched or collected order's payment shipped at wxsim.
		"TAKEOUT_WECHAT_SHIPPING_UPLOAD": "true",
	}
}

// workloadRun is what the run phase did.
type workloadRun struct {
	inj       *injector
	restocked *restocks
	claimed   *claims
	length    time.Duration
}

// runWorkload runs the users, the staff, the restocker and the faults for
// o.duration, then waits for them to stop.
func (st *stack) runWorkload(ctx context.Context, o options, d *driver, logf func(string, ...any)) workloadRun {
	logf("workload: %d users, duplicate factor %d, %s; faults every %s: %v", o.users, o.dup, o.duration, o.faultEvery, o.faults)
	runStart := time.Now()
	inj := &injector{o: o, pg: st.pg, redis: st.rs, px: st.px, rc: st.rc, pat: st.pat, direct: st.direct, insts: st.insts, start: runStart, logf: logf, counts: map[string]int{}}
	stop := make(chan struct{})
	faultCtx, stopFaults := context.WithCancel(ctx)
	var faultsDone sync.WaitGroup
	faultsDone.Go(func() { inj.run(faultCtx) })
	var users sync.WaitGroup
	for n := range o.users {
		users.Go(func() { d.user(ctx, stop, n) })
	}
	for _, m := range d.merchants {
		users.Go(func() { d.staff(ctx, stop, m) })
	}
	restocked := newRestocks(d.hotDishID())
	users.Go(func() { d.restocker(ctx, stop, d.merchants[0].Staff, restocked) })
	claimed := newClaims()
	users.Go(func() { d.claimStorms(ctx, stop, claimed) })
	progress := time.NewTicker(15 * time.Second)
	// About 40 samples of the backlog over the run, at most one each 15 s.
	backlog := time.NewTicker(max(15*time.Second, o.duration/40))
	deadline := time.After(o.duration)
loop:
	for {
		select {
		case <-deadline:
			break loop
		case <-ctx.Done():
			break loop
		case <-progress.C:
			c := st.clog.snapshot()
			logf("%.0fs: %d submits, %d purchases, %d callbacks", time.Since(runStart).Seconds(), total(c, "submit", nil), d.purchases.Load(), d.callbacks.Load())
		case <-backlog.C:
			st.sampleBacklog(ctx, runStart, "load", logf)
		}
	}
	progress.Stop()
	backlog.Stop()
	st.runStart = runStart
	close(stop)
	stopFaults()
	faultsDone.Wait()
	users.Wait()
	run := workloadRun{inj: inj, restocked: restocked, claimed: claimed, length: time.Since(runStart)}
	logf("workload over after %.0fs; settling (at most %s)", run.length.Seconds(), o.settle)
	return run
}

// settle lets deadlines, retries and refunds play out (at most o.settle);
// it returns how long it took. The instances keep running.
func (st *stack) settle(ctx context.Context, o options, d *driver, logf func(string, ...any)) time.Duration {
	settleStart := time.Now()
	// The printers' providers recover: the tickets left go out.
	if err := setPrintFaults(ctx, d.client, st.wxsimURL, printsim.Config{}); err != nil {
		logf("settle: %v", err)
	}
	// So do the couriers': the riders deliver what is left.
	if err := setCourierFaults(ctx, d.client, st.wxsimURL, couriersim.Config{MeituanCallbackURL: st.gw.url + "/v1/couriers/meituan/callback"}); err != nil {
		logf("settle: %v", err)
	}
	bgDone := make(chan struct{})
	go func() { d.background.Wait(); close(bgDone) }()
	st.sampleBacklog(ctx, st.runStart, "settle", logf)
	lastSample := time.Now()
	for time.Since(settleStart) < o.settle && ctx.Err() == nil {
		if time.Since(lastSample) >= max(10*time.Second, o.settle/12) {
			st.sampleBacklog(ctx, st.runStart, "settle", logf)
			lastSample = time.Now()
		}
		open, err := openWork(ctx, st.direct)
		if err != nil {
			logf("settle: %v", err)
		}
		select {
		case <-bgDone:
			if err == nil && open == 0 {
				return time.Since(settleStart)
			}
		default:
		}
		sleep(ctx, 2*time.Second)
	}
	return time.Since(settleStart)
}

// sampleBacklog records the backlog now in st.backlog.
func (st *stack) sampleBacklog(ctx context.Context, runStart time.Time, phase string, logf func(string, ...any)) {
	s, err := sampleBacklog(ctx, st.direct, time.Since(runStart), phase)
	if err != nil {
		logf("backlog: %v", err)
		return
	}
	due := 0
	for _, n := range s.JobsDue {
		due += n
	}
	logf("%.0fs backlog (%s): %d refunding, %d refunds, %d shares, %d tickets open; %d jobs due, %d later, %d running",
		s.AtS, phase, s.Open["refunding"], s.Open["refunds"], s.Open["shares"], s.Open["tickets"], due, s.JobsLater, s.JobsRunning)
	st.backlog = append(st.backlog, s)
}

func (st *stack) stopInstances() {
	for _, in := range st.insts {
		in.stop()
	}
}

// report builds the report of a run from the client log and the findings.
func (st *stack) report(o options, d *driver, run workloadRun, f findings, acks []ack) *report {
	counts := st.clog.snapshot()
	faults, timeline := run.inj.results()
	redisMode, pgMode := "standalone", "single"
	if st.rc != nil {
		redisMode = "cluster"
	}
	if st.pat != nil {
		pgMode = "patroni"
	}
	rs, cl := run.restocked, run.claimed
	rep := &report{
		Violations: f.violations, Instances: o.instances, DurationS: run.length.Seconds(), Faults: faults,
		RedisMode: redisMode, PGMode: pgMode,
		Recovery:       faultStats(timeline, func(e faultEvent) *float64 { return e.RecoveryS }),
		Outage:         faultStats(timeline, func(e faultEvent) *float64 { return e.OutageS }),
		SubmitAttempts: total(counts, "submit", nil), CallbacksSent: d.callbacks.Load(),
		Users: o.users, DupFactor: o.dup, HotStock: o.hotStock,
		Requests: counts, Examples: f.examples, DeadJobs: f.deadJobs, JobsRetrying: f.retrying, FaultTimeline: timeline, Backlog: st.backlog,
		Machine: lab.HostFacts(), ClientLog: filepath.Join(st.workDir, "client.jsonl"),
		Workload: map[string]int{
			"purchases":                      int(d.purchases.Load()),
			"confirm_attempts":               total(counts, "confirm", nil),
			"submit_2xx":                     total(counts, "submit", is2xx),
			"submit_acknowledged_order":      len(acks),
			"sim_payments":                   int(d.simPays.Load()),
			"accepts_tapped_at_the_deadline": int(d.lateTaps.Load()),
			"cancel_attempts":                total(counts, "cancel", nil),
			"webhook_deliveries":             int(st.webhooks.Load()),
			"restock_sets":                   rs.sets,
			"restock_adjustments_sent":       len(rs.sent),
			"restock_adjustments_acked":      len(rs.acked),
			"restocks_refused":               rs.refusals["stock-changed"] + rs.refusals["stock-held"],
			"voucher_templates":              cl.templates,
			"claim_keys_sent":                cl.sent,
			"claim_keys_acked":               cl.acked(),
			"claims_limit_reached":           cl.refusals["voucher-limit-reached"],
			"claims_budget_spent":            cl.refusals["voucher-budget-spent"],
			"voucher_orders_acked":           int(d.wallets.spent.Load()),
			"wallet_templates":               d.wallets.issued(),
		},
	}
	if rep.DeadJobs == nil {
		rep.DeadJobs = []deadJob{}
	}
	for _, n := range f.violations {
		rep.ViolationsTotal += n
	}
	return rep
}

// instanceEnv is this process's environment without TAKEOUT_* settings,
// plus the instance's own and its two listeners.
func instanceEnv(common map[string]string, addr, ops string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TAKEOUT_") {
			out = append(out, kv)
		}
	}
	for k, v := range common {
		out = append(out, k+"="+v)
	}
	return append(out, "TAKEOUT_HTTP_ADDR="+addr, "TAKEOUT_OPS_ADDR="+ops)
}

func createDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// The least time between two refunds of a payment: at wxsim, and (a
// little more, as the API's default is a second over WeChat's minute)
// at the API.
const (
	wxsimRefundGap = 2 * time.Second
	refundGap      = 3 * time.Second
)

// The least age of a payment before it is shared, compressed the same
// way: at wxsim (WeChat's minute), and more at the API (a second more
// for paid_at, WeChat's success_time, being whole seconds, as the API's
// default of 61s has it, and a half for the run's clocks).
const (
	wxsimSharingMinAge = 2 * time.Second
	sharingAfterPay    = 3500 * time.Millisecond
)

// startWxsim runs wxsim with its keys in the work directory and returns
// its URL and the TAKEOUT_WXPAY_* settings it wrote for the API.
func startWxsim(ctx context.Context, bin, workDir, appSecret string) (string, map[string]string, func(), error) {
	port, err := lab.FreePort()
	if err != nil {
		return "", nil, nil, err
	}
	dir := filepath.Join(workDir, "wxsim")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	proc, err := lab.Start(ctx, filepath.Join(workDir, "wxsim.log"), bin,
		append(os.Environ(), "TAKEOUT_WXSIM_ADDR="+addr, "TAKEOUT_WXSIM_DIR="+dir, "TAKEOUT_WECHAT_APP_SECRET="+appSecret, "TAKEOUT_WXSIM_COURIER_STEP=1s"))
	if err != nil {
		return "", nil, nil, err
	}
	stop := proc.Kill
	if err := lab.WaitTCP(ctx, addr, 30*time.Second); err != nil {
		stop()
		return "", nil, nil, fmt.Errorf("wxsim: %w", err)
	}
	env, err := wxsim.ReadAPIEnv(dir)
	if err != nil {
		stop()
		return "", nil, nil, fmt.Errorf("wxsim api.env: %w", err)
	}
	// The run's time is compressed (pay windows of seconds): so is the
	// minute between two refunds of a payment, to wxsimRefundGap, and the
	// API keeps refundGap.
	gap := int(wxsimRefundGap / time.Millisecond)
	body, _ := json.Marshal(wxsim.RefundRules{GapMS: &gap})
	resp, err := http.Post("http://"+addr+"/sim/refund-rules", "application/json", bytes.NewReader(body)) //nolint:gosec,noctx // G107: the soak's own wxsim
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
	}
	if err != nil {
		stop()
		return "", nil, nil, fmt.Errorf("wxsim refund rules: %w", err)
	}
	// So is WeChat Pay's minute before a payment may be shared.
	body, _ = json.Marshal(wxsim.SharingConfig{MinAgeMS: int(wxsimSharingMinAge / time.Millisecond)})
	resp, err = http.Post("http://"+addr+"/sim/sharing", "application/json", bytes.NewReader(body)) //nolint:gosec,noctx // G107: the soak's own wxsim
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
	}
	if err != nil {
		stop()
		return "", nil, nil, fmt.Errorf("wxsim sharing: %w", err)
	}
	return "http://" + addr, env, stop, nil
}

// server is a small HTTP server on a loopback port.
type server struct {
	url string
	srv *http.Server
}

func (s *server) Close() { _ = s.srv.Close() }

func serve(h http.Handler) (*server, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// seed creates the merchants and their menus through the admin API, and
// staff tokens for each merchant.
func (d *driver) seed(ctx context.Context, admin string, tokens *auth.Tokens) error {
	post := func(path string, body any, out any) error {
		r := d.call(ctx, entry{Op: "seed", Method: "POST", Path: path}, admin, body, nil)
		if r.status != http.StatusCreated {
			return fmt.Errorf("POST %s: %d %s: %w", path, r.status, r.body, r.err)
		}
		return json.Unmarshal(r.body, out)
	}
	for i := range 3 {
		var m struct {
			ID string `json:"id"`
		}
		if err := post("/admin/v1/merchants", merchantRules(i, d.o.duration, time.Now().UTC()), &m); err != nil {
			return err
		}
		id, _ := strconv.ParseInt(m.ID, 10, 64)
		staff, _, err := tokens.IssueStaff(fmt.Sprintf("soak-staff-%d", i), auth.Role{MerchantID: id}, 24*time.Hour)
		if err != nil {
			return err
		}
		mer := merchant{ID: m.ID, Staff: staff, ByDistance: i == 2, Lat: 22.5, Lng: 113.9, Pickup: fulfilmentOf(i) != nil,
			Courier: courierDispatchOf(i) != courier.DispatchOff}
		for j := range 5 {
			var di dish
			if err := post("/admin/v1/merchants/"+m.ID+"/dishes",
				map[string]any{"name": fmt.Sprintf("Dish %d-%d", i, j), "price_fen": 800 + 150*j, "stock": 1_000_000, "packaging_fee_fen": 50 * (j % 2)}, &di); err != nil {
				return err
			}
			if i == 0 && j < 2 {
				if err := d.giveOptions(ctx, admin, &di); err != nil {
					return err
				}
			}
			mer.Dishes = append(mer.Dishes, di)
		}
		if i == 0 {
			if err := post("/admin/v1/merchants/"+m.ID+"/dishes",
				map[string]any{"name": "The Hot Dish", "price_fen": 1999, "stock": d.o.hotStock}, &d.hot); err != nil {
				return err
			}
			if err := d.giveOptions(ctx, admin, &d.hot); err != nil {
				return err
			}
		}
		for _, p := range printersOf(i) {
			var out struct{}
			if err := post("/admin/v1/merchants/"+m.ID+"/printers", p, &out); err != nil {
				return err
			}
		}
		for _, p := range promotionsOf(i, d.o.duration) {
			var out struct{}
			if err := post("/admin/v1/merchants/"+m.ID+"/promotions", p, &out); err != nil {
				return err
			}
		}
		if err := d.onboard(ctx, admin, i, m.ID); err != nil {
			return err
		}
		d.merchants = append(d.merchants, mer)
	}
	return nil
}

// onboard makes merchant i a sub-merchant with a commission (the third
// none: its payments are unfrozen whole), handing its delivery orders to
// couriers as courierDispatchOf says.
func (d *driver) onboard(ctx context.Context, admin string, i int, id string) error {
	for path, body := range map[string]any{
		"/admin/v1/merchants/" + id + "/sub-merchant": map[string]any{"sub_mchid": fmt.Sprintf("19000001%02d", i)},
		"/admin/v1/merchants/" + id + "/commission":   map[string]any{"commission_bps": []int{600, 300, 0}[i]},
		"/admin/v1/merchants/" + id + "/courier":      map[string]any{"dispatch": courierDispatchOf(i)},
	} {
		r := d.call(ctx, entry{Op: "seed", Method: "PUT", Path: path}, admin, body, nil)
		if r.status != http.StatusOK {
			return fmt.Errorf("PUT %s: %d %s: %w", path, r.status, r.body, r.err)
		}
	}
	return nil
}

// merchantRules are the soak's merchants' money rules and hours: the
// first a flat fee; the second a minimum order and, for a sixth of the
// run from a third of it on, closed by its hours (UTC); the third priced
// by distance bands.
func merchantRules(i int, run time.Duration, now time.Time) map[string]any {
	m := map[string]any{"name": fmt.Sprintf("Soak Kitchen %d", i), "delivery_fee_fen": 300 + 100*i}
	m["accept_within_seconds"], m["accept_timeout_action"] = acceptRuleOf(i)
	if f := fulfilmentOf(i); f != nil {
		m["fulfilment"] = f
	}
	switch i {
	case 1:
		m["min_order_fen"] = 1500
		closes := now.Add(run / 3).Truncate(time.Minute).Add(time.Minute)
		opens := closes.Add(max(time.Minute, (run / 6).Truncate(time.Minute)))
		m["time_zone"] = "UTC"
		var hours []map[string]string
		for day := range 7 {
			name := []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}[day]
			if time.Weekday(day) == closes.Weekday() && opens.Weekday() == closes.Weekday() {
				hours = append(hours, map[string]string{"day": name, "open": "00:00", "close": closes.Format("15:04")},
					map[string]string{"day": name, "open": opens.Format("15:04"), "close": "24:00"})
				continue
			}
			hours = append(hours, map[string]string{"day": name, "open": "00:00", "close": "24:00"})
		}
		m["hours"] = hours
	case 2:
		m["location"] = map[string]float64{"lat": 22.5, "lng": 113.9}
		m["delivery_bands"] = []map[string]int64{{"up_to_m": 2000, "fee_fen": 300}, {"up_to_m": 5000, "fee_fen": 700}}
	}
	return m
}

// giveOptions sets an option set on a dish: a required size, optional
// extras (at most two).
func (d *driver) giveOptions(ctx context.Context, admin string, di *dish) error {
	body := map[string]any{"version": di.Version, "groups": []map[string]any{
		{"name": "Size", "min_choices": 1, "max_choices": 1, "choices": []map[string]any{{"name": "Regular"}, {"name": "Large", "price_delta_fen": 300}}},
		{"name": "Extras", "max_choices": 2, "choices": []map[string]any{
			{"name": "Egg", "price_delta_fen": 150}, {"name": "Tofu", "price_delta_fen": 200}, {"name": "Chili oil"}}},
	}}
	r := d.call(ctx, entry{Op: "seed", Method: "PUT", Path: "/admin/v1/dishes/" + di.ID + "/options"}, admin, body, nil)
	if r.status != http.StatusOK {
		return fmt.Errorf("PUT options of dish %s: %d %s: %w", di.ID, r.status, r.body, r.err)
	}
	return json.Unmarshal(r.body, di)
}

func stockNow(ctx context.Context, db querier) (map[int64]int64, error) {
	rows, err := db.Query(ctx, `SELECT id, stock FROM dishes_with_stock`)
	if err != nil {
		return nil, err
	}
	out := map[int64]int64{}
	for rows.Next() {
		var id, stock int64
		if err := rows.Scan(&id, &stock); err != nil {
			return nil, err
		}
		out[id] = stock
	}
	return out, rows.Err()
}

// recoveries sets each fault's RecoveryS and PauseS from the orders'
// created_at (their transaction's start on the server): the longest
// pause in order placement that ended after the fault began and within
// 30 s of its end, and the seconds from the fault's start until orders
// flowed again after it. A planned switchover keeps serving for a moment
// after it is asked for, so the pause, not the first order after the
// request, is what it cost. A longest pause under noticeable (a second,
// at hundreds of orders a second) means placement never stopped:
// recovery 0, not the moment some ordinary gap happened to end.
// noticeablePause is the shortest stop of order placement that counts as
// an interruption in recovery figures.
const noticeablePause = 1.0

func recoveries(ctx context.Context, db querier, runStart time.Time, timeline []faultEvent) error {
	for i := range timeline {
		ev := &timeline[i]
		from := runStart.Add(time.Duration(ev.AtS * float64(time.Second)))
		to := from.Add(time.Duration(ev.LastedS*float64(time.Second)) + 30*time.Second)
		var end *time.Time
		var pause *float64
		err := db.QueryRow(ctx, `SELECT created_at, extract(epoch FROM gap)::float8 FROM (
		        SELECT created_at, created_at - lag(created_at) OVER (ORDER BY created_at) AS gap
		        FROM orders WHERE created_at BETWEEN $1::timestamptz - interval '5 seconds' AND $2) g
		    WHERE created_at > $1 AND gap IS NOT NULL ORDER BY gap DESC LIMIT 1`, from, to).Scan(&end, &pause)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		s := 0.0
		if pause != nil && *pause >= noticeablePause {
			s = end.Sub(from).Seconds()
		}
		ev.RecoveryS, ev.PauseS = &s, pause
	}
	return nil
}

func ordersByStatus(ctx context.Context, db querier) (map[string]int, error) {
	rows, err := db.Query(ctx, `SELECT status, count(*) FROM orders GROUP BY status`)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}

func copyFile(from, to string) {
	b, err := os.ReadFile(from) //nolint:gosec // G304: the soak's own server log
	if err == nil {
		_ = os.WriteFile(to, b, 0o600) //nolint:gosec // G703: our work directory
	}
}
