package orderstream

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// PruneArgs is the periodic job that drops events older than the
// retention: a board away longer than that reloads its orders instead
// (its Last-Event-ID is then unknown: ResetEvent).
type PruneArgs struct{}

// Kind names the job.
func (PruneArgs) Kind() string { return "orderstream.prune" }

// PruneWorker prunes the outbox.
type PruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	Hub       *Hub
	Retention time.Duration
	Now       func() time.Time
}

// Work deletes old events a batch at a time until none are left.
func (w *PruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error {
	before := w.Now().Add(-w.Retention)
	for {
		n, err := w.Hub.q.OrderEventsPrune(ctx, w.Hub.opts.Pool, before)
		if err != nil {
			return fmt.Errorf("prune order events: %w", err)
		}
		if n == 0 {
			return nil
		}
	}
}
