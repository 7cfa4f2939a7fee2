package order

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/statemachine"
)

// AcceptDeadlineSweepArgs is the periodic job that queues the
// accept-deadline job (AcceptDeadlineArgs) of each paid order its
// merchant did not accept by its deadline.
//
// The deadline is written by the statement that makes the order PAID
// (payment_settle, or OrderTransition and runEffects): on the order, for
// the customer and the board, and as a due row of its own
// (order_accept_deadlines), so no paid order is ever without it. The
// sweep reads the rows that came due, queues one job for each order
// still PAID, and deletes the rows it read, in one transaction. The due
// row is lighter than a River job for every paid order (a heap row and
// one index entry, its key, deleted in batches), and the order's own
// columns have no index, so its transitions stay heap-only updates
// (migration 00024); only the orders the kitchen left get a job, as the
// payment timeout's sweep does (TimeoutSweepArgs). River's workers apply
// the jobs in parallel, retry them, and keep the ones that keep failing
// as dead jobs.
type AcceptDeadlineSweepArgs struct{}

// Kind names the job.
func (AcceptDeadlineSweepArgs) Kind() string { return "order.accept_deadline_sweep" }

// AcceptDeadlineArgs is the job that moves on one paid order at its
// accept deadline, as Then (its rule when it was paid) says.
type AcceptDeadlineArgs struct {
	OrderID int64  `json:"order_id,string"`
	Then    string `json:"then"`
}

// Kind names the job.
func (AcceptDeadlineArgs) Kind() string { return "order.accept_deadline" }

// acceptSweepBatch is how many due rows one transaction of the sweep
// takes.
const acceptSweepBatch = 500

// acceptDeadlineActor is who the history rows name for the deadline's
// transitions.
var acceptDeadlineActor = Actor{Kind: statemachine.System, Name: "accept-deadline"}

// acceptSweepWorker runs the sweep.
type acceptSweepWorker struct {
	river.WorkerDefaults[AcceptDeadlineSweepArgs]
	s *Service
}

// Work queues the due orders' jobs.
func (w *acceptSweepWorker) Work(ctx context.Context, _ *river.Job[AcceptDeadlineSweepArgs]) error {
	_, err := w.s.QueueAcceptDeadlines(ctx)
	return err
}

// acceptDeadlineWorker applies one order's deadline.
type acceptDeadlineWorker struct {
	river.WorkerDefaults[AcceptDeadlineArgs]
	s *Service
}

// Work applies the deadline; an order that moved on meanwhile (accepted,
// cancelled, or applied by an earlier run) is done.
func (w *acceptDeadlineWorker) Work(ctx context.Context, job *river.Job[AcceptDeadlineArgs]) error {
	moved, err := w.s.ApplyAcceptDeadline(ctx, job.Args.OrderID, job.Args.Then)
	switch {
	case err != nil:
		w.s.acceptDeadlines.WithLabelValues(job.Args.Then, "failed").Inc()
		return err
	case moved:
		w.s.acceptDeadlines.WithLabelValues(job.Args.Then, "applied").Inc()
	default:
		w.s.acceptDeadlines.WithLabelValues(job.Args.Then, "moved_on").Inc()
	}
	return nil
}

// QueueAcceptDeadlines reads the accept deadlines that came due, queues
// the job of each order still PAID (unique by its arguments, so two
// sweeps at once queue one) and deletes the rows it read, a batch per
// transaction until none is left; it returns how many jobs it queued.
// An order no longer PAID (most: accepted in time) gets no job.
func (s *Service) QueueAcceptDeadlines(ctx context.Context) (int, error) {
	upTo := s.now()
	queued := 0
	for {
		type batch struct {
			read, queued, movedOn []dbsqlc.AcceptDeadlinesDueRow
		}
		b, err := db.WithTxV(ctx, s.opts.Pool, func(tx pgx.Tx) (batch, error) {
			var b batch
			rows, err := s.q.AcceptDeadlinesDue(ctx, tx, dbsqlc.AcceptDeadlinesDueParams{UpTo: upTo, MaxRows: acceptSweepBatch})
			if err != nil {
				return b, fmt.Errorf("read the accept deadlines due: %w", err)
			}
			b.read = rows
			ids := make([]int64, 0, len(rows))
			for _, r := range rows {
				ids = append(ids, r.OrderID)
				if r.Status != statemachine.Paid {
					b.movedOn = append(b.movedOn, r)
					continue
				}
				if _, err := s.opts.Jobs.InsertTx(ctx, tx, AcceptDeadlineArgs{OrderID: r.OrderID, Then: r.AcceptThen}, &river.InsertOpts{
					UniqueOpts: river.UniqueOpts{ByArgs: true},
				}); err != nil {
					return b, fmt.Errorf("insert the accept deadline job: %w", err)
				}
				b.queued = append(b.queued, r)
			}
			if len(ids) > 0 {
				if err := s.q.AcceptDeadlinesDelete(ctx, tx, dbsqlc.AcceptDeadlinesDeleteParams{UpTo: upTo, OrderIds: ids}); err != nil {
					return b, fmt.Errorf("delete the accept deadlines queued: %w", err)
				}
			}
			return b, nil
		})
		if err != nil {
			return queued, err
		}
		queued += len(b.queued)
		for _, r := range b.movedOn {
			s.acceptDeadlines.WithLabelValues(r.AcceptThen, "met").Inc()
		}
		if len(b.read) < acceptSweepBatch {
			return queued, nil
		}
	}
}

// ApplyAcceptDeadline moves on one paid order at its deadline, through
// the state table in its own transaction (AutoAccept or AutoReject, by
// the system): the same compare-and-set on status and version as a
// merchant's tap, so a merchant accepting as the deadline fires, or two
// runs at once, give one outcome and one history row. moved is false
// when the order had moved on already (accepted, cancelled, or applied
// by another run).
func (s *Service) ApplyAcceptDeadline(ctx context.Context, orderID int64, then string) (moved bool, err error) {
	event, reason := statemachine.AutoReject, "not accepted by its deadline: rejected and refunded"
	if then == AcceptThenAccept {
		event, reason = statemachine.AutoAccept, "not accepted by its deadline: accepted automatically"
	}
	a, err := s.Apply(ctx, orderID, event, acceptDeadlineActor, reason)
	if err := ignoreSettled(a, err); err != nil {
		return false, err
	}
	// A settled order (moved on, or gone) answers the zero Applied.
	return a.Order.ID != "" && !a.Replayed, nil
}
