package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/takeout/takeout/internal/redisconn"
)

// breakers keep the idempotency layer off a Redis server that keeps
// failing: one circuit breaker per shard, so that on a cluster a master
// that died sends only its own slots' keys to PostgreSQL while the
// others keep their fast path. Outside cluster mode there is one shard.
type breakers struct {
	redis  *redisconn.Conn
	logger *slog.Logger
	open   prometheus.Gauge

	mu sync.Mutex
	m  map[string]*gobreaker.CircuitBreaker[any]
}

func newBreakers(rds *redisconn.Conn, logger *slog.Logger) *breakers {
	return &breakers{
		redis: rds, logger: logger, m: map[string]*gobreaker.CircuitBreaker[any]{},
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "takeout_idempotency_redis_breaker_open",
			Help: "Redis shards (1 outside cluster mode) whose circuit breaker keeps the idempotency layer on PostgreSQL alone.",
		}),
	}
}

// forKey returns the breaker of the shard that holds key.
func (b *breakers) forKey(ctx context.Context, key string) *gobreaker.CircuitBreaker[any] {
	return b.forShard(b.redis.Shard(ctx, key))
}

func (b *breakers) forShard(shard string) *gobreaker.CircuitBreaker[any] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cb, ok := b.m[shard]; ok {
		return cb
	}
	cb := gobreaker.NewCircuitBreaker[any](gobreaker.Settings{
		Name:        "redis-idempotency " + shard,
		MaxRequests: 1,
		Interval:    10 * time.Second,
		Timeout:     2 * time.Second,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 3 },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.logger.Warn("idempotency redis circuit breaker", "shard", shard, "from", from.String(), "to", to.String())
			switch {
			case to == gobreaker.StateOpen:
				b.open.Inc()
			case from == gobreaker.StateOpen:
				b.open.Dec()
			}
		},
		IsSuccessful: func(err error) bool { return err == nil || errors.Is(err, redis.Nil) },
		// A caller that went away says nothing of Redis. Counted as
		// failures, a few client disconnects in a row would send every
		// request to PostgreSQL for the breaker's timeout, and leave the
		// disconnected requests' claims unreleased.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
	})
	b.m[shard] = cb
	return cb
}

// state is the worst state of the breakers: open when any shard's is
// open, then half-open, else closed.
func (b *breakers) state() gobreaker.State {
	b.mu.Lock()
	defer b.mu.Unlock()
	worst := gobreaker.StateClosed
	for _, cb := range b.m {
		switch cb.State() {
		case gobreaker.StateOpen:
			return gobreaker.StateOpen
		case gobreaker.StateHalfOpen:
			worst = gobreaker.StateHalfOpen
		}
	}
	return worst
}
