package orderid

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// Lease is this instance's hold on a worker id in PostgreSQL. It is renewed
// well before it expires; if renewal fails until expiry, ValidUntil passes
// and the generator refuses ids rather than risk sharing a worker id.
type Lease struct {
	now    func() time.Time
	db     dbsqlc.DBTX
	q      *dbsqlc.Queries
	holder string
	ttl    time.Duration
	worker int32
	floor  time.Time    // ids of this worker id stay at or above it
	until  atomic.Int64 // unix nanoseconds, with a safety margin
	logger *slog.Logger
}

// margin is how much earlier than PostgreSQL's expiry we stop trusting the
// lease, to absorb clock differences between this host and the database.
const margin = 2 * time.Second

// AcquireLease takes a free worker id for holder (a unique instance name),
// on the clock now (the one the generator uses).
func AcquireLease(ctx context.Context, db dbsqlc.DBTX, holder string, ttl time.Duration, now func() time.Time, logger *slog.Logger) (*Lease, error) {
	l := &Lease{now: now, db: db, q: dbsqlc.New(), holder: holder, ttl: ttl, logger: logger}
	start := now()
	row, err := l.q.WorkerLeaseAcquire(ctx, db, dbsqlc.WorkerLeaseAcquireParams{Holder: holder, TtlSeconds: ttl.Seconds(), LocalEndMs: start.Add(ttl).UnixMilli()})
	if err != nil {
		return nil, fmt.Errorf("acquire worker id (all 1024 leased?): %w", err)
	}
	l.worker = row.WorkerID
	l.floor = time.UnixMilli(row.FloorMs)
	l.until.Store(start.Add(ttl - margin).UnixNano())
	return l, nil
}

// Worker is the leased worker id.
func (l *Lease) Worker() int { return int(l.worker) }

// Floor is the earliest time an id of this worker id may carry: past
// every id its earlier holders issued (or could have, before their lease
// ran out), whatever this host's clock says now.
func (l *Lease) Floor() time.Time { return l.floor }

// ValidUntil is when this instance must stop using the worker id.
func (l *Lease) ValidUntil() time.Time { return time.Unix(0, l.until.Load()) }

// Run renews the lease every ttl/3 until ctx ends, then releases it,
// recording next (the generator's NextFloor) as the floor of the worker
// id's next holder.
func (l *Lease) Run(ctx context.Context, next func() time.Time) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := l.q.WorkerLeaseRelease(rctx, l.db, dbsqlc.WorkerLeaseReleaseParams{WorkerID: l.worker, Holder: l.holder, FloorMs: next().UnixMilli()}); err != nil {
				l.logger.Warn("release worker id", "worker", l.worker, "err", err)
			}
			return
		case <-t.C:
			if err := l.Renew(ctx); err != nil && ctx.Err() == nil {
				l.logger.Error("renew worker id lease", "worker", l.worker, "err", err)
			}
		}
	}
}

// Renew extends the lease once.
func (l *Lease) Renew(ctx context.Context) error {
	start := l.now()
	_, err := l.q.WorkerLeaseRenew(ctx, l.db, dbsqlc.WorkerLeaseRenewParams{WorkerID: l.worker, Holder: l.holder, TtlSeconds: l.ttl.Seconds(), LocalEndMs: start.Add(l.ttl).UnixMilli()})
	if err != nil {
		return fmt.Errorf("renew worker lease %d: %w", l.worker, err)
	}
	l.until.Store(start.Add(l.ttl - margin).UnixNano())
	return nil
}
