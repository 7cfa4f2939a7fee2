package bill

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// SweepArgs is the periodic job that finds the dates to reconcile and
// queues a RunArgs for each.
type SweepArgs struct{}

// Kind names the job.
func (SweepArgs) Kind() string { return "bill.sweep" }

// RunArgs reconciles one date (YYYY-MM-DD, Asia/Shanghai).
type RunArgs struct {
	Date string `json:"date"`
}

// Kind names the job.
func (RunArgs) Kind() string { return "bill.run" }

// maxPerSweep bounds the dates one sweep queues (a backfill of three
// months goes a few dozen at a time).
const maxPerSweep = 31

// SweepWorker runs SweepArgs.
type SweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	S    *Service
	Jobs order.JobInserter
}

// Work queues a run of every due date not done.
func (w *SweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	s := w.S
	now := s.o.Now()
	first, err := s.q.BillFirstPayment(ctx, s.o.Pool)
	if err != nil || first.IsZero() {
		return err // nothing paid yet: nothing to reconcile
	}
	rows, err := s.q.ReconciliationDoneSince(ctx, s.o.Pool, pgDate(Day(now).Add(-Kept)))
	if err != nil {
		return fmt.Errorf("read reconciliations: %w", err)
	}
	done := map[string]bool{}
	for _, d := range rows {
		done[d.Time.Format(time.DateOnly)] = true
	}
	due := Due(now, first, done)
	if len(due) > maxPerSweep {
		due = due[:maxPerSweep]
	}
	tx, err := s.o.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, d := range due {
		if _, err := w.Jobs.InsertTx(ctx, tx, RunArgs{Date: d.Format(time.DateOnly)},
			&river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: time.Hour}}); err != nil {
			return fmt.Errorf("queue reconciliation of %s: %w", d.Format(time.DateOnly), err)
		}
	}
	return tx.Commit(ctx)
}

// RunWorker runs RunArgs.
type RunWorker struct {
	river.WorkerDefaults[RunArgs]
	S *Service
}

// notReadyWait is how long a run waits for a bill that is not out yet.
const notReadyWait = 30 * time.Minute

// Work reconciles the date; a bill not out yet is waited for, a failure
// retried by the job.
func (w *RunWorker) Work(ctx context.Context, job *river.Job[RunArgs]) error {
	day, err := time.ParseInLocation(time.DateOnly, job.Args.Date, Shanghai)
	if err != nil {
		return river.JobCancel(fmt.Errorf("date %q: %w", job.Args.Date, err))
	}
	_, err = w.S.Run(ctx, day)
	if errors.Is(err, ErrNotReady) {
		return river.JobSnooze(notReadyWait)
	}
	return err
}

// ErrDisabled answers the routes when payments are off.
var ErrDisabled = problem.New(problem.Unavailable, "reconciliation needs payments, which are not configured")

// HandleGet serves GET /admin/v1/reconciliations/{date} (admins).
func HandleGet(s *Service) http.Handler {
	return handleDay(s, s.Get) // a nil s's method value is only taken, never called
}

// HandleRun serves POST /admin/v1/reconciliations/{date}/run (admins):
// the date reconciled now, again if it was.
func HandleRun(s *Service) http.Handler {
	return handleDay(s, s.Run)
}

// handleDay answers a route of one date with what do makes of it.
func handleDay(s *Service, do func(context.Context, time.Time) (Reconciliation, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			web.Error(w, r, ErrDisabled)
			return
		}
		day, err := ParseDay(r.PathValue("date"), s.o.Now())
		if err == nil {
			err = web.CheckQuery(r)
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		rec, err := do(r.Context(), day)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, rec)
	})
}
