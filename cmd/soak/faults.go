package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fault kinds, in the order the schedule cycles through them.
var allFaults = []string{
	"redis-kill", "pg-latency", "api-kill", "redis-flushall", "pg-reset", "redis-latency",
	"pg-restart", "redis-timeout", "pg-timeout", "redis-reset",
}

// faultEvent is one injected fault, for the report's timeline.
type faultEvent struct {
	Kind    string  `json:"kind"`
	AtS     float64 `json:"at_s"`
	LastedS float64 `json:"lasted_s"`
	Detail  string  `json:"detail,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// injector breaks things on a schedule.
type injector struct {
	o     options
	pg    *postgres
	redis *redisServer
	px    *proxies
	insts []*instance
	start time.Time
	logf  func(string, ...any)

	mu       sync.Mutex
	counts   map[string]int
	timeline []faultEvent
}

// run injects one fault every o.faultEvery until ctx ends, cycling
// through the enabled kinds, and leaves everything healed.
func (f *injector) run(ctx context.Context) {
	if len(f.o.faults) == 0 {
		return
	}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.o.faultEvery / 2):
		}
		kind := f.o.faults[i%len(f.o.faults)]
		at := time.Now()
		detail, err := f.inject(ctx, kind)
		ev := faultEvent{Kind: kind, AtS: at.Sub(f.start).Seconds(), LastedS: time.Since(at).Seconds(), Detail: detail}
		if err != nil {
			ev.Error = err.Error()
			f.logf("fault %s failed: %v", kind, err)
		} else {
			f.logf("fault %s (%s) over after %.1fs", kind, detail, ev.LastedS)
		}
		f.mu.Lock()
		f.counts[kind]++
		f.timeline = append(f.timeline, ev)
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(0, f.o.faultEvery/2-time.Since(at))):
		}
	}
}

// faultLength is how long a toxic stays on.
func (f *injector) faultLength() time.Duration {
	return min(6*time.Second, max(2*time.Second, f.o.faultEvery/3))
}

func (f *injector) inject(ctx context.Context, kind string) (string, error) {
	// A fault, once started, always completes its healing, even when the
	// run ends meanwhile.
	heal := context.WithoutCancel(ctx)
	d := f.faultLength()
	switch kind {
	case "redis-kill":
		f.redis.kill()
		sleep(ctx, d/2)
		return "SIGKILL, restart empty", f.redis.start(heal)
	case "redis-flushall":
		c := redis.NewClient(&redis.Options{Addr: f.redis.addr()})
		defer c.Close()
		return "FLUSHALL", c.FlushAll(heal).Err()
	case "redis-latency":
		return fmt.Sprintf("400ms±200ms for %s", d), f.px.toxic(ctx, f.px.redis, `{"type":"latency","attributes":{"latency":400,"jitter":200}}`, d, false)
	case "redis-timeout":
		return fmt.Sprintf("black hole for %s", d), f.px.toxic(ctx, f.px.redis, `{"type":"timeout","attributes":{"timeout":0}}`, d, true)
	case "redis-reset":
		return fmt.Sprintf("connections reset for %s", d), f.px.toxic(ctx, f.px.redis, `{"type":"reset_peer","attributes":{"timeout":50}}`, d, true)
	case "pg-latency":
		return fmt.Sprintf("100ms±50ms for %s", d), f.px.toxic(ctx, f.px.pg, `{"type":"latency","attributes":{"latency":100,"jitter":50}}`, d, false)
	case "pg-timeout":
		return fmt.Sprintf("black hole for %s", d), f.px.toxic(ctx, f.px.pg, `{"type":"timeout","attributes":{"timeout":0}}`, d, true)
	case "pg-reset":
		return fmt.Sprintf("connections reset for %s", d), f.px.toxic(ctx, f.px.pg, `{"type":"reset_peer","attributes":{"timeout":50}}`, d, true)
	case "pg-restart":
		return "immediate stop (crash), recovery, start", f.pg.crashRestart(heal, time.Second)
	case "api-kill":
		in := f.insts[rand.IntN(len(f.insts))]
		in.kill()
		sleep(ctx, time.Second)
		return fmt.Sprintf("SIGKILL instance %d, restart", in.n), in.start(heal)
	}
	return "", fmt.Errorf("unknown fault %q", kind)
}

func (f *injector) results() (map[string]int, []faultEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := map[string]int{}
	for _, k := range f.o.faults {
		counts[k] = f.counts[k]
	}
	return counts, append([]faultEvent(nil), f.timeline...)
}
