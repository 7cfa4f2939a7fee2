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
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/config"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/httpapi"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/orderid"
	"github.com/takeout/takeout/internal/redisconn"
)

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	level, _ := config.ParseLogLevel(cfg.LogLevel) // validated by Load
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// serve runs the HTTP service until ctx ends, then shuts down gracefully:
// stop accepting, finish in-flight requests, stop background workers.
func serve(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)

	pool, err := db.Open(ctx, cfg.DatabaseURL, cfg.DatabaseMaxConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := db.NewMigrator(pool)
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

	lease, err := orderid.AcquireLease(ctx, pool, instanceName(), cfg.WorkerLeaseTTL, logger)
	if err != nil {
		return err
	}
	ids, err := orderid.New(orderid.Options{Worker: lease.Worker(), LeaseValidUntil: lease.ValidUntil, Registerer: reg})
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
	// Insert-only for now: jobs are inserted in the transactions that
	// cause them; the workers that run them come with the lifecycle.
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	orders, err := order.NewService(order.Options{
		Pool: pool, IDs: ids, Signer: order.NewSigner(cfg.ConfirmSecret.Bytes()), Idempotency: idem, Jobs: jobs,
		Logger: logger, Now: time.Now, TokenTTL: cfg.ConfirmTokenTTL, DedupWindow: cfg.OrderDedupWindow,
		PayWindow: cfg.OrderPayWindow, Registerer: reg,
	})
	if err != nil {
		return err
	}
	wx := auth.NewWeChat(cfg.WeChatAPIBase, cfg.WeChatAppID, string(cfg.WeChatAppSecret), &http.Client{Timeout: cfg.WeChatTimeout})

	handler, err := httpapi.NewServer(httpapi.Deps{
		Logger: logger, Pool: pool, Redis: rds, Migrator: migrator, Tokens: tokens, WeChat: wx,
		Catalog: cat, Orders: orders, Idempotency: idem, Registry: reg, MaxBodyBytes: cfg.MaxBodyBytes,
	})
	if err != nil {
		return err
	}

	// Background workers stop when serve returns, after the HTTP server.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var workers sync.WaitGroup
	defer func() { stopWork(); workers.Wait() }()
	workers.Go(func() { rds.Run(workCtx, time.Second) })
	workers.Go(func() { cat.RunInvalidations(workCtx, nil) })
	defer cat.Close()
	workers.Go(func() { lease.Run(workCtx) })
	workers.Go(func() { idem.RunPurges(workCtx, nil) })
	workers.Go(func() { pruneIdempotency(workCtx, idem, cfg.IdemPruneInterval, logger) })

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
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

// instanceName names this process for its worker-id lease.
func instanceName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%x", host, os.Getpid(), b)
}

// pruneIdempotency deletes expired idempotency records every interval.
// Every instance runs it; deleting expired rows twice is harmless.
func pruneIdempotency(ctx context.Context, idem *idempotency.Store, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := idem.Prune(ctx, time.Now())
			if err != nil && ctx.Err() == nil {
				logger.Error("prune idempotency records", "err", err)
			} else if n > 0 {
				logger.Info("pruned expired idempotency records", "count", n)
			}
		}
	}
}
