package payment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/paystate"
)

// ReconcileArgs is the periodic job that asks the platform about payments
// and refunds whose callback is late.
type ReconcileArgs struct{}

// Kind names the job.
func (ReconcileArgs) Kind() string { return "payment.reconcile" }

type reconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	s     *Service
	after time.Duration
}

// Sweep bounds: how many late payments and refunds one sweep takes, and
// how many it asks the platform about at once.
const (
	sweepRows    = 100
	sweepWorkers = 4
)

// Work asks the platform about late payments and refunds, least recently
// checked first, a few at a time, and applies what it says through the
// same exactly-once core as callbacks. A check the platform could not
// answer is logged and counted, not returned: the next sweep asks again,
// while a failed sweep would only be retried beside the next ones and end
// up a dead job. It stops starting checks when one would outlive the job.
func (w *reconcileWorker) Work(ctx context.Context, _ *river.Job[ReconcileArgs]) error {
	s := w.s
	olderThan := s.o.Now().Add(-w.after)
	pays, err := s.q.PaymentsToReconcile(ctx, s.o.Pool, dbsqlc.PaymentsToReconcileParams{OlderThan: olderThan, MaxRows: sweepRows})
	if err != nil {
		return fmt.Errorf("payments to reconcile: %w", err)
	}
	refunds, err := s.q.RefundsToReconcile(ctx, s.o.Pool, dbsqlc.RefundsToReconcileParams{OlderThan: olderThan, MaxRows: sweepRows})
	if err != nil {
		return fmt.Errorf("refunds to reconcile: %w", err)
	}
	checks := make([]sweepCheck, 0, len(pays)+len(refunds))
	for _, p := range pays {
		checks = append(checks, sweepCheck{kind: "payment", name: p.OutTradeNo, run: func(ctx context.Context) error {
			if err := s.reconcile(ctx, p); !errors.Is(err, ErrInFlight) { // in flight: being applied
				return err
			}
			return nil
		}})
	}
	for _, r := range refunds {
		checks = append(checks, sweepCheck{kind: "refund", name: r.OutRefundNo, run: func(ctx context.Context) error { return s.reconcileRefund(ctx, r) }})
	}
	s.sweep(ctx, checks)
	return nil
}

// sweepCheck is one question to the platform.
type sweepCheck struct {
	kind, name string
	run        func(context.Context) error
}

// sweep runs the checks, sweepWorkers at a time, and records each
// outcome; checks that would start too late to finish before ctx's
// deadline are skipped (their rows were stamped checked when taken, so
// they come round again after the others).
func (s *Service) sweep(ctx context.Context, checks []sweepCheck) {
	stopAt := time.Time{}
	if deadline, ok := ctx.Deadline(); ok {
		stopAt = deadline.Add(-s.o.Client.callTimeout())
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, sweepWorkers)
	for _, c := range checks {
		slots <- struct{}{}
		if ctx.Err() != nil || !stopAt.IsZero() && time.Now().After(stopAt) {
			<-slots
			s.sweeps.WithLabelValues(c.kind, "skipped").Inc()
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := c.run(ctx); err != nil {
				s.sweeps.WithLabelValues(c.kind, "failed").Inc()
				s.o.Logger.WarnContext(ctx, "reconcile: the platform could not be asked; the next sweep asks again", "kind", c.kind, "no", c.name, "err", err)
				return
			}
			s.sweeps.WithLabelValues(c.kind, "checked").Inc()
		})
	}
	wg.Wait()
}

// reconcileRefund asks the platform how a refund ended and applies a
// final answer through the same exactly-once path as its notification
// (which, should it come later, is then a duplicate).
func (s *Service) reconcileRefund(ctx context.Context, r dbsqlc.Refund) error {
	p, err := s.q.PaymentGetByID(ctx, s.o.Pool, r.PaymentID)
	if err != nil {
		return fmt.Errorf("read payment: %w", err)
	}
	res, err := s.o.Client.QueryRefund(ctx, SubOf(p), r.OutRefundNo)
	if err != nil {
		return err
	}
	if !res.Status.final() {
		return nil // still processing
	}
	res.RefundStatus = res.Status
	_, err = s.HandleRefund(ctx, Source{Kind: "query", NotificationID: "query:" + r.OutRefundNo, EventType: "REFUND." + string(res.Status)}, res)
	return err
}

