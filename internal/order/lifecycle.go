package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/promotion"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/voucher"
	"github.com/takeout/takeout/internal/webhook"
)

// Actor is who asks for a transition: its kind in the state table, and
// whose it is (a user's own orders, a merchant's orders).
type Actor struct {
	Kind       statemachine.Actor
	UserID     int64  // for users
	MerchantID int64  // for merchant staff
	Name       string // for the history row
}

func (a Actor) String() string {
	switch a.Kind {
	case statemachine.User:
		return "user:" + strconv.FormatInt(a.UserID, 10)
	case statemachine.Merchant:
		return "merchant:" + strconv.FormatInt(a.MerchantID, 10) + ":" + a.Name
	default:
		if a.Name != "" {
			return string(a.Kind) + ":" + a.Name
		}
		return string(a.Kind)
	}
}

// Applied is the outcome of a transition request.
type Applied struct {
	Order Order
	// Replayed is true when the event had already happened: nothing
	// changed.
	Replayed bool
}

// Apply runs event on an order in its own transaction.
func (s *Service) Apply(ctx context.Context, orderID int64, event statemachine.Event, actor Actor, reason string) (Applied, error) {
	return db.WithTxV(ctx, s.opts.Pool, func(tx pgx.Tx) (Applied, error) {
		return s.ApplyTx(ctx, tx, orderID, event, actor, reason)
	})
}

// ApplyTx runs event on an order in the caller's transaction: it decides
// with the state table, updates the order only from the status and
// version it read (re-reading after losing a race), writes the history
// row, and runs the transition's effects, all in tx.
func (s *Service) ApplyTx(ctx context.Context, tx pgx.Tx, orderID int64, event statemachine.Event, actor Actor, reason string) (Applied, error) {
	for attempt := 0; ; attempt++ {
		o, err := s.q.OrderGetByID(ctx, tx, orderID)
		if errors.Is(err, db.ErrNotFound) || (err == nil && !owns(actor, o)) {
			return Applied{}, ErrOrderNotFound
		}
		if err != nil {
			return Applied{}, fmt.Errorf("read order: %w", err)
		}
		d, err := s.lifecycle.Decide(o.Status, event, actor.Kind)
		var conflict *statemachine.ConflictError
		var forbidden *statemachine.ForbiddenError
		switch {
		case errors.As(err, &conflict):
			return Applied{}, problem.New(problem.OrderStatusConflict, "cannot %s this order: it is %s", event, o.Status).
				With("current_status", o.Status)
		case errors.As(err, &forbidden):
			return Applied{}, problem.New(problem.Forbidden, "%s", forbidden.Error())
		case err != nil:
			return Applied{}, err
		}
		if d.Replay {
			out, err := s.load(ctx, tx, o)
			return Applied{Order: out, Replayed: true}, err
		}
		if err := fitsFulfilment(o, event); err != nil {
			return Applied{}, err
		}
		t := d.Transition
		row, err := s.q.OrderTransition(ctx, tx, dbsqlc.OrderTransitionParams{
			ID: o.ID, FromStatus: t.From, ToStatus: t.To, Version: o.Version,
			StartAcceptDeadline:   slices.Contains(t.Effects, statemachine.StartAcceptDeadline),
			AcceptDeadlineApplied: slices.Contains(t.Effects, statemachine.AcceptDeadlineApplied),
		})
		if errors.Is(err, db.ErrNotFound) {
			if attempt < 5 {
				continue // someone else moved it: decide again on what it is now
			}
			return Applied{}, problem.New(problem.OrderStatusConflict, "the order keeps changing; retry").With("current_status", o.Status)
		}
		if err != nil {
			return Applied{}, fmt.Errorf("transition order: %w", err)
		}
		from := o.Status
		// The history row goes with the read of the items: one round trip.
		pipe := db.NewPipeline(tx)
		if err := s.q.OrderHistoryInsert(ctx, pipe, dbsqlc.OrderHistoryInsertParams{
			OrderID: row.ID, FromStatus: &from, ToStatus: row.Status, Version: row.Version, Actor: actor.String(), Reason: reason,
		}); err != nil {
			return Applied{}, fmt.Errorf("insert order history: %w", err)
		}
		out, err := s.load(ctx, pipe, row)
		if err != nil {
			return Applied{}, err
		}
		if err := s.runEffects(ctx, tx, t, row, out); err != nil {
			return Applied{}, err
		}
		s.transitions.WithLabelValues(string(t.From), string(t.To)).Inc()
		return Applied{Order: out}, nil
	}
}

