// Package redisconn connects takeout to Redis and keeps track of whether
// Redis answers. Redis is a fast path and never the source of truth, so
// running without it (no URL configured, or Redis down) is a supported,
// degraded mode that callers check with Available and operators see in
// /readyz and the takeout_redis_degraded metric.
package redisconn

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// State is Redis's state as takeout sees it.
type State string

// The states reported by /readyz.
const (
	StateUp       State = "up"
	StateDown     State = "down"
	StateDisabled State = "disabled"
)

// Conn is a Redis client plus its health. A Conn with no URL is disabled:
// Client is nil and Available is always false.
type Conn struct {
	// Client is nil when Redis is disabled.
	Client *redis.Client
	prefix string
	logger *slog.Logger
	up     atomic.Bool

	degraded prometheus.Gauge
}

// Options configure New.
type Options struct {
	URL    string // empty disables Redis
	Prefix string // prepended to every key and channel
	Logger *slog.Logger
	// Registerer receives the takeout_redis_degraded gauge.
	Registerer prometheus.Registerer
}

// New returns a Conn for opts.URL. It does not wait for Redis: Run tracks
// its health from then on.
func New(opts Options) (*Conn, error) {
	c := &Conn{
		prefix: opts.Prefix,
		logger: opts.Logger,
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "takeout_redis_degraded",
			Help: "1 while takeout runs without Redis (disabled or unreachable), else 0.",
		}),
	}
	c.degraded.Set(1)
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(c.degraded); err != nil {
			return nil, fmt.Errorf("register redis metrics: %w", err)
		}
	}
	if opts.URL == "" {
		return c, nil
	}
	ro, err := redis.ParseURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	// Redis must fail fast: a slow Redis must not make requests slow, since
	// every caller has a PostgreSQL path to fall back to.
	ro.DialTimeout = 500 * time.Millisecond
	ro.ReadTimeout = 500 * time.Millisecond
	ro.WriteTimeout = 500 * time.Millisecond
	ro.PoolTimeout = time.Second
	ro.MaxRetries = 1
	c.Client = redis.NewClient(ro)
	return c, nil
}

// Key returns the prefixed key for name.
func (c *Conn) Key(name string) string { return c.prefix + name }

// Available reports whether Redis is configured and answered its last ping.
func (c *Conn) Available() bool { return c.Client != nil && c.up.Load() }

// State reports Redis's state for /readyz.
func (c *Conn) State() State {
	switch {
	case c.Client == nil:
		return StateDisabled
	case c.up.Load():
		return StateUp
	default:
		return StateDown
	}
}

// Run pings Redis every interval until ctx ends, keeping State current and
// logging each change. It returns at once when Redis is disabled.
func (c *Conn) Run(ctx context.Context, interval time.Duration) {
	if c.Client == nil {
		c.logger.Info("redis disabled: running on PostgreSQL alone")
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		c.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check pings Redis once and updates the state; Run calls it periodically.
func (c *Conn) Check(ctx context.Context) {
	if c.Client == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err := c.Client.Ping(pctx).Err()
	if ctx.Err() != nil {
		return
	}
	up := err == nil
	if was := c.up.Swap(up); was != up {
		if up {
			c.logger.Info("redis reachable")
		} else {
			c.logger.Warn("redis unreachable: degraded mode", "err", err)
		}
	}
	if up {
		c.degraded.Set(0)
	} else {
		c.degraded.Set(1)
	}
}

// Close closes the client.
func (c *Conn) Close() error {
	if c.Client == nil {
		return nil
	}
	return c.Client.Close()
}
