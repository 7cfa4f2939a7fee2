package courier

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
)

// PlaceArgs is the job that places a delivery with its provider.
type PlaceArgs struct {
	DeliveryID int64 `json:"delivery_id,string"`
}

// Kind names the job.
func (PlaceArgs) Kind() string { return "courier.place" }

// CancelArgs is the job that cancels a delivery its order no longer
// needs (the order was refunded).
type CancelArgs struct {
	DeliveryID int64 `json:"delivery_id,string"`
}

// Kind names the job.
func (CancelArgs) Kind() string { return "courier.cancel" }

// SweepArgs is the periodic job that asks about late deliveries and
// moves on the placements no rider took.
type SweepArgs struct{}

// Kind names the job.
func (SweepArgs) Kind() string { return "courier.sweep" }

type placeWorker struct {
	river.WorkerDefaults[PlaceArgs]
	s *Service
}

// Work places the delivery; a try whose outcome is unknown is tried
// again (the provider answers a repeat of our number as placed).
func (w *placeWorker) Work(ctx context.Context, job *river.Job[PlaceArgs]) error {
	err := w.s.place(ctx, job.Args.DeliveryID)
	if errors.Is(err, errRetry) && job.Attempt >= placeTries {
		// The provider is down or silent for long: the late sweep places
		// it when it answers (a QUOTED delivery stays unheard).
		w.s.o.Logger.WarnContext(ctx, "placement left to the sweep", "delivery_id", job.Args.DeliveryID, "error", err)
		return nil
	}
	return err
}

// placeTries is how often the place job tries before it leaves the
// placement to the late sweep.
const placeTries = 6

// NextRetry tries an unknown placement again soon: a rider is waiting
// for no one until it is placed.
func (w *placeWorker) NextRetry(job *river.Job[PlaceArgs]) time.Time {
	return time.Now().Add(min(time.Duration(job.Attempt)*time.Second, 30*time.Second))
}

type cancelWorker struct {
	river.WorkerDefaults[CancelArgs]
	s *Service
}

// Work cancels the delivery at its provider and records it.
func (w *cancelWorker) Work(ctx context.Context, job *river.Job[CancelArgs]) error {
	return w.s.cancel(ctx, job.Args.DeliveryID, "order cancelled", "")
}

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	s *Service
}

// Work runs a sweep; what failed in it is asked about again by the next.
func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.s.Sweep(ctx)
	if err != nil {
		w.s.o.Logger.WarnContext(ctx, "courier sweep", "error", err)
	}
	return nil
}

// AddWorkers registers the couriers' job workers.
func (s *Service) AddWorkers(w *river.Workers) {
	river.AddWorker(w, &placeWorker{s: s})
	river.AddWorker(w, &cancelWorker{s: s})
	river.AddWorker(w, &sweepWorker{s: s})
}

// Kinds are the couriers' job kinds.
func Kinds() []string { return []string{PlaceArgs{}.Kind(), CancelArgs{}.Kind(), SweepArgs{}.Kind()} }