// owns reports whether actor may see the order at all; others get 404,
// so that order ids reveal nothing.
func owns(a Actor, o dbsqlc.Order) bool {
	switch a.Kind {
	case statemachine.User:
		return o.UserID == a.UserID
	case statemachine.Merchant:
		return o.MerchantID == a.MerchantID
	default:
		return true
	}
}

// fitsFulfilment refuses a hand-over the order's fulfilment has not: a
// delivery order is dispatched, a pickup order collected.
func fitsFulfilment(o dbsqlc.Order, event statemachine.Event) error {
	switch {
	case event == statemachine.Dispatch && o.Fulfilment == fulfilment.Pickup:
		return problem.New(problem.OrderStatusConflict, "this is a pickup order: the customer collects it (pick_up), nobody dispatches it").
			With("current_status", o.Status).With("fulfilment", o.Fulfilment)
	case event == statemachine.PickUp && o.Fulfilment != fulfilment.Pickup:
		return problem.New(problem.OrderStatusConflict, "this is a delivery order: it is dispatched, not collected").
			With("current_status", o.Status).With("fulfilment", o.Fulfilment)
	}
	return nil
}

// kitchenEffect runs an effect of the kitchen's side of a transition:
// the slot given back, the print tickets and the shipping upload queued,
// the courier called or called off.
func (s *Service) kitchenEffect(ctx context.Context, tx pgx.Tx, e statemachine.Effect, row dbsqlc.Order) error {
	switch {
	case e == statemachine.ReleaseSlot && row.SlotStart != nil: // none held: no statement
		if _, err := s.q.SlotRelease(ctx, tx, row.ID); err != nil {
			return fmt.Errorf("give the slot back: %w", err)
		}
	case e == statemachine.QueuePrints && s.opts.Prints != nil:
		return s.opts.Prints.QueueTx(ctx, tx, row.ID, row.MerchantID)
	case e == statemachine.UploadShipping && s.opts.Shipping != nil:
		return s.opts.Shipping.QueueTx(ctx, tx, row.ID, row.Fulfilment == fulfilment.Pickup)
	case e == statemachine.DispatchCourier && s.opts.Couriers != nil && row.Fulfilment == fulfilment.Delivery:
		trigger := "accept"
		if row.Status == statemachine.Ready {
			trigger = "ready"
		}
		return s.opts.Couriers.DispatchTx(ctx, tx, row.ID, row.MerchantID, trigger)
	case e == statemachine.CancelCourier && s.opts.Couriers != nil && row.Fulfilment == fulfilment.Delivery:
		return s.opts.Couriers.CancelTx(ctx, tx, row.ID)
	}
	return nil
}

