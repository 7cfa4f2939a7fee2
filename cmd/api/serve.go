package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/aftersales"
	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/bill"
	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/config"
	"github.com/takeout/takeout/internal/courier"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/httpapi"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/jobs"
	"github.com/takeout/takeout/internal/ledger"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/orderid"
	"github.com/takeout/takeout/internal/orderstream"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/printing"
	"github.com/takeout/takeout/internal/promotion"
	"github.com/takeout/takeout/internal/redisconn"
	"github.com/takeout/takeout/internal/sharing"
	"github.com/takeout/takeout/internal/shipping"
	"github.com/takeout/takeout/internal/staff"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/subscribemsg"
	"github.com/takeout/takeout/internal/telemetry"
	"github.com/takeout/takeout/internal/voucher"
	"github.com/takeout/takeout/internal/webhook"
)

// newLogger logs JSON lines to w; traced, each line of a traced request
// names its trace and span.
func newLogger(cfg config.Config, w io.Writer, tracing *telemetry.Tracing) *slog.Logger {
	level, _ := config.ParseLogLevel(cfg.LogLevel) // validated by Load
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
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
// Spans of the console exporter go to stdout, logs to stderr.
func serve(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	trusted, _ := cfg.TrustedNets() // validated by Load
	tracing, err := telemetry.New(ctx, telemetry.Options{
		Exporter: cfg.TracesExporter, ServiceName: cfg.ServiceName, Console: stdout, TrustedNets: trusted,
		BatchDelay: time.Duration(cfg.TraceBatchDelayMS) * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tracing.Shutdown(sctx) // flushes the last spans
	}()
	logger := newLogger(cfg, stderr, tracing)
	gogc, memLimit := applyGC(cfg, getenv)
	logger.Info("garbage collector", "gogc", gogc, "memory_limit_bytes", memLimit, "tracing", cfg.TracesExporter)
	a, err := build(ctx, cfg, logger, tracing)
	defer a.close() // a holds what was built so far, even on an error
	if err != nil {
		return err
	}
	return a.run(ctx)
}

// app is the service built from its configuration: every component,
// wired, nothing running yet. Each component is built after everything it
// needs, so no field is set after another took it.
type app struct {
	cfg     config.Config
	logger  *slog.Logger
	reg     *prometheus.Registry
	tracing *telemetry.Tracing // nil: nothing is traced

	pool *pgxpool.Pool
	// sweepLocks holds the sweeps' advisory locks, apart from pool: a
	// sweep at work keeps its lock's connection for as long as it runs.
	sweepLocks  *pgxpool.Pool
	migrator    *db.Migrator
	rds         *redisconn.Conn
	catalog     *catalog.Service
	revocations *auth.Revocations
	lease       *orderid.Lease
	ids         *orderid.Generator
	idem        *idempotency.Store
	jobs        *jobs.Client
	jobMetrics  *jobs.Metrics
	hub         *orderstream.Hub
	staff       *staff.Service
	messages    *subscribemsg.Sender
	prints      *printing.Service
	shipping    *shipping.Service
	bills       *bill.Service    // nil unless payments are configured
	sharing     *sharing.Service // nil unless in the service-provider mode
	couriers    *courier.Service
	inserter    *jobs.Client // inserts jobs in a caller's transaction
	wxTokens    *subscribemsg.AccessTokens
	handler     http.Handler

	closers []func() // run in reverse by close
}

func (a *app) onClose(f func()) { a.closers = append(a.closers, f) }

// close releases what build opened, last first.
func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
}

// build opens the databases, runs the migrations when configured, and
// builds every component. On an error, a still holds what was opened.
func build(ctx context.Context, cfg config.Config, logger *slog.Logger, tracing *telemetry.Tracing) (*app, error) {
	a := &app{cfg: cfg, logger: logger, reg: prometheus.NewRegistry(), tracing: tracing}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := a.openDatabase(ctx); err != nil {
		return a, err
	}
	rds, err := redisconn.New(redisconn.Options{URL: cfg.RedisURL, Prefix: cfg.RedisPrefix, Logger: logger, Registerer: a.reg})
	if err != nil {
		return a, fmt.Errorf("TAKEOUT_REDIS_URL: %w", err)
	}
	a.rds = rds
	a.onClose(func() { _ = rds.Close() })
	if rds.Client != nil {
		if err := tracing.Redis(rds.Client); err != nil {
			return a, err
		}
	}
	rds.Check(ctx)
	return a, a.buildServices(ctx)
}

// openDatabase opens the pool under the configured limits, migrates (on
// connections of its own, without limits: migrations may run long) and
// checks the constraints exactly-once rests on.
func (a *app) openDatabase(ctx context.Context) error {
	cfg := a.cfg
	pool, err := db.Open(ctx, cfg.DatabaseURL, cfg.DatabaseMaxConns, db.Limits{
		Statement: cfg.DatabaseStatementTimeout, Lock: cfg.DatabaseLockTimeout, IdleInTransaction: cfg.DatabaseIdleInTxTimeout,
	}, a.tracing.Pool)
	if err != nil {
		return err
	}
	a.pool = pool
	a.onClose(pool.Close)
	sweepLocks, err := db.Open(ctx, cfg.DatabaseURL, jobs.SweepLockConns, db.Limits{})
	if err != nil {
		return err
	}
	a.sweepLocks = sweepLocks
	a.onClose(sweepLocks.Close)
	migrationPool, err := db.Open(ctx, cfg.DatabaseURL, 2, db.Limits{})
	if err != nil {
		return err
	}
	a.onClose(migrationPool.Close)
	if a.migrator, err = db.NewMigrator(migrationPool); err != nil {
		return err
	}
	a.onClose(func() { _ = a.migrator.Close() })
	if cfg.MigrateOnStart {
		applied, err := a.migrator.Up(ctx)
		if err != nil {
			return err
		}
		if len(applied) > 0 {
			a.logger.Info("migrations applied", "versions", applied)
		}
	}
	if err := db.CheckConstraints(ctx, pool); err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	return nil
}

// buildServices builds the capabilities in dependency order: jobs are
// inserted through an insert-only client until the working client, which
// needs every worker, is built last.
func (a *app) buildServices(ctx context.Context) error {
	cfg, logger, pool := a.cfg, a.logger, a.pool
	var err error
	if err := a.buildCatalog(); err != nil {
		return err
	}
	tokens, err := a.buildTokens(ctx)
	if err != nil {
		return err
	}
	if err := a.buildIDs(ctx); err != nil {
		return err
	}
	if err := a.buildIdempotency(); err != nil {
		return err
	}
	inserter, err := jobs.NewInserter(pool, logger, cfg.JobMaxAttempts, a.tracing.JobMiddleware()...)
	if err != nil {
		return err
	}
	a.inserter = inserter
	if err := a.buildLive(tokens, inserter); err != nil {
		return err
	}
	if err := a.buildPrinting(inserter); err != nil {
		return err
	}
	messages, ships := a.orderNotices()
	money, err := a.buildMoneyParts(inserter)
	if err != nil {
		return err
	}
	orderCouriers, courierOrders, err := a.buildCouriers(inserter)
	if err != nil {
		return err
	}
	orders, err := order.NewService(order.Options{
		Couriers: orderCouriers, CourierQuoteTimeout: cfg.CourierQuoteTimeout, QuoteCacheSize: cfg.CatalogCacheSize, QuoteCacheTTL: cfg.CatalogCacheTTL,
		Events: a.hub, Messages: messages, Sharing: money.sharing,
		Payments: money.payments, Prints: a.prints, Shipping: ships, Pool: pool, IDs: a.ids, Signer: order.NewSigner(cfg.ConfirmSecret.Bytes()), Idempotency: a.idem,
		Jobs: inserter, Logger: logger, Now: time.Now, TokenTTL: cfg.ConfirmTokenTTL,
		DedupWindow: cfg.OrderDedupWindow, PayWindow: cfg.OrderPayWindow, MaxTotalFen: cfg.OrderMaxTotalFen, AutoCompleteAfter: cfg.AutoCompleteAfter, UrgeInterval: cfg.UrgeInterval,
		WebhookEnabled: cfg.WebhookURL != "", WebhookMaxAttempts: cfg.WebhookMaxAttempts, Registerer: a.reg,
		GroupCommitMax: cfg.DatabaseGroupCommitMax, GroupCommitSlots: cfg.DatabaseGroupCommitSlots,
	})
	if err != nil {
		return err
	}
	a.onClose(orders.Close)
	courierOrders.s = orders
	var payments *payment.Service // nil unless payments are configured, and bills with it
	if cfg.PaymentsEnabled() {
		if payments, a.bills, err = newPayments(cfg, pool, money.client, orders, money.effects, money.returns, logger, a.reg); err != nil {
			return err
		}
	}
	afterSales, err := aftersales.NewService(aftersales.Options{Pool: pool, Payments: payments, Jobs: inserter,
		RespondWithin: cfg.AfterSalesRespondWithin, Window: cfg.AfterSalesWindow, Now: time.Now, Registerer: a.reg})
	if err != nil {
		return err
	}
	if err := a.buildJobs(orders, payments, a.prints, afterSales); err != nil {
		return err
	}
	vouchers, err := voucher.NewService(voucher.Options{Pool: pool, Registerer: a.reg, Now: time.Now})
	if err != nil {
		return err
	}
	a.handler, err = httpapi.NewServer(httpapi.Deps{
		Logger: logger, Pool: pool, Redis: a.rds, Migrator: a.migrator, Tokens: tokens, Revocations: a.revocations,
		WeChat:  auth.NewWeChat(cfg.WeChatAPIBase, cfg.WeChatAppID, string(cfg.WeChatAppSecret), a.client(cfg.WeChatTimeout)),
		Catalog: a.catalog, Orders: orders, Idempotency: a.idem, Jobs: a.jobs, Payments: payments, Registry: a.reg,
		Staff: a.staff, Stream: a.hub, Messages: a.messages, Vouchers: vouchers, Printing: a.prints, Shipping: a.shipping,
		Ledger: ledger.NewService(pool), AfterSales: afterSales, Bills: a.bills, Sharing: a.sharing, Couriers: a.couriers,
		Promotions:   promotion.NewService(promotion.Options{Pool: pool, MenuChanged: a.catalog.Changed}),
		MaxBodyBytes: cfg.MaxBodyBytes, RequestTimeout: cfg.RequestTimeout,
		RateLimitIP: cfg.RateLimitIP, RateLimitUser: cfg.RateLimitUser, ClientIPHeader: cfg.ClientIPHeader,
	})
	a.handler = a.tracing.Handler(a.handler)
	return err
}

// moneyParts are what the order service and payments are built with:
// all nil unless payments are configured, the sharing ones unless in the
// service-provider mode.
type moneyParts struct {
	effects  *payment.Effects
	payments order.Payments
	sharing  order.ProfitSharing
	returns  payment.ReturnsBeforeRefund
	client   payClient
}

// buildMoneyParts builds the WeChat Pay client, the payments' effects on
// orders and, in the service-provider mode, profit sharing.
func (a *app) buildMoneyParts(inserter *jobs.Client) (moneyParts, error) {
	cfg := a.cfg
	var m moneyParts
	if !cfg.PaymentsEnabled() {
		return m, nil
	}
	m.effects = payment.NewEffects(inserter)
	m.payments = m.effects
	var err error
	if m.client, err = newPayClient(cfg, a.client(cfg.WeChatTimeout)); err != nil {
		return m, err
	}
	if cfg.PartnerMode() {
		if a.sharing, err = sharing.NewService(sharing.Options{
			Pool: a.pool, Client: m.client.client, Jobs: inserter, Logger: a.logger, Now: time.Now, Registerer: a.reg,
			AfterPay: cfg.SharingAfterPay, FinishAfter: cfg.SharingFinishAfter, Poll: cfg.SharingPoll, FailedWait: 12 * cfg.SharingPoll,
		}); err != nil {
			return m, err
		}
		m.sharing, m.returns = a.sharing, a.sharing
	}
	return m, nil
}

// orderNotices are who the order service tells of its orders: customers'
// subscribe messages (nil unless a status has a template) and WeChat's
// shipping uploads (nil unless they are on).
func (a *app) orderNotices() (order.CustomerMessages, order.Shipping) {
	var messages order.CustomerMessages
	if a.messages.Enabled() {
		messages = a.messages
	}
	var ships order.Shipping
	if a.cfg.ShippingUpload {
		ships = a.shipping
	}
	return messages, ships
}

// buildCatalog builds the catalog, closed with the app.
func (a *app) buildCatalog() error {
	cfg := a.cfg
	c, err := catalog.NewService(catalog.Options{
		Pool: a.pool, Redis: a.rds, Logger: a.logger, Registerer: a.reg, CacheTTL: cfg.CatalogCacheTTL, CacheSize: cfg.CatalogCacheSize, Now: time.Now,
	})
	if err != nil {
		return err
	}
	a.catalog = c
	a.onClose(c.Close)
	return nil
}

// buildTokens builds the token issuer, checking revocations loaded from
// the database.
func (a *app) buildTokens(ctx context.Context) (*auth.Tokens, error) {
	cfg := a.cfg
	tokens := auth.NewTokens(cfg.SessionSecret.Bytes(), cfg.StaffSecret.Bytes(), cfg.SessionTTL, time.Now)
	a.revocations = auth.NewRevocations(a.pool, a.rds, a.logger)
	if err := a.revocations.Load(ctx); err != nil {
		return nil, err
	}
	tokens.CheckRevocations(a.revocations)
	return tokens, nil
}

// buildLive builds what live orders need: the order stream's hub, staff
// logins, and customers' subscribe messages.
func (a *app) buildLive(tokens *auth.Tokens, inserter *jobs.Client) error {
	cfg := a.cfg
	var err error
	if a.hub, err = orderstream.NewHub(orderstream.Options{
		Pool: a.pool, Redis: a.rds, Logger: a.logger, Poll: cfg.StreamPoll, Buffer: cfg.StreamBuffer, MaxStreams: cfg.StreamMax,
		MaxPerMerchant: cfg.StreamMaxPerMerchant, MaxPerToken: cfg.StreamMaxPerToken, Revocations: a.revocations,
		Heartbeat: cfg.StreamHeartbeat, WriteTimeout: cfg.WriteTimeout, Registerer: a.reg,
	}); err != nil {
		return err
	}
	if a.staff, err = staff.NewService(staff.Options{
		Pool: a.pool, Redis: a.rds, Tokens: tokens, Revocations: a.revocations, Logger: a.logger, TokenTTL: cfg.StaffLoginTTL,
		AccountLimit: cfg.LoginLimitAccount, AddressLimit: cfg.LoginLimitAddress, Now: time.Now,
		RequestKey: staff.RequestKeyFrom(cfg.StaffSecret.Bytes()),
	}); err != nil {
		return err
	}
	byStatus, _ := cfg.SubscribeTemplateMap() // validated by Load
	templates := map[statemachine.Status]string{}
	for st, tpl := range byStatus {
		templates[statemachine.Status(st)] = tpl
	}
	a.wxTokens = subscribemsg.NewAccessTokens(cfg.WeChatAPIBase, cfg.WeChatAppID, string(cfg.WeChatAppSecret), a.client(cfg.WeChatTimeout), a.rds, a.logger, time.Now)
	a.messages, err = subscribemsg.NewSender(subscribemsg.Options{
		Pool: a.pool, Jobs: inserter, Templates: templates, Base: cfg.WeChatAPIBase, State: cfg.MiniProgramState,
		Tokens: a.wxTokens,
		// Untraced: the send's URL carries the access token.
		HTTP:   &http.Client{Timeout: cfg.WeChatTimeout},
		Logger: a.logger, Registerer: a.reg, MaxAttempts: cfg.JobMaxAttempts,
	})
	if err != nil {
		return err
	}
	// Built whether or not uploads are on: operators' list and retry
	// answer either way; only the orders' effect depends on the setting.
	a.shipping, err = shipping.NewService(shipping.Options{
		Pool: a.pool, Jobs: inserter, Base: cfg.WeChatAPIBase, Tokens: a.wxTokens,
		// Untraced: the calls' URLs carry the access token.
		HTTP:   &http.Client{Timeout: cfg.WeChatTimeout},
		Logger: a.logger, Registerer: a.reg, MaxAttempts: cfg.JobMaxAttempts, Now: time.Now,
	})
	return err
}

// buildPrinting builds the cloud printers' side with the providers
// configured (none: printers' tickets fail saying so).
func (a *app) buildPrinting(inserter *jobs.Client) error {
	cfg := a.cfg
	var providers []printing.Provider
	hc := a.client(cfg.PrintTimeout)
	if cfg.YilianyunEnabled() {
		providers = append(providers, &printing.Yilianyun{
			Base: cfg.YilianyunAPIBase, ClientID: cfg.YilianyunClientID, ClientSecret: string(cfg.YilianyunClientSecret), HTTP: hc, Now: time.Now,
		})
	}
	if cfg.FeieEnabled() {
		var key *rsa.PublicKey
		if cfg.FeiePublicKey != "" {
			pemBytes, err := os.ReadFile(cfg.FeiePublicKey)
			if err != nil {
				return fmt.Errorf("TAKEOUT_FEIE_PUBLIC_KEY: %w", err)
			}
			if key, err = printing.ParsePublicKey(pemBytes); err != nil {
				return fmt.Errorf("TAKEOUT_FEIE_PUBLIC_KEY: %w", err)
			}
		}
		providers = append(providers, &printing.Feie{
			Base: cfg.FeieAPIBase, User: cfg.FeieUser, UKey: string(cfg.FeieUKey), PlatformKey: key, CallbackURL: cfg.FeieCallbackURL, HTTP: hc, Now: time.Now,
		})
	}
	var err error
	a.prints, err = printing.NewService(printing.Options{
		Pool: a.pool, Jobs: inserter, Logger: a.logger, Providers: providers, Registerer: a.reg, Now: time.Now,
		PrintWithin: cfg.PrintWithin, ConfirmAfter: cfg.PrintConfirmAfter, GiveUpAfter: cfg.PrintGiveUpAfter,
	})
	return err
}

// buildIdempotency builds the idempotency store.
func (a *app) buildIdempotency() error {
	cfg := a.cfg
	var err error
	if a.idem, err = idempotency.NewStore(idempotency.Options{
		DB: a.pool, Redis: a.rds, Logger: a.logger, Registerer: a.reg, Now: time.Now,
		Retention: cfg.IdemRetention, InflightTTL: cfg.IdemInflightTTL, CoalesceWait: cfg.IdemCoalesceWait,
		L1Bytes: cfg.IdemL1Bytes, L1TTL: cfg.IdemL1TTL,
	}); err != nil {
		return err
	}
	a.onClose(a.idem.Close)
	return nil
}

// buildIDs leases a worker id and builds the order id generator on it.
func (a *app) buildIDs(ctx context.Context) error {
	lease, err := orderid.AcquireLease(ctx, a.pool, instanceName(), a.cfg.WorkerLeaseTTL, time.Now, a.logger)
	if err != nil {
		return err
	}
	a.lease = lease
	a.ids, err = orderid.New(orderid.Options{Worker: lease.Worker(), LeaseValidUntil: lease.ValidUntil, Floor: lease.Floor(), Registerer: a.reg})
	return err
}

// buildJobs builds the working River client with every capability's
// workers and the periodic jobs; payments is nil when not configured.
func (a *app) buildJobs(orders *order.Service, payments *payment.Service, prints *printing.Service, afterSales *aftersales.Service) error {
	cfg := a.cfg
	workers := river.NewWorkers()
	kinds := []string{idempotency.PruneArgs{}.Kind(), webhook.Args{}.Kind(), order.PaymentTimeoutArgs{}.Kind(),
		order.TimeoutSweepArgs{}.Kind(), order.AutoCompleteArgs{}.Kind(), order.AcceptDeadlineSweepArgs{}.Kind(),
		order.AcceptDeadlineArgs{}.Kind()}
	var check order.DeadlineCheck
	periodic := []*river.PeriodicJob{
		jobs.Sweep(cfg.IdemPruneInterval, func() river.JobArgs { return idempotency.PruneArgs{} }, false),
		jobs.Sweep(cfg.OrderTimeoutSweepInterval, func() river.JobArgs { return order.TimeoutSweepArgs{} }, true),
		jobs.Sweep(cfg.OrderAcceptSweepInterval, func() river.JobArgs { return order.AcceptDeadlineSweepArgs{} }, true),
	}
	if payments != nil {
		check = payments
		payments.AddWorkers(workers, cfg.WxPayQueryAfter)
		river.AddWorker(workers, &bill.SweepWorker{S: a.bills, Jobs: a.inserter})
		river.AddWorker(workers, &bill.RunWorker{S: a.bills})
		kinds = append(kinds, payment.ReconcileArgs{}.Kind(), payment.RefundArgs{}.Kind(), payment.ClosePaymentArgs{}.Kind(),
			bill.SweepArgs{}.Kind(), bill.RunArgs{}.Kind())
		periodic = append(periodic, jobs.Sweep(cfg.WxPayReconcileInterval, func() river.JobArgs { return payment.ReconcileArgs{} }, false),
			jobs.Sweep(cfg.BillSweepInterval, func() river.JobArgs { return bill.SweepArgs{} }, true))
	}
	if a.sharing != nil {
		river.AddWorker(workers, &sharing.ShareWorker{S: a.sharing})
		river.AddWorker(workers, &sharing.SweepWorker{S: a.sharing})
		kinds = append(kinds, sharing.ShareArgs{}.Kind(), sharing.SweepArgs{}.Kind())
		periodic = append(periodic, jobs.Sweep(cfg.SharingSweepInterval, func() river.JobArgs { return sharing.SweepArgs{} }, true))
	}
	orders.AddWorkers(workers, check)
	kinds, periodic = a.courierJobs(workers, kinds, periodic)
	prints.AddWorkers(workers)
	kinds = append(kinds, printing.SweepArgs{}.Kind(), printing.DeliverArgs{}.Kind())
	periodic = append(periodic, jobs.Sweep(cfg.PrintSweepInterval, func() river.JobArgs { return printing.SweepArgs{} }, true))
	river.AddWorker(workers, &webhook.Worker{
		URL: cfg.WebhookURL, Secret: cfg.WebhookSecret.Bytes(), Client: a.client(cfg.WebhookTimeout),
		RetryBase: cfg.WebhookRetryBase, Now: time.Now,
	})
	river.AddWorker(workers, &idempotency.PruneWorker{Store: a.idem})
	river.AddWorker(workers, &subscribemsg.Worker{S: a.messages})
	river.AddWorker(workers, &shipping.Worker{S: a.shipping})
	river.AddWorker(workers, &aftersales.DeadlineWorker{S: afterSales})
	kinds = append(kinds, shipping.Args{}.Kind(), aftersales.DeadlineArgs{}.Kind())
	river.AddWorker(workers, &orderstream.PruneWorker{Hub: a.hub, Retention: cfg.OrderEventsRetention, Now: time.Now})
	river.AddWorker(workers, &staff.PruneWorker{S: a.staff})
	kinds = append(kinds, subscribemsg.Args{}.Kind(), orderstream.PruneArgs{}.Kind(), staff.PruneArgs{}.Kind())
	periodic = append(periodic,
		jobs.Sweep(time.Hour, func() river.JobArgs { return orderstream.PruneArgs{} }, false),
		jobs.Sweep(6*time.Hour, func() river.JobArgs { return staff.PruneArgs{} }, false))
	var err error
	a.jobs, a.jobMetrics, err = jobs.New(jobs.Options{
		Pool: a.pool, SweepLocks: a.sweepLocks, Logger: a.logger, Workers: workers, MaxWorkers: cfg.JobWorkers, MaxAttempts: cfg.JobMaxAttempts,
		PollInterval: cfg.JobPollInterval, RetryMaxDelay: cfg.JobRetryMaxDelay, RescueAfter: cfg.JobRescueAfter,
		Registerer: a.reg, Periodic: periodic, Middleware: a.tracing.JobMiddleware(), Kinds: kinds,
	})
	return err
}

// run starts the background work and the listeners, serves until ctx
// ends, then stops in order: the HTTP server finishes in-flight requests,
// the job workers finish their jobs, the background loops end.
func (a *app) run(ctx context.Context) error {
	cfg, logger := a.cfg, a.logger
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	defer func() { stopWork(); background.Wait() }()
	background.Go(func() { a.rds.Run(workCtx, time.Second) })
	background.Go(func() { a.catalog.RunInvalidations(workCtx, nil) })
	background.Go(func() { a.lease.Run(workCtx, a.ids) })
	background.Go(func() { a.revocations.Run(workCtx, cfg.RevocationReload) })
	background.Go(func() { a.idem.RunPurges(workCtx, nil) })
	background.Go(func() { a.jobMetrics.Run(workCtx, a.jobs) })
	background.Go(func() { a.hub.Run(workCtx) })
	if err := a.jobs.Start(workCtx); err != nil {
		return fmt.Errorf("start job workers: %w", err)
	}
	defer func() {
		// Let running jobs finish (their transactions commit or roll back).
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		if err := a.jobs.Stop(sctx); err != nil {
			logger.Warn("stop job workers", "err", err)
		}
	}()
	if cfg.OpsAddr != "" {
		stopOps, err := serveOps(ctx, cfg.OpsAddr, a.reg, logger)
		if err != nil {
			return fmt.Errorf("TAKEOUT_OPS_ADDR: %w", err)
		}
		defer stopOps()
	}
	return a.serveHTTP(ctx, workCtx)
}

// serveHTTP serves the API until ctx ends, then shuts the server down
// gracefully; requests' contexts derive from base, which outlives ctx.
func (a *app) serveHTTP(ctx, base context.Context) error {
	cfg, logger := a.cfg, a.logger
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("TAKEOUT_HTTP_ADDR: %w", err)
	}
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	// Shutdown waits for handlers; live order streams end at once (their
	// boards reconnect to another instance and resume).
	srv.RegisterOnShutdown(a.hub.CloseStreams)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("http server listening", "addr", ln.Addr().String(), "redis", string(a.rds.State()))
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

// client is an HTTP client for calls out (WeChat, WeChat Pay, webhooks)
// with a timeout; traced, each call is a span and carries traceparent.
func (a *app) client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: a.tracing.Transport(nil)}
}

