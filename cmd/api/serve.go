package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/config"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/httpapi"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/jobs"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/orderid"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/redisconn"
	"github.com/takeout/takeout/internal/webhook"
)

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	level, _ := config.ParseLogLevel(cfg.LogLevel) // validated by Load
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// applyGC sets the garbage collector as cfg asks, except what GOGC or
// GOMEMLIMIT in the environment set (the runtime applied those at start),
// and returns what is in effect: GOGC's value, and the soft memory limit
// in bytes (math.MaxInt64 for none).
func applyGC(cfg config.Config, getenv func(string) string) (string, int64) {
	gogc := getenv("GOGC")
	if gogc == "" {
		debug.SetGCPercent(cfg.GCPercent)
		gogc = strconv.Itoa(cfg.GCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		if limit := cfg.MemoryLimitBytes(); limit > 0 {
			debug.SetMemoryLimit(limit)
		}
	}
	return gogc, debug.SetMemoryLimit(-1) // a negative limit only reads it
}

// serve runs the HTTP service until ctx ends, then shuts down gracefully:
// stop accepting, finish in-flight requests, stop background workers.
func serve(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)
	gogc, memLimit := applyGC(cfg, getenv)
	logger.Info("garbage collector", "gogc", gogc, "memory_limit_bytes", memLimit)

	pool, err := db.Open(ctx, cfg.DatabaseURL, cfg.DatabaseMaxConns, db.Limits{
		Statement: cfg.DatabaseStatementTimeout, Lock: cfg.DatabaseLockTimeout, IdleInTransaction: cfg.DatabaseIdleInTxTimeout,
	})
	if err != nil {
		return err
	}
	defer pool.Close()
	// Migrations may run long: their own connections, without the limits.
	migrationPool, err := db.Open(ctx, cfg.DatabaseURL, 2, db.Limits{})
	if err != nil {
		return err
	}
	defer migrationPool.Close()
	migrator, err := db.NewMigrator(migrationPool)
	if err != nil {
		return err
	}
	defer migrator.Close()
	if cfg.MigrateOnStart {
		applied, err := migrator.Up(ctx)
		if err != nil {
			return err
		}
		if len(applied) > 0 {
			logger.Info("migrations applied", "versions", applied)
		}
	}
	if err := db.CheckConstraints(ctx, pool); err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	rds, err := redisconn.New(redisconn.Options{URL: cfg.RedisURL, Prefix: cfg.RedisPrefix, Logger: logger, Registerer: reg})
	if err != nil {
		return fmt.Errorf("TAKEOUT_REDIS_URL: %w", err)
	}
	defer rds.Close()
	rds.Check(ctx)

	cat, err := catalog.NewService(catalog.Options{
		Pool: pool, Redis: rds, Logger: logger, Registerer: reg,
		CacheTTL: cfg.CatalogCacheTTL, CacheSize: cfg.CatalogCacheSize,
	})
	if err != nil {
		return err
	}
	tokens := auth.NewTokens(cfg.SessionSecret.Bytes(), cfg.StaffSecret.Bytes(), cfg.SessionTTL, time.Now)
	revocations := auth.NewRevocations(pool, rds, logger)
	if err := revocations.Load(ctx); err != nil {
		return err
	}
	tokens.CheckRevocations(revocations)

	lease, err := orderid.AcquireLease(ctx, pool, instanceName(), cfg.WorkerLeaseTTL, time.Now, logger)
	if err != nil {
		return err
	}
	ids, err := orderid.New(orderid.Options{Worker: lease.Worker(), LeaseValidUntil: lease.ValidUntil, Floor: lease.Floor(), Registerer: reg})
	if err != nil {
		return err
	}
	idem, err := idempotency.NewStore(idempotency.Options{
		DB: pool, Redis: rds, Logger: logger, Registerer: reg,
		Retention: cfg.IdemRetention, InflightTTL: cfg.IdemInflightTTL, CoalesceWait: cfg.IdemCoalesceWait,
		L1Bytes: cfg.IdemL1Bytes, L1TTL: cfg.IdemL1TTL,
	})
	if err != nil {
		return err
	}
	defer idem.Close()
	// The order service inserts jobs through the client that also works
	// them; the client needs the workers first, so it is built through a
	// forward reference.
	var jobClient *jobs.Client
	var payments *payment.Service
	var requestRefund func(context.Context, pgx.Tx, dbsqlc.Order) error
	var beforeTimeout func(context.Context, int64) error
	var closePayment func(context.Context, pgx.Tx, dbsqlc.Order) error
	if cfg.PaymentsEnabled() {
		requestRefund = func(ctx context.Context, tx pgx.Tx, o dbsqlc.Order) error {
			return payments.RequestRefundTx(ctx, tx, o)
		}
		beforeTimeout = func(ctx context.Context, id int64) error { return payments.BeforeTimeout(ctx, id) }
		closePayment = func(ctx context.Context, tx pgx.Tx, o dbsqlc.Order) error { return payments.ClosePaymentTx(ctx, tx, o) }
	}
	orders, err := order.NewService(order.Options{
		RequestRefund: requestRefund, BeforeTimeout: beforeTimeout, ClosePayment: closePayment,
		Pool: pool, IDs: ids, Signer: order.NewSigner(cfg.ConfirmSecret.Bytes()), Idempotency: idem,
		Jobs: jobInserter{&jobClient}, Logger: logger, Now: time.Now, TokenTTL: cfg.ConfirmTokenTTL,
		DedupWindow: cfg.OrderDedupWindow, PayWindow: cfg.OrderPayWindow, AutoCompleteAfter: cfg.AutoCompleteAfter,
		WebhookEnabled: cfg.WebhookURL != "", WebhookMaxAttempts: cfg.WebhookMaxAttempts, JobMaxAttempts: cfg.JobMaxAttempts, Registerer: reg,
	})
	if err != nil {
		return err
	}
	if cfg.PaymentsEnabled() {
		if payments, err = newPayments(cfg, pool, orders, jobInserter{&jobClient}, logger, reg); err != nil {
			return err
		}
	}
	workers := river.NewWorkers()
	orders.AddWorkers(workers)
	periodic := []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(cfg.IdemPruneInterval),
		func() (river.JobArgs, *river.InsertOpts) { return idempotency.PruneArgs{}, nil }, nil)}
	if payments != nil {
		payments.AddWorkers(workers, cfg.WxPayQueryAfter)
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(cfg.WxPayReconcileInterval),
			func() (river.JobArgs, *river.InsertOpts) { return payment.ReconcileArgs{}, nil }, nil))
	}
	river.AddWorker(workers, &webhook.Worker{
		URL: cfg.WebhookURL, Secret: cfg.WebhookSecret.Bytes(), Client: &http.Client{Timeout: cfg.WebhookTimeout},
		RetryBase: cfg.WebhookRetryBase, Now: time.Now,
	})
	river.AddWorker(workers, &idempotency.PruneWorker{Store: idem})
	jobClient, jobMetrics, err := jobs.New(jobs.Options{
		Pool: pool, Logger: logger, Workers: workers, MaxWorkers: cfg.JobWorkers, MaxAttempts: cfg.JobMaxAttempts,
		PollInterval: cfg.JobPollInterval, RetryMaxDelay: cfg.JobRetryMaxDelay,
		RescueAfter: cfg.JobRescueAfter, Registerer: reg,
		Periodic: periodic,
	})
	if err != nil {
		return err
	}
	wx := auth.NewWeChat(cfg.WeChatAPIBase, cfg.WeChatAppID, string(cfg.WeChatAppSecret), &http.Client{Timeout: cfg.WeChatTimeout})

	handler, err := httpapi.NewServer(httpapi.Deps{
		Logger: logger, Pool: pool, Redis: rds, Migrator: migrator, Tokens: tokens, Revocations: revocations, WeChat: wx,
		Catalog: cat, Orders: orders, Idempotency: idem, Jobs: jobClient, Payments: payments, Registry: reg, MaxBodyBytes: cfg.MaxBodyBytes, RequestTimeout: cfg.RequestTimeout,
		RateLimitIP: cfg.RateLimitIP, RateLimitUser: cfg.RateLimitUser, ClientIPHeader: cfg.ClientIPHeader,
	})
	if err != nil {
		return err
	}

	// Background work stops when serve returns, after the HTTP server.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	defer func() { stopWork(); background.Wait() }()
	background.Go(func() { rds.Run(workCtx, time.Second) })
	background.Go(func() { cat.RunInvalidations(workCtx, nil) })
	defer cat.Close()
	background.Go(func() { lease.Run(workCtx, ids.NextFloor) })
	background.Go(func() { revocations.Run(workCtx, cfg.RevocationReload) })
	background.Go(func() { idem.RunPurges(workCtx, nil) })
	background.Go(func() { jobMetrics.Run(workCtx, jobClient) })
	if err := jobClient.Start(workCtx); err != nil {
		return fmt.Errorf("start job workers: %w", err)
	}
	defer func() {
		// Let running jobs finish (their transactions commit or roll back).
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		if err := jobClient.Stop(sctx); err != nil {
			logger.Warn("stop job workers", "err", err)
		}
	}()

	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("TAKEOUT_HTTP_ADDR: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return workCtx },
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	if cfg.OpsAddr != "" {
		stopOps, err := serveOps(ctx, cfg.OpsAddr, reg, logger)
		if err != nil {
			return fmt.Errorf("TAKEOUT_OPS_ADDR: %w", err)
		}
		defer stopOps()
	}
	logger.Info("http server listening", "addr", ln.Addr().String(), "redis", string(rds.State()))

	select {
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing in-flight requests", "timeout", cfg.ShutdownTimeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// serveOps serves the operations listener: Prometheus metrics and
// net/http/pprof, apart from the public API (keep it on loopback or a
// private network: metrics and profiles reveal internals, and a scrape
// or a profile must not compete with customers' requests for a route).
func serveOps(ctx context.Context, addr string, reg *prometheus.Registry, logger *slog.Logger) (func(), error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	logger.Info("operations server listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// instanceName names this process for its worker-id lease.
func instanceName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%x", host, os.Getpid(), b)
}

// jobInserter inserts through the job client once it exists (the client
// is built after the services that insert jobs, since it needs their
// workers).
type jobInserter struct{ c **jobs.Client }

func (j jobInserter) InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	return (*j.c).InsertTx(ctx, tx, args, opts)
}

// newPayments builds the WeChat Pay side from the configuration.
func newPayments(cfg config.Config, pool *pgxpool.Pool, orders *order.Service, jobs order.JobInserter, logger *slog.Logger, reg prometheus.Registerer) (*payment.Service, error) {
	key, err := wxpay.ParsePrivateKey(cfg.WxPayMerchantKey.Bytes())
	if err != nil {
		return nil, fmt.Errorf("TAKEOUT_WXPAY_MERCHANT_KEY: %w", err)
	}
	var keys []wxpay.PublicKey
	for _, entry := range strings.Split(cfg.WxPayPlatformKeys, ",") {
		serial, path, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok {
			return nil, fmt.Errorf("TAKEOUT_WXPAY_PLATFORM_KEYS: want SERIAL=path, got %q", entry)
		}
		pemBytes, err := os.ReadFile(path) //nolint:gosec // G304: the operator names the key files
		if err != nil {
			return nil, fmt.Errorf("TAKEOUT_WXPAY_PLATFORM_KEYS: %w", err)
		}
		k, err := wxpay.ParsePublicKey(pemBytes, serial)
		if err != nil {
			return nil, fmt.Errorf("TAKEOUT_WXPAY_PLATFORM_KEYS %s: %w", serial, err)
		}
		keys = append(keys, k)
	}
	platform := wxpay.NewKeyring(keys...)
	client := payment.NewClient(payment.ClientOptions{
		Base: cfg.WxPayAPIBase, Merchant: wxpay.Merchant{MchID: cfg.WxPayMchID, Serial: cfg.WxPayMerchantSerial, Key: key},
		Platform: platform, AppID: cfg.WeChatAppID, NotifyURL: cfg.WxPayNotifyURL, HTTP: &http.Client{Timeout: cfg.WeChatTimeout}, Now: time.Now,
	})
	return payment.NewService(payment.Options{
		Pool: pool, Client: client, Orders: orders, Jobs: jobs, Logger: logger, Now: time.Now,
		MchID: cfg.WxPayMchID, AppID: cfg.WeChatAppID, MerchantKey: key, Platform: platform, APIv3Key: cfg.WxPayAPIv3Key.Bytes(), V2Key: string(cfg.WxPayV2Key), Registerer: reg,
	})
}