func (s *Service) runEffects(ctx context.Context, tx pgx.Tx, t *statemachine.Transition, row dbsqlc.Order, out Order) error {
	for _, e := range t.Effects {
		switch e {
		case statemachine.ReleaseSlot, statemachine.QueuePrints, statemachine.UploadShipping, statemachine.DispatchCourier, statemachine.CancelCourier:
			if err := s.kitchenEffect(ctx, tx, e, row); err != nil {
				return err
			}
		case statemachine.ReleaseStock:
			if _, err := inventory.Release(ctx, tx, row.ID); err != nil {
				return err
			}
		case statemachine.ReleaseVoucher:
			if row.VoucherID == nil {
				continue // spent none: no statement
			}
			released, err := voucher.Release(ctx, tx, row.ID)
			if err != nil {
				return err
			}
			if released {
				s.vouchers.WithLabelValues("released").Inc()
			}
		case statemachine.ReleasePromotions:
			if len(out.Promotions) == 0 {
				continue // got none: no statement
			}
			if err := promotion.Release(ctx, tx, row.ID); err != nil {
				return err
			}
			for _, p := range out.Promotions {
				s.promotions.WithLabelValues(p.Kind, "released").Inc()
			}
		case statemachine.StartAcceptDeadline:
			// The UPDATE (OrderTransition) wrote the order's deadline from
			// its merchant's rule; a merchant without one gave none.
			if row.AcceptBy != nil {
				if err := s.q.AcceptDeadlineInsert(ctx, tx, dbsqlc.AcceptDeadlineInsertParams{OrderID: row.ID, AcceptBy: *row.AcceptBy}); err != nil {
					return fmt.Errorf("insert the accept deadline: %w", err)
				}
			}
		case statemachine.AcceptDeadlineApplied:
			// Written by the transition's UPDATE (OrderTransition).
		case statemachine.ConsumeStock:
			if err := inventory.Consume(ctx, tx, row.ID); err != nil {
				return err
			}
		case statemachine.ScheduleAutoComplete:
			if _, err := s.opts.Jobs.InsertTx(ctx, tx, AutoCompleteArgs{OrderID: row.ID}, &river.InsertOpts{
				ScheduledAt: s.now().Add(s.opts.AutoCompleteAfter),
				UniqueOpts:  river.UniqueOpts{ByArgs: true},
			}); err != nil {
				return fmt.Errorf("insert auto-complete job: %w", err)
			}
		case statemachine.Notify:
			if err := s.notify(ctx, tx, t, row, out); err != nil {
				return err
			}
		case statemachine.ClosePayment:
			if s.opts.Payments != nil {
				if err := s.opts.Payments.CloseTx(ctx, tx, row.ID); err != nil {
					return fmt.Errorf("close payment: %w", err)
				}
			}
		case statemachine.ShareProfit:
			if s.opts.Sharing != nil {
				if err := s.opts.Sharing.CompletedTx(ctx, tx, row.ID); err != nil {
					return fmt.Errorf("share profit: %w", err)
				}
			}
		case statemachine.RequestRefund:
			// Without payments configured nothing was paid: nothing to
			// refund.
			if s.opts.Payments != nil {
				if err := s.opts.Payments.RefundTx(ctx, tx, row.ID, "order "+string(row.Status)); err != nil {
					return fmt.Errorf("request refund: %w", err)
				}
			}
		default:
			return fmt.Errorf("unknown effect %q", e)
		}
	}
	return nil
}

// eventType names the webhook event of a transition's target status:
// order.paid, order.accepted, order.delivering, ...
func eventType(to statemachine.Status) string {
	return "order." + strings.ToLower(string(to))
}

// notifyBeyondOutbox reports whether Notify, for an order moving to
// status to, does more under this configuration than write the outbox
// event: a webhook delivery, a customer message. It is the one answer
// both paths use: notify runs those parts, and PrepareDirect declines the
// one-statement path, which writes the outbox event alone, when there
// are any.
func (s *Service) notifyBeyondOutbox(to statemachine.Status) bool {
	return s.opts.WebhookEnabled || s.queuesMessage(to)
}

// queuesMessage reports whether a move to status to queues the
// customer's subscribe message.
func (s *Service) queuesMessage(to statemachine.Status) bool {
	return s.opts.Messages != nil && s.opts.Messages.Queues(to)
}

func (s *Service) notify(ctx context.Context, tx pgx.Tx, t *statemachine.Transition, row dbsqlc.Order, out Order) error {
	if s.queuesMessage(t.To) {
		if err := s.opts.Messages.Enqueue(ctx, tx, row.ID, t.To); err != nil {
			return err
		}
	}
	typ := eventType(t.To)
	return s.publish(ctx, tx, row, out, typ, row.Version, row.UpdatedAt.UTC())
}

