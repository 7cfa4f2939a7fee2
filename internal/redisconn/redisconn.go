// Package redisconn connects takeout to Redis and keeps track of whether
// Redis answers. Redis is a fast path and never the source of truth, so
// running without it (no URL configured, or Redis down) is a supported,
// degraded mode that callers check with Available and operators see in
// /readyz and the takeout_redis_degraded metric.
//
// One client type serves the three deployments: a single server, a Redis
// Cluster and a Sentinel-watched master (go-redis's UniversalClient). On a
// cluster, health is per master: some slots down is not all of Redis
// down, so State says partial and callers keep using the shards that
// answer.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// State is Redis's state as takeout sees it.
type State string

// The states reported by /readyz.
const (
	StateUp State = "up"
	// StatePartial: a cluster where some masters did not answer; keys of
	// their slots fall back to PostgreSQL until a replica takes over.
	StatePartial  State = "partial"
	StateDown     State = "down"
	StateDisabled State = "disabled"
)

// Mode is the kind of deployment TAKEOUT_REDIS_URL names.
type Mode string

// The modes.
const (
	ModeStandalone Mode = "standalone"
	ModeCluster    Mode = "cluster"
	ModeSentinel   Mode = "sentinel"
	ModeDisabled   Mode = "disabled"
)

// Conn is a Redis client plus its health. A Conn with no URL is disabled:
// Client is nil and Available is always false.
type Conn struct {
	// Client is nil when Redis is disabled.
	Client redis.UniversalClient
	mode   Mode
	prefix string
	logger *slog.Logger
	state  atomic.Value // State
	// mastersDown is how many cluster masters missed the last check.
	mastersDown atomic.Int64

	degraded prometheus.Gauge
	down     prometheus.Gauge
}

// Options configure New.
type Options struct {
	URL    string // empty disables Redis
	Prefix string // prepended to every key and channel
	Logger *slog.Logger
	// Registerer receives the takeout_redis_degraded gauge.
	Registerer prometheus.Registerer
}

// Redis must fail fast: a slow Redis must not make requests slow, since
// every caller has a PostgreSQL path to fall back to.
const (
	dialTimeout = 500 * time.Millisecond
	ioTimeout   = 500 * time.Millisecond
	poolTimeout = time.Second
)

// New returns a Conn for opts.URL. It does not wait for Redis: Run tracks
// its health from then on.
func New(opts Options) (*Conn, error) {
	c := &Conn{
		mode:   ModeDisabled,
		prefix: opts.Prefix,
		logger: opts.Logger,
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "takeout_redis_degraded",
			Help: "1 while takeout runs without Redis (disabled or unreachable), else 0.",
		}),
		down: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "takeout_redis_masters_down",
			Help: "Redis Cluster masters that missed the last health check (0 outside cluster mode).",
		}),
	}
	c.state.Store(StateDown)
	c.degraded.Set(1)
	if opts.Registerer != nil {
		for _, g := range []prometheus.Collector{c.degraded, c.down} {
			if err := opts.Registerer.Register(g); err != nil {
				return nil, fmt.Errorf("register redis metrics: %w", err)
			}
		}
	}
	if opts.URL == "" {
		return c, nil
	}
	client, mode, err := NewClient(opts.URL)
	if err != nil {
		return nil, err
	}
	c.Client, c.mode = client, mode
	return c, nil
}

// NewClient returns a client for raw, which names one of three
// deployments (go-redis's URL forms, plus mode=cluster):
//
//	redis://host:6379/0                                     one server
//	redis://host1:7000?addr=host2:7001&addr=host3:7002      a cluster (seed nodes)
//	redis://host1:7000?mode=cluster                         a cluster from one seed
//	redis://host1:26379?master_name=m&addr=host2:26379      a Sentinel set watching master m
//
// Timeouts are takeout's fail-fast ones unless the URL sets them.
func NewClient(raw string) (redis.UniversalClient, Mode, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", fmt.Errorf("parse redis url: %w", err)
	}
	q := u.Query()
	mode := Mode(q.Get("mode"))
	q.Del("mode")
	switch {
	case mode == "" && q.Has("master_name"):
		mode = ModeSentinel
	case mode == "" && q.Has("addr"):
		mode = ModeCluster
	case mode == "":
		mode = ModeStandalone
	}
	u.RawQuery = q.Encode()
	switch mode {
	case ModeStandalone:
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, "", fmt.Errorf("parse redis url: %w", err)
		}
		failFast(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.DialerRetries)
		return redis.NewClient(o), mode, nil
	case ModeCluster:
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, "", fmt.Errorf("parse redis cluster url: %w", err)
		}
		failFast(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.DialerRetries)
		return redis.NewClusterClient(o), mode, nil
	case ModeSentinel:
		o, err := redis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, "", fmt.Errorf("parse redis sentinel url: %w", err)
		}
		failFast(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.DialerRetries)
		return redis.NewFailoverClient(o), mode, nil
	}
	return nil, "", fmt.Errorf("parse redis url: unknown mode %q (want standalone, cluster or sentinel)", mode)
}