// instanceName names this process for its worker-id lease.
func instanceName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%x", host, os.Getpid(), b)
}

// payClient is the WeChat Pay client and the keys payments need.
type payClient struct {
	client   *payment.Client
	key      *rsa.PrivateKey
	platform wxpay.Keyring
}

// newPayClient builds the WeChat Pay client from the configuration.
func newPayClient(cfg config.Config, hc *http.Client) (payClient, error) {
	key, err := wxpay.ParsePrivateKey(cfg.WxPayMerchantKey.Bytes())
	if err != nil {
		return payClient{}, fmt.Errorf("TAKEOUT_WXPAY_MERCHANT_KEY: %w", err)
	}
	var keys []wxpay.PublicKey
	for _, entry := range strings.Split(cfg.WxPayPlatformKeys, ",") {
		serial, path, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok {
			return payClient{}, fmt.Errorf("TAKEOUT_WXPAY_PLATFORM_KEYS: want SERIAL=path, got %q", entry)
		}
		pemBytes, err := os.ReadFile(path) //nolint:gosec // G304: the operator names the key files
		if err != nil {
			return payClient{}, fmt.Errorf("TAKEOUT_WXPAY_PLATFORM_KEYS: %w", err)
		}
		k, err := wxpay.ParsePublicKey(pemBytes, serial)
		if err != nil {
			return payClient{}, fmt.Errorf("TAKEOUT_WXPAY_PLATFORM_KEYS %s: %w", serial, err)
		}
		keys = append(keys, k)
	}
	platform := wxpay.NewKeyring(keys...)
	client := payment.NewClient(payment.ClientOptions{
		Base: cfg.WxPayAPIBase, Merchant: wxpay.Merchant{MchID: cfg.WxPayMchID, Serial: cfg.WxPayMerchantSerial, Key: key},
		Platform: platform, AppID: cfg.WeChatAppID, NotifyURL: cfg.WxPayNotifyURL, HTTP: hc, Now: time.Now,
	})
	return payClient{client: client, key: key, platform: platform}, nil
}