// reconcile applies the platform's view of one payment. ErrInFlight means
// the payment went through and someone else is applying it right now.
func (s *Service) reconcile(ctx context.Context, p dbsqlc.Payment) error {
	t, err := s.o.Client.Query(ctx, SubOf(p), p.OutTradeNo)
	if notAtPlatform(err) {
		return nil // never prepaid there: nothing was paid
	}
	if err != nil {
		return err
	}
	if t.TradeState != TradeSuccess {
		return nil
	}
	return s.HandleTransaction(ctx, Source{Kind: "query", EventType: "TRANSACTION.SUCCESS"}, t)
}

// BeforeTimeout runs when an order reaches its pay deadline, before it is
// cancelled: each open payment is queried (a payment that went through is
// applied, so the order is paid, not cancelled) and otherwise closed at
// the platform, so that it can no longer be paid.
//
// A payment that went through but is being applied elsewhere at that
// moment (ErrInFlight) fails this, so the timeout job retries instead of
// cancelling an order that is being paid (found by the soak: the order was
// cancelled and its paid payment left open).
func (s *Service) BeforeTimeout(ctx context.Context, orderID int64) error {
	return s.closeOpenPayments(ctx, orderID, "")
}

type closeWorker struct {
	river.WorkerDefaults[ClosePaymentArgs]
	s *Service
}

// Work closes the order's open payments; a payment that went through just
// before is applied (and, the order being cancelled, refunded).
func (w *closeWorker) Work(ctx context.Context, job *river.Job[ClosePaymentArgs]) error {
	return w.s.closeOpenPayments(ctx, job.Args.OrderID, job.Args.Attempt)
}

// notAtPlatform reports the platform's answer for an out_trade_no it never
// saw (no prepay was ever made for it).
func notAtPlatform(err error) bool {
	var api *APIError
	return errors.As(err, &api) && (api.Code == "ORDER_NOT_EXIST" || api.Code == "ORDERNOTEXIST")
}

// closeOpenPayments closes the order's open attempts at the platform
// (applying one that went through instead), and the attempt named (one
// whose prepay was recorded after a cancel) whatever its status here: a
// close that found nothing at the platform may have run before that
// prepay was made.
func (s *Service) closeOpenPayments(ctx context.Context, orderID int64, attempt string) error {
	pays, err := s.q.PaymentsByOrder(ctx, s.o.Pool, orderID)
	if err != nil {
		return err
	}
	for _, p := range pays {
		// An attempt without a recorded prepay is closed too: its pay may
		// have died after WeChat answered, leaving a prepay there that
		// nobody was handed.
		if p.Status != paystate.Created && (p.OutTradeNo != attempt || p.Status != paystate.Closed) {
			continue
		}
		if err := s.closeAttempt(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// closeAttempt closes one attempt at the platform and here, unless the
// platform says it was paid: then the payment is applied (and, the order
// being cancelled, refunded).
func (s *Service) closeAttempt(ctx context.Context, p dbsqlc.Payment) error {
	if err := s.reconcile(ctx, p); err != nil {
		return err
	}
	cur, err := s.q.PaymentGetByOutTradeNo(ctx, s.o.Pool, dbsqlc.PaymentGetByOutTradeNoParams{Channel: Channel, Mchid: p.Mchid, OutTradeNo: p.OutTradeNo})
	if err != nil {
		return err
	}
	if cur.Status != paystate.Created && cur.Status != paystate.Closed {
		return nil // paid (and applied) meanwhile
	}
	if err := s.o.Client.Close(ctx, SubOf(p), p.OutTradeNo); err != nil && !notAtPlatform(err) {
		var api *APIError
		if !errors.As(err, &api) || api.Code != "ORDERPAID" {
			return fmt.Errorf("close %s: %w", p.OutTradeNo, err)
		}
		// Paid between our query and the close: apply it.
		return s.reconcile(ctx, p)
	}
	return s.q.PaymentMarkClosed(ctx, s.o.Pool, p.ID)
}
