package jobs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// sweepTag marks the jobs Sweep inserts.
const sweepTag = "sweep"

// SweepLockConns is the size of the pool the sweeps' locks are held on:
// one connection for each kind of sweep at work at once.
const SweepLockConns = 12

// sweepLockClass is the first key of the sweeps' advisory locks (the
// second is the kind's hash), apart from any other advisory lock.
const sweepLockClass = 0x73776570 // "swep"

// Sweep is a periodic job of which at most one copy works at a time. A
// sweep scans for what is due and does it all, so a copy that started
// while another runs would only do the same again; and copies of a
// sweep slower than its interval (a slow provider, a busy machine) held
// the workers the jobs it feeds need, 123 courier sweeps deep under the
// soak's load. A copy that finds another at work ends at once (it is
// completed, having done nothing).
//
// The one at work holds a PostgreSQL advisory lock on a connection of its
// own, not a unique job: a lock dies with its connection, so an instance
// killed mid-sweep holds nothing back, where a unique job would stay
// "running" until River rescued it; and a sweep that fails is retried as
// any job, where River discards a unique job whose retry finds a newer
// copy queued. With runOnStart, the leader inserts one as soon as it is
// elected.
func Sweep(interval time.Duration, args func() river.JobArgs, runOnStart bool) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return args(), &river.InsertOpts{Tags: []string{sweepTag}} },
		&river.PeriodicJobOpts{RunOnStart: runOnStart})
}

// sweepGuard is the worker middleware that lets one copy of each sweep
// work at a time.
type sweepGuard struct {
	river.MiddlewareDefaults
	pool *pgxpool.Pool
}

// Work runs a sweep's job only if no other copy of it is at work.
func (g *sweepGuard) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if !slices.Contains(job.Tags, sweepTag) {
		return doInner(ctx)
	}
	conn, err := g.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("sweep lock: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, sweepLockClass, job.Kind).Scan(&locked); err != nil {
		return fmt.Errorf("sweep lock: %w", err)
	}
	if !locked {
		return nil
	}
	defer func() {
		// Unlock even when the job's context has ended; a connection that
		// cannot is closed, which releases the lock with it.
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(unlockCtx, `SELECT pg_advisory_unlock($1, hashtext($2))`, sweepLockClass, job.Kind); err != nil {
			_ = conn.Conn().Close(unlockCtx)
		}
	}()
	return doInner(ctx)
}
