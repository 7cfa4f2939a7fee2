package order

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
)

// AcceptDeadlineSweepArgs is the periodic job that moves on each paid
// order its merchant did not accept by its deadline: accepted or
// rejected and refunded, as the order's AcceptDeadline says.
//
// The deadline is written by the statement that makes the order PAID
// (payment_settle, or OrderTransition and runEffects): on the order, for
// the customer and the board, and as a due row of its own
// (order_accept_deadlines), so no paid order is ever without it. The
// sweep reads the due rows by their deadline. The row is lighter than a
// River job (a heap row and one index entry, deleted in batches), and
// the order's own columns have no index, so its transitions stay
// heap-only updates (migration 00024). The row's key is its deadline and
// order, its only index.
type AcceptDeadlineSweepArgs struct{}

// Kind names the job.
func (AcceptDeadlineSweepArgs) Kind() string { return "order.accept_deadline_sweep" }

// acceptSweepBatch is how many due orders one read of the sweep takes.
const acceptSweepBatch = 100

// acceptDeadlineActor is who the history rows name for the deadline's
// transitions.
var acceptDeadlineActor = Actor{Kind: statemachine.System, Name: "accept-deadline"}

// acceptSweepWorker runs the sweep.
type acceptSweepWorker struct {
	river.WorkerDefaults[AcceptDeadlineSweepArgs]
	s *Service
}

// Work applies the due deadlines. A deadline that could not be applied
// now is applied by the next sweep: the order is still paid and due.
func (w *acceptSweepWorker) Work(ctx context.Context, _ *river.Job[AcceptDeadlineSweepArgs]) error {
	_, err := w.s.ApplyAcceptDeadlines(ctx)
	return err
}

// Timeout bounds one sweep: a backlog left over is the next sweep's.
func (w *acceptSweepWorker) Timeout(*river.Job[AcceptDeadlineSweepArgs]) time.Duration {
	return time.Minute
}

// ApplyAcceptDeadlines moves on every paid order whose accept deadline
// has passed, each through the state table in its own transaction
// (AutoAccept or AutoReject, by the system), and returns how many it
// moved. The transition is a compare-and-set on the order's status and
// version like a merchant's tap, so a merchant accepting as the deadline
// fires, or two sweeps at once, give one outcome and one history row:
// the loser finds the order moved on and changes nothing. It deletes the
// due row of each deadline it applied or found moved on (most: accepted
// in time); an order whose transition fails is counted, logged and keeps
// its row for the next sweep, and the error returned names the first.
func (s *Service) ApplyAcceptDeadlines(ctx context.Context) (int, error) {
	upTo := s.now()
	applied := 0
	failed := map[int64]bool{}
	var firstErr error
	for {
		rows, err := s.q.AcceptDeadlinesDue(ctx, s.opts.Pool, dbsqlc.AcceptDeadlinesDueParams{UpTo: upTo, MaxRows: acceptSweepBatch})
		if err != nil {
			return applied, fmt.Errorf("read the accept deadlines due: %w", err)
		}
		var done []int64
		for _, r := range rows {
			if failed[r.OrderID] {
				continue
			}
			moved, err := false, error(nil)
			if r.Status == statemachine.Paid {
				moved, err = s.applyAcceptDeadline(ctx, r.OrderID, r.AcceptThen)
			}
			switch {
			case err != nil:
				failed[r.OrderID] = true
				s.acceptDeadlines.WithLabelValues(r.AcceptThen, "failed").Inc()
				s.opts.Logger.WarnContext(ctx, "accept deadline: the order could not be moved on; the next sweep tries again",
					"order_id", r.OrderID, "then", r.AcceptThen, "err", err)
				if firstErr == nil {
					firstErr = fmt.Errorf("accept deadline of order %d: %w", r.OrderID, err)
				}
				continue
			case moved:
				applied++
				s.acceptDeadlines.WithLabelValues(r.AcceptThen, "applied").Inc()
			default:
				s.acceptDeadlines.WithLabelValues(r.AcceptThen, "moved_on").Inc()
			}
			done = append(done, r.OrderID)
		}
		if len(done) > 0 {
			if err := s.q.AcceptDeadlinesDelete(ctx, s.opts.Pool, dbsqlc.AcceptDeadlinesDeleteParams{UpTo: upTo, OrderIds: done}); err != nil {
				return applied, fmt.Errorf("delete the accept deadlines dealt with: %w", err)
			}
		}
		if len(rows) < acceptSweepBatch || len(done) == 0 {
			return applied, firstErr
		}
	}
}

// applyAcceptDeadline applies one order's deadline; moved is false when
// the order had moved on already (accepted, cancelled, or applied by
// another sweep).
func (s *Service) applyAcceptDeadline(ctx context.Context, orderID int64, then string) (moved bool, err error) {
	event, reason := statemachine.AutoReject, "not accepted by its deadline: rejected and refunded"
	if then == AcceptThenAccept {
		event, reason = statemachine.AutoAccept, "not accepted by its deadline: accepted automatically"
	}
	a, err := s.Apply(ctx, orderID, event, acceptDeadlineActor, reason)
	if p, ok := problem.As(err); ok && (p.Type == problem.OrderStatusConflict || p.Type == problem.NotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !a.Replayed, nil
}