// publish writes an order event to the live-order outbox and queues its
// webhook delivery, each when configured. version is what makes the
// event's id unique: the order's version, or the urge's number.
func (s *Service) publish(ctx context.Context, tx pgx.Tx, row dbsqlc.Order, out Order, typ string, version int64, at time.Time) error {
	if !s.opts.WebhookEnabled && s.opts.Events == nil {
		return nil
	}
	ev, err := orderEvent(row, out, typ, version, at)
	if err != nil {
		return err
	}
	if s.opts.Events != nil {
		if err := s.opts.Events.Record(ctx, tx, row.MerchantID, row.ID, ev); err != nil {
			return err
		}
	}
	if !s.opts.WebhookEnabled {
		return nil
	}
	if _, err := s.opts.Jobs.InsertTx(ctx, tx, webhook.Args{Event: ev}, &river.InsertOpts{
		MaxAttempts: s.opts.WebhookMaxAttempts,
	}); err != nil {
		return fmt.Errorf("insert webhook job: %w", err)
	}
	return nil
}

// orderEvent is the event of an order's change: row and out are the
// order after it.
func orderEvent(row dbsqlc.Order, out Order, typ string, version int64, at time.Time) (webhook.Event, error) {
	body, err := json.Marshal(out)
	if err != nil {
		return webhook.Event{}, err
	}
	return webhook.Event{
		ID: webhook.EventID(row.ID, typ, version), Type: typ, OrderID: out.ID, MerchantID: out.MerchantID,
		Status: string(row.Status), Version: row.Version, OccurredAt: at.UTC(), Order: body,
	}, nil
}

// AutoCompleteArgs is the job that completes a delivery nobody marked
// delivered.
type AutoCompleteArgs struct {
	OrderID int64 `json:"order_id,string"`
}

// Kind names the job.
func (AutoCompleteArgs) Kind() string { return "order.auto_complete" }

// timeoutWorker cancels an order still unpaid at its pay deadline.
type timeoutWorker struct {
	river.WorkerDefaults[PaymentTimeoutArgs]
	s     *Service
	check DeadlineCheck
}

// Work applies the timeout. Running twice, or after the order was paid or
// cancelled, changes nothing.
func (w *timeoutWorker) Work(ctx context.Context, job *river.Job[PaymentTimeoutArgs]) error {
	if w.check != nil {
		if err := w.check.BeforeTimeout(ctx, job.Args.OrderID); err != nil {
			return fmt.Errorf("before timeout: %w", err)
		}
	}
	return ignoreSettled(w.s.Apply(ctx, job.Args.OrderID, statemachine.Timeout, Actor{Kind: statemachine.System, Name: "payment-timeout"}, "pay deadline passed"))
}

// autoCompleteWorker completes a delivery after the configured time.
type autoCompleteWorker struct {
	river.WorkerDefaults[AutoCompleteArgs]
	s *Service
}

// Work applies auto-complete; harmless when already completed.
func (w *autoCompleteWorker) Work(ctx context.Context, job *river.Job[AutoCompleteArgs]) error {
	return ignoreSettled(w.s.Apply(ctx, job.Args.OrderID, statemachine.AutoComplete, Actor{Kind: statemachine.System, Name: "auto-complete"}, "delivering too long"))
}

// ignoreSettled treats "the order moved on" as done: a timeout for a paid
// order, an auto-complete for a completed one.
func ignoreSettled(_ Applied, err error) error {
	if p, ok := problem.As(err); ok && (p.Type == problem.OrderStatusConflict || p.Type == problem.NotFound) {
		return nil
	}
	return err
}