// failFast applies takeout's timeouts where the URL set none. One retry
// (a cluster's MOVED and ASK redirects are not retries and stay free),
// and one dial: a dead node must cost a request one connection refused,
// not five dials with backoffs.
func failFast(q url.Values, dial, read, write, pool *time.Duration, retries, dials *int) {
	for name, d := range map[string]*time.Duration{"dial_timeout": dial, "read_timeout": read, "write_timeout": write} {
		if !q.Has(name) {
			*d = ioTimeout
			if name == "dial_timeout" {
				*d = dialTimeout
			}
		}
	}
	if !q.Has("pool_timeout") {
		*pool = poolTimeout
	}
	if !q.Has("max_retries") {
		*retries = 1
	}
	if !q.Has("dialer_retries") {
		*dials = 1
	}
}

// Mode is the deployment the Conn talks to.
func (c *Conn) Mode() Mode { return c.mode }

// Key returns the prefixed key for name.
func (c *Conn) Key(name string) string { return c.prefix + name }

// Available reports whether Redis is configured and answered its last
// check (on a cluster: at least one master did).
func (c *Conn) Available() bool {
	s := c.State()
	return s == StateUp || s == StatePartial
}

// State reports Redis's state for /readyz.
func (c *Conn) State() State {
	if c.Client == nil {
		return StateDisabled
	}
	return c.state.Load().(State) //nolint:forcetypeassert // only States are stored
}

// MastersDown is how many cluster masters missed the last check.
func (c *Conn) MastersDown() int { return int(c.mastersDown.Load()) }

// Shard names the server that holds key: its cluster master's address,
// or "" outside cluster mode (one server holds every key). Callers keep
// per-shard state with it, such as a circuit breaker.
func (c *Conn) Shard(ctx context.Context, key string) string {
	cc, ok := c.Client.(*redis.ClusterClient)
	if !ok {
		return ""
	}
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return "?"
	}
	return m.Options().Addr
}

// Publish sends payload on channel: sharded pub/sub (SPUBLISH) on a
// cluster, so that a message travels to one shard's nodes instead of
// every node of the cluster; plain PUBLISH elsewhere.
func (c *Conn) Publish(ctx context.Context, channel, payload string) error {
	if c.Client == nil {
		return nil
	}
	if c.mode == ModeCluster {
		return c.Client.SPublish(ctx, channel, payload).Err()
	}
	return c.Client.Publish(ctx, channel, payload).Err()
}

// Run checks Redis every interval until ctx ends, keeping State current
// and logging each change. It returns at once when Redis is disabled.
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

// Check pings Redis once (every master of a cluster) and updates the
// state; Run calls it periodically.
func (c *Conn) Check(ctx context.Context) {
	if c.Client == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	state, down, err := c.probe(pctx)
	if ctx.Err() != nil {
		return
	}
	c.mastersDown.Store(int64(down))
	c.down.Set(float64(down))
	if was := c.state.Swap(state).(State); was != state { //nolint:forcetypeassert // only States are stored
		switch state {
		case StateUp:
			c.logger.Info("redis reachable", "mode", c.mode)
		case StatePartial:
			c.logger.Warn("redis cluster partly unreachable: keys of the missing masters fall back to PostgreSQL", "masters_down", down, "err", err)
		default:
			c.logger.Warn("redis unreachable: degraded mode", "mode", c.mode, "err", err)
		}
	}
	if state == StateDown {
		c.degraded.Set(1)
	} else {
		c.degraded.Set(0)
	}
}

func (c *Conn) probe(ctx context.Context) (State, int, error) {
	cc, ok := c.Client.(*redis.ClusterClient)
	if !ok {
		if err := c.Client.Ping(ctx).Err(); err != nil {
			return StateDown, 0, err
		}
		return StateUp, 0, nil
	}
	var up, down atomic.Int64
	var last atomic.Value
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		// Each master within its own share of the budget, so that one
		// that hangs does not make the answering ones look down.
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := m.Ping(pctx).Err(); err != nil {
			down.Add(1)
			last.Store(fmt.Errorf("%s: %w", m.Options().Addr, err))
			return nil
		}
		up.Add(1)
		return nil
	})
	if err == nil {
		if e, ok := last.Load().(error); ok {
			err = e
		}
	}
	switch {
	case up.Load() == 0:
		if err == nil {
			err = errors.New("no cluster master answered")
		}
		return StateDown, int(down.Load()), err
	case down.Load() > 0:
		return StatePartial, int(down.Load()), err
	}
	return StateUp, 0, nil
}

// Close closes the client.
func (c *Conn) Close() error {
	if c.Client == nil {
		return nil
	}
	return c.Client.Close()
}
