package idempotency

import (
	"context"

	"github.com/riverqueue/river"
)

// PruneArgs is the periodic job that deletes expired records.
type PruneArgs struct{}

// Kind names the job.
func (PruneArgs) Kind() string { return "idempotency.prune" }

// PruneWorker deletes expired idempotency records.
type PruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	Store *Store
}

// Work prunes; running it twice is harmless.
func (w *PruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error {
	_, err := w.Store.Prune(ctx, w.Store.opts.Now())
	return err
}