// TimeoutSweepArgs is the periodic job that queues the payment-timeout
// job of each order past its pay deadline that has none. Placing an order
// writes no job: most orders are paid before their deadline, and a job
// per order cost the placement a row and seven index entries, and a run
// at each paid order's deadline that found it paid.
type TimeoutSweepArgs struct{}

// Kind names the job.
func (TimeoutSweepArgs) Kind() string { return "order.payment_timeout_sweep" }

// timeoutSweepBatch is how many orders one transaction of the sweep
// queues jobs for.
const timeoutSweepBatch = 500

// timeoutSweepOverlap is how far before the last sweep's end the next
// one starts reading deadlines again: an order is visible long before its
// deadline (a payment window of minutes), so this only covers instances'
// clocks that disagree by a little.
const timeoutSweepOverlap = 5 * time.Second

// timeoutSweepWorker queues the due orders' payment-timeout jobs.
type timeoutSweepWorker struct {
	river.WorkerDefaults[TimeoutSweepArgs]
	s *Service
}

// Work queues the due orders' jobs.
func (w *timeoutSweepWorker) Work(ctx context.Context, _ *river.Job[TimeoutSweepArgs]) error {
	_, err := w.s.QueueTimeouts(ctx)
	return err
}

// QueueTimeouts queues a payment-timeout job for each order waiting for
// payment whose deadline came due since the last sweep (less
// timeoutSweepOverlap) without one, a batch per transaction until none is
// left, then records how far it swept; it returns how many it queued.
// Each job is unique by its order, so two sweeps at once (a leader
// handing over) queue one, and a sweep cut short is done again by the
// next.
func (s *Service) QueueTimeouts(ctx context.Context) (int, error) {
	upTo := s.now()
	sweptTo, err := s.q.OrderTimeoutSweptTo(ctx, s.opts.Pool)
	if err != nil {
		return 0, fmt.Errorf("read how far the timeout sweep went: %w", err)
	}
	since := sweptTo.Add(-timeoutSweepOverlap)
	queued := 0
	for {
		rows, err := db.WithTxV(ctx, s.opts.Pool, func(tx pgx.Tx) ([]dbsqlc.OrdersOverdueWithoutTimeoutRow, error) {
			rows, err := s.q.OrdersOverdueWithoutTimeout(ctx, tx, dbsqlc.OrdersOverdueWithoutTimeoutParams{
				Since: since, UpTo: upTo, MaxRows: timeoutSweepBatch,
			})
			if err != nil {
				return nil, fmt.Errorf("read overdue orders: %w", err)
			}
			for _, r := range rows {
				if _, err := s.opts.Jobs.InsertTx(ctx, tx, PaymentTimeoutArgs{OrderID: r.ID}, &river.InsertOpts{
					UniqueOpts: river.UniqueOpts{ByArgs: true},
				}); err != nil {
					return nil, fmt.Errorf("insert payment timeout job: %w", err)
				}
			}
			return rows, nil
		})
		if err != nil {
			return queued, err
		}
		queued += len(rows)
		if len(rows) < timeoutSweepBatch {
			break
		}
		// The next batch starts at this one's last deadline: orders due at
		// that very instant and not queued yet are read again, the queued
		// ones no more (they have their job).
		since = rows[len(rows)-1].PayDeadline
	}
	if err := s.q.OrderTimeoutSweptToAdvance(ctx, s.opts.Pool, upTo); err != nil {
		return queued, fmt.Errorf("record how far the timeout sweep went: %w", err)
	}
	return queued, nil
}

// AddWorkers registers the order's job workers; check, when not nil,
// runs before each pay-deadline cancel.
func (s *Service) AddWorkers(w *river.Workers, check DeadlineCheck) {
	river.AddWorker(w, &timeoutSweepWorker{s: s})
	river.AddWorker(w, &timeoutWorker{s: s, check: check})
	river.AddWorker(w, &autoCompleteWorker{s: s})
	river.AddWorker(w, &acceptSweepWorker{s: s})
	river.AddWorker(w, &acceptDeadlineWorker{s: s})
}
