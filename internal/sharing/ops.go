package sharing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
)

// SweepArgs is the periodic job that shares, before WeChat Pay's deadline
// for frozen funds, the payments of orders nobody completed, and queues
// again the shares whose jobs went quiet.
type SweepArgs struct{}

// Kind names the job.
func (SweepArgs) Kind() string { return "sharing.sweep" }

// SweepWorker runs the sweep.
type SweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	S *Service
}

// Work sweeps once.
func (w *SweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.S.Sweep(ctx)
	return err
}

// sweepBatch bounds one sweep's work; the next sweep takes the rest.
const sweepBatch = 500

// sweepMargin is how long before its job's deadline a sweep stops taking
// payments: each payment is its own transaction, so the sweep stops
// between two and the next tick takes the rest, where running into the
// deadline would fail the job (and, under a long load, every retry of
// it) for work that is not lost.
const sweepMargin = time.Second

// outOfTime reports whether ctx ends within sweepMargin.
func outOfTime(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && time.Until(deadline) < sweepMargin
}

// Sweep records the deadline's shares of payments FinishAfter old that
// no completion shared, each with its job, and queues again the jobs of
// shares not touched for a while. It returns how many shares it
// recorded; near its context's deadline it stops between payments and
// leaves the rest to the next sweep.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	now := s.o.Now()
	due, err := s.q.SharingDueByDeadline(ctx, s.o.Pool, dbsqlc.SharingDueByDeadlineParams{PaidBefore: ptr(now.Add(-s.o.FinishAfter)), MaxRows: sweepBatch})
	if err != nil {
		return 0, fmt.Errorf("read payments due: %w", err)
	}
	for i, d := range due {
		if i > 0 && outOfTime(ctx) {
			return i, nil
		}
		err := db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
			p, err := s.q.SharingPaymentForUpdate(ctx, tx, d.ID)
			if err != nil {
				return err
			}
			return s.scheduleTx(ctx, tx, p, d.MerchantID, CauseDeadline, 1)
		})
		if err != nil {
			return 0, fmt.Errorf("share %s at its deadline: %w", d.OutTradeNo, err)
		}
	}
	idle, err := s.q.SharingOpenShares(ctx, s.o.Pool, dbsqlc.SharingOpenSharesParams{IdleSince: now.Add(-10 * time.Minute), MaxRows: sweepBatch})
	if err != nil {
		return 0, err
	}
	for i, no := range idle {
		if i > 0 && outOfTime(ctx) {
			break
		}
		if err := db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
			_, err := s.o.Jobs.InsertTx(ctx, tx, ShareArgs{OutNo: no}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}})
			return err
		}); err != nil {
			return 0, fmt.Errorf("queue share %s again: %w", no, err)
		}
	}
	return len(due), nil
}

func ptr[T any](v T) *T { return &v }

// Request is a profit-sharing request as operators see it.
type Request struct {
	OutNo       string     `json:"out_no"`
	Kind        string     `json:"kind"`
	Attempt     int32      `json:"attempt"`
	OrderID     string     `json:"order_id"`
	Cause       string     `json:"cause"`
	AmountFen   int64      `json:"amount_fen"`
	UnfrozenFen int64      `json:"unfrozen_fen"`
	Status      string     `json:"status"`
	WxID        string     `json:"wx_id,omitempty"`
	FailReason  string     `json:"fail_reason,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
}

func requestOf(r dbsqlc.ProfitSharing) Request {
	return Request{OutNo: r.OutNo, Kind: r.Kind, Attempt: r.Attempt, OrderID: fmt.Sprint(r.OrderID), Cause: r.Cause, AmountFen: r.AmountFen,
		UnfrozenFen: r.UnfrozenFen, Status: r.Status, WxID: derefOr(r.WxID), FailReason: derefOr(r.FailReason), CreatedAt: r.CreatedAt.UTC(),
		FinishedAt: r.FinishedAt}
}

// List returns the newest requests, of one status and order when given.
func (s *Service) List(ctx context.Context, status string, orderID *int64, limit int32) ([]Request, error) {
	var st *string
	if status != "" {
		st = &status
	}
	rows, err := s.q.SharingList(ctx, s.o.Pool, dbsqlc.SharingListParams{Status: st, OrderID: orderID, MaxRows: limit})
	if err != nil {
		return nil, err
	}
	out := make([]Request, 0, len(rows))
	for _, r := range rows {
		out = append(out, requestOf(r))
	}
	return out, nil
}

// Retry tries a FAILED request again as its next attempt (a new number:
// WeChat Pay answers the old one as it ended). A share is sent again by
// its job; a return by the refund that waits on it.
func (s *Service) Retry(ctx context.Context, outNo string) (Request, error) {
	var next dbsqlc.ProfitSharing
	err := db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		cur, err := s.q.SharingGetByOutNoForUpdate(ctx, tx, outNo)
		if errors.Is(err, db.ErrNotFound) {
			return problem.New(problem.NotFound, "no profit-sharing request %q", outNo)
		}
		if err != nil {
			return err
		}
		if cur.Status != StatusFailed {
			return problem.New(problem.SharingStatusConflict, "only a FAILED request is tried again; this one is %s", cur.Status).With("current_status", cur.Status)
		}
		if _, err := s.q.SharingSupersede(ctx, tx, outNo); err != nil {
			return err
		}
		if cur.Kind == KindReturn {
			next = cur
			next.Status = StatusSuperseded
			return nil
		}
		p, err := s.q.SharingPaymentForUpdate(ctx, tx, cur.PaymentID)
		if err != nil {
			return err
		}
		if err := s.scheduleTx(ctx, tx, p, cur.MerchantID, cur.Cause, cur.Attempt+1); err != nil {
			return err
		}
		next, err = s.q.SharingLiveShare(ctx, tx, p.ID)
		return err
	})
	return requestOf(next), err
}

// failedCollector reports the FAILED requests waiting for an operator.
type failedCollector struct {
	s    *Service
	desc *prometheus.Desc
}

func (c *failedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *failedCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.s.q.SharingFailedCount(ctx, c.s.o.Pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.Shares), KindShare)
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.Returns), KindReturn)
}