// newPayments builds the WeChat Pay side from the configuration.
func newPayments(cfg config.Config, pool *pgxpool.Pool, pc payClient, orders *order.Service, effects *payment.Effects, returns payment.ReturnsBeforeRefund, logger *slog.Logger, reg prometheus.Registerer) (*payment.Service, *bill.Service, error) {
	client, key, platform := pc.client, pc.key, pc.platform
	payments, err := payment.NewService(payment.Options{
		Pool: pool, Client: client, Orders: orders, Effects: effects, Logger: logger, Now: time.Now,
		MchID: cfg.WxPayMchID, AppID: cfg.WeChatAppID, MerchantKey: key, Platform: platform, APIv3Key: cfg.WxPayAPIv3Key.Bytes(), V2Key: string(cfg.WxPayV2Key), Registerer: reg,
		GroupCommitMax: cfg.DatabaseGroupCommitMax, GroupCommitSlots: cfg.DatabasePaymentGroupSlots, RefundGap: cfg.WxPayRefundGap,
		Mode: cfg.WxPayMode, Returns: returns,
	})
	if err != nil {
		return nil, nil, err
	}
	bills, err := bill.NewService(bill.Options{Pool: pool, Source: client, FeeRateBps: cfg.WxPayFeeRateBps, Sharing: cfg.PartnerMode(), Now: time.Now, Logger: logger, Registerer: reg})
	return payments, bills, err
}
