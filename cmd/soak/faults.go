package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/takeout/takeout/internal/lab/ha"
)

// The fault kinds, in the order the schedule cycles through them.
var allFaults = []string{
	"redis-kill", "pg-latency", "api-kill", "redis-flushall", "pg-reset", "redis-latency",
	"pg-restart", "redis-timeout", "pg-timeout", "redis-reset",
}

// The fault kinds of the HA stack (-ha): hosts of the Redis Cluster,
// the Patroni cluster and etcd killed or reshaped under load, and every
// kind of the single servers' soak done to the cluster: the network's
// faults on every proxy of an engine at once, a whole Redis shard lost
// (redis-kill: its master and replica killed and back empty), every
// master flushed, the primary's PostgreSQL crashed under a living Patroni
// (pg-restart).
var haFaults = []string{
	"redis-master-kill", "pg-latency", "pg-primary-kill", "redis-latency", "redis-slot-migrate", "pg-reset",
	"pg-switchover", "redis-kill", "etcd-restart", "pg-timeout", "redis-flushall", "api-kill",
	"redis-reset", "pg-restart", "redis-timeout",
}

// faultEvent is one injected fault, for the report's timeline.
type faultEvent struct {
	Kind    string  `json:"kind"`
	AtS     float64 `json:"at_s"`
	LastedS float64 `json:"lasted_s"`
	Detail  string  `json:"detail,omitempty"`
	Error   string  `json:"error,omitempty"`
	// OutageS is how long the fault's engine had no one to serve it
	// (slots without a master, no writable primary), where it says.
	OutageS *float64 `json:"outage_s,omitempty"`
	// RecoveryS is the seconds from the fault's start until orders were
	// placed again after the longest pause in placement that followed
	// it; PauseS is that pause (see recoveries).
	RecoveryS *float64 `json:"recovery_s,omitempty"`
	PauseS    *float64 `json:"pause_s,omitempty"`
}

// injector breaks things on a schedule.
type injector struct {
	o     options
	pg    *postgres
	redis *redisServer
	px    *proxies
	rc    *ha.RedisCluster
	pat   *ha.Patroni
	// direct reaches the primary past the instances (-ha).
	direct querier
	insts  []*instance
	start  time.Time
	logf   func(string, ...any)

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
		detail, outage, err := f.injectHA(ctx, kind)
		if outage < 0 {
			detail, err = f.inject(ctx, kind)
		}
		ev := faultEvent{Kind: kind, AtS: at.Sub(f.start).Seconds(), LastedS: time.Since(at).Seconds(), Detail: detail}
		if outage > 0 {
			s := outage.Seconds()
			ev.OutageS = &s
		}
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

// injectHA injects the HA stack's faults; outage is negative for a kind
// it does not know, 0 when the fault has no outage of its own.
func (f *injector) injectHA(ctx context.Context, kind string) (string, time.Duration, error) {
	// A fault, once started, always completes its healing, even when the
	// run ends meanwhile.
	ctx = context.WithoutCancel(ctx)
	switch kind {
	case "redis-master-kill":
		addr, gap, err := f.rc.KillMaster(ctx)
		return fmt.Sprintf("SIGKILL master %s; its replica took over after %.1fs; restarted as a replica", addr, gap.Seconds()), gap, err
	case "redis-slot-migrate":
		desc, err := f.rc.MigrateSlots(ctx, 200)
		return "resharded " + desc, 0, err
	case "pg-primary-kill":
		at := time.Now()
		name, gap, err := f.pat.KillPrimary(ctx)
		detail := fmt.Sprintf("SIGKILL primary %s (Patroni and PostgreSQL); writable again after %.1fs; rejoined as a replica", name, gap.Seconds())
		return f.riverBack(ctx, at, detail, gap, err)
	case "pg-switchover":
		at := time.Now()
		desc, gap, err := f.pat.Switchover(ctx)
		return f.riverBack(ctx, at, fmt.Sprintf("switchover %s; writable again after %.1fs", desc, gap.Seconds()), gap, err)
	case "etcd-restart":
		name, err := f.pat.RestartEtcd(ctx)
		return "SIGKILL and restart " + name, 0, err
	}
	if f.rc == nil {
		return "", -1, nil
	}
	// The single servers' kinds, as the cluster meets them.
	switch kind {
	case "redis-kill":
		addr, gap, err := f.rc.KillShard(ctx, f.faultLength()/2)
		return fmt.Sprintf("SIGKILL the shard of master %s (master and replica), back empty after %.1fs", addr, gap.Seconds()), gap, err
	case "redis-flushall":
		return "FLUSHALL on every master", 0, f.rc.FlushAll(ctx)
	case "pg-restart":
		at := time.Now()
		name, gap, err := f.pat.CrashPrimaryPostgres(ctx)
		return f.riverBack(ctx, at, fmt.Sprintf("SIGKILL the PostgreSQL of primary %s (Patroni lives); writable again after %.1fs", name, gap.Seconds()), gap, err)
	}
	return "", -1, nil
}

// riverBack waits, after a PostgreSQL failover, until River has a
// leader again on the new primary (its periodic jobs, the payment sweeps
// among them, run on the leader alone), and says when in detail. The
// notifiers reconnect by themselves; until they do, workers find jobs by
// polling (TAKEOUT_JOB_POLL_INTERVAL).
func (f *injector) riverBack(ctx context.Context, at time.Time, detail string, gap time.Duration, err error) (string, time.Duration, error) {
	if err != nil {
		return detail, gap, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var leaders int
		qerr := f.direct.QueryRow(ctx, `SELECT count(*) FROM river_leader WHERE expires_at > now()`).Scan(&leaders)
		if qerr == nil && leaders == 1 {
			return fmt.Sprintf("%s; River had a leader %.1fs after the fault (checked once the cluster was whole)", detail, time.Since(at).Seconds()), gap, nil
		}
		sleep(ctx, 250*time.Millisecond)
	}
	return detail, gap, errors.New("after the failover River elected no leader within 60s")
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
