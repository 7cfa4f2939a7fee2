package orderid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// Lease is this instance's hold on a worker id in PostgreSQL. It is renewed
// well before it expires; if renewal fails until expiry, ValidUntil passes
// and the generator refuses ids rather than risk sharing a worker id. Once
// the database answers again, a lease found expired is taken anew (maybe
// another worker id) and the generator moves onto it.
type Lease struct {
	now    func() time.Time
	db     dbsqlc.DBTX
	q      *dbsqlc.Queries
	holder string
	ttl    time.Duration
	worker atomic.Int32
	floor  time.Time    // ids of this worker id stay at or above it
	until  atomic.Int64 // unix nanoseconds, with a safety margin
	logger *slog.Logger
}

// margin is how much earlier than PostgreSQL's expiry we stop trusting the
// lease, to absorb clock differences between this host and the database.
const margin = 2 * time.Second

// AcquireLease takes a free worker id for holder (a unique instance name),
// on the clock now (the one the generator uses).
func AcquireLease(ctx context.Context, conn dbsqlc.DBTX, holder string, ttl time.Duration, now func() time.Time, logger *slog.Logger) (*Lease, error) {
	l := &Lease{now: now, db: conn, q: dbsqlc.New(), holder: holder, ttl: ttl, logger: logger}
	if err := l.acquire(ctx, nil); err != nil {
		return nil, err
	}
	return l, nil
}

// acquire takes a free worker id and moves g (when there is one) onto
// it. The lease is valid only once until is stored, last.
func (l *Lease) acquire(ctx context.Context, g *Generator) error {
	start := l.now()
	row, err := l.q.WorkerLeaseAcquire(ctx, l.db, dbsqlc.WorkerLeaseAcquireParams{Holder: l.holder, TtlSeconds: l.ttl.Seconds(), LocalEndMs: start.Add(l.ttl).UnixMilli()})
	if err != nil {
		return fmt.Errorf("acquire worker id (all 1024 leased?): %w", err)
	}
	l.worker.Store(row.WorkerID)
	l.floor = time.UnixMilli(row.FloorMs)
	if g != nil {
		g.rebase(int(row.WorkerID), l.floor)
	}
	l.until.Store(start.Add(l.ttl - margin).UnixNano())
	return nil
}

// Worker is the leased worker id.
func (l *Lease) Worker() int { return int(l.worker.Load()) }

// Floor is the earliest time an id of this worker id may carry: past
// every id its earlier holders issued (or could have, before their lease
// ran out), whatever this host's clock says now.
func (l *Lease) Floor() time.Time { return l.floor }

// ValidUntil is when this instance must stop using the worker id.
func (l *Lease) ValidUntil() time.Time { return time.Unix(0, l.until.Load()) }

// Run renews the lease every ttl/3 until ctx ends, then releases it,
// recording g's next floor as the floor of the worker id's next holder.
// A renewal that fails is tried again every second, so a database outage
// shorter than the lease costs nothing; a lease that expired meanwhile
// is taken anew and g moved onto it.
func (l *Lease) Run(ctx context.Context, g *Generator) {
	t := time.NewTimer(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := l.q.WorkerLeaseRelease(rctx, l.db, dbsqlc.WorkerLeaseReleaseParams{WorkerID: l.worker.Load(), Holder: l.holder, FloorMs: g.NextFloor().UnixMilli()}); err != nil {
				l.logger.Warn("release worker id", "worker", l.Worker(), "err", err)
			}
			return
		case <-t.C:
			next := l.ttl / 3
			if err := l.keep(ctx, g); err != nil && ctx.Err() == nil {
				l.logger.Error("renew worker id lease", "worker", l.Worker(), "err", err)
				next = min(next, time.Second)
			}
			t.Reset(next)
		}
	}
}

// keep renews the lease, or takes a new one when it expired (the
// database says it is no longer ours) and moves g onto it.
func (l *Lease) keep(ctx context.Context, g *Generator) error {
	err := l.Renew(ctx)
	if !errors.Is(err, db.ErrNotFound) {
		return err
	}
	old := l.Worker()
	l.until.Store(0) // ours no more: refuse ids until the new lease is in place
	if err := l.acquire(ctx, g); err != nil {
		return fmt.Errorf("worker lease %d expired: %w", old, err)
	}
	l.logger.Warn("worker id lease had expired; leased another", "old_worker", old, "worker", l.Worker())
	return nil
}

// Renew extends the lease once.
func (l *Lease) Renew(ctx context.Context) error {
	start := l.now()
	_, err := l.q.WorkerLeaseRenew(ctx, l.db, dbsqlc.WorkerLeaseRenewParams{WorkerID: l.worker.Load(), Holder: l.holder, TtlSeconds: l.ttl.Seconds(), LocalEndMs: start.Add(l.ttl).UnixMilli()})
	if err != nil {
		return fmt.Errorf("renew worker lease %d: %w", l.Worker(), err)
	}
	l.until.Store(start.Add(l.ttl - margin).UnixNano())
	return nil
}
