package payment

// The settlement of a payment result, whole: HandleTransaction and its
// exactly-once guards, the one-statement path (applyDirect:
// payment_settle, committed in groups; db/functions/payment_settle*.sql)
// and the transaction path (applyTransaction), which decides everything
// the statement declines: anomalies, late and double payments, and
// transitions with effects the statement does not write
// (order.Service.PrepareDirect).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
)

// Source says where a payment result came from.
type Source struct {
	Kind           string // v3, v2, query
	NotificationID string
	EventType      string
}

// Errors of callback handling; their Type decides the answer.
var (
	ErrInFlight = problem.New(problem.Unavailable, "this notification is being processed; retry")
	ErrAnomaly  = problem.New(problem.InvalidRequest, "the payment does not match the order (recorded as an anomaly)")
)

// HandleTransaction applies a payment result exactly once: duplicates
// (by notification id or by transaction and event) and concurrent
// deliveries change nothing. A result that does not match its payment is
// stored as an anomaly and changes no order; a payment for an order that
// can no longer take it is refunded automatically.
//
// The database decides: the payment's row lock orders deliveries of one
// transaction across instances, and the notification's unique keys make
// the second one a duplicate. In front of it, each instance keeps the
// transactions it is applying, so that a storm of deliveries of one
// transaction runs once and the others are told to retry (the platform
// will) instead of each holding a connection while it waits on that lock,
// and the transactions it has settled, so that a redelivery is answered
// without the database. Neither needs Redis: two round trips of it per
// callback cost more than the database work they could save.
func (s *Service) HandleTransaction(ctx context.Context, src Source, t Transaction) error {
	if t.TransactionID == "" || t.OutTradeNo == "" {
		return problem.New(problem.InvalidRequest, "transaction without transaction_id or out_trade_no")
	}
	key := settledKey{transactionID: t.TransactionID, eventType: src.EventType}
	if _, ok := s.settled.GetIfPresent(key); ok {
		s.callbacks.WithLabelValues(src.Kind, "duplicate").Inc()
		return nil
	}
	if _, busy := s.applying.LoadOrStore(key, struct{}{}); busy {
		s.callbacks.WithLabelValues(src.Kind, "in_flight").Inc()
		return ErrInFlight
	}
	defer s.applying.Delete(key)
	outcome, done, err := s.applyDirect(ctx, src, t)
	if err == nil && !done {
		outcome, err = s.applyTransaction(ctx, src, t)
	}
	if err != nil {
		return err
	}
	s.callbacks.WithLabelValues(src.Kind, outcome).Inc()
	if outcome == "anomaly" {
		// Recorded, and refused: every redelivery is refused the same way.
		return ErrAnomaly
	}
	s.settled.Set(key, struct{}{})
	return nil
}

// codeOrderMoved is what payment_settle raises when the order is not at
// the status the transition leaves (db/functions/payment_settle.sql).
const codeOrderMoved = "TK002"

// applyDirect applies a successful transaction in one statement and one
// round trip (payment_settle): the notification, the payment, the
// order's transition, its history and its event, where the transaction
// path takes eight round trips. The order is not read first: the
// statement moves it only if it is waiting for payment. done is false,
// with nothing written, when the transaction path must decide: a result
// that is not a plain success of the payment we asked for, a transition
// with more effects, or an order that is no longer waiting.
func (s *Service) applyDirect(ctx context.Context, src Source, t Transaction) (outcome string, done bool, err error) {
	if t.TradeState != TradeSuccess || t.MchID != s.o.MchID {
		return "", false, nil
	}
	dt, ok := s.o.Orders.PrepareDirect(statemachine.PendingPayment, statemachine.Pay, paymentActor(src), "paid "+t.TransactionID)
	if !ok {
		return "", false, nil
	}
	outcome, err = s.succeed.Do(ctx, dbsqlc.PaymentSettleParams{
		Channel: Channel, Mchid: s.o.MchID, OutTradeNo: t.OutTradeNo, Appid: t.AppID, SubMchid: t.SubMchID, AmountFen: t.Amount.Total,
		Currency: t.Amount.Currency, NotificationID: notificationID(src, t), TransactionID: t.TransactionID, PaidAt: s.paidAt(t),
		FromStatus: string(dt.From), ToStatus: string(dt.To), UpdatedAt: dt.UpdatedAt,
		Actor: dt.Actor, Reason: dt.Reason, EventType: dt.EventType,
	})
	switch {
	case err != nil:
		return "", false, err
	case outcome == outcomeMoved, outcome == "transaction":
		return "", false, nil
	}
	if outcome == "applied" {
		s.o.Orders.DirectApplied(dt)
	}
	s.successPaths.WithLabelValues("one_statement").Inc()
	return outcome, true, nil
}

// paymentActor is who moves an order on a payment result from src.
func paymentActor(src Source) order.Actor {
	return order.Actor{Kind: statemachine.Payment, Name: src.Kind}
}

// notificationID is the id a payment result is recorded under: the
// notification's, or, for a result without one (a query), one per
// source and transaction.
func notificationID(src Source, t Transaction) string {
	if src.NotificationID != "" {
		return src.NotificationID
	}
	return src.Kind + ":" + t.TransactionID
}

// paidAt is when the platform says t was paid, or now.
func (s *Service) paidAt(t Transaction) time.Time {
	if ts, err := time.Parse(time.RFC3339, t.SuccessTime); err == nil {
		return ts
	}
	return s.o.Now()
}

func (s *Service) applyTransaction(ctx context.Context, src Source, t Transaction) (string, error) {
	if t.TradeState == TradeSuccess {
		s.successPaths.WithLabelValues("transaction").Inc()
	}
	var outcome string
	err := db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		p, err := s.q.PaymentGetByOutTradeNoForUpdate(ctx, tx, dbsqlc.PaymentGetByOutTradeNoForUpdateParams{Channel: Channel, Mchid: s.o.MchID, OutTradeNo: t.OutTradeNo})
		if errors.Is(err, db.ErrNotFound) {
			return problem.New(problem.NotFound, "unknown out_trade_no %q", t.OutTradeNo)
		}
		if err != nil {
			return err
		}
		if kind, detail := mismatch(t, p); kind != "" {
			outcome = "anomaly"
			return s.recordAnomaly(ctx, tx, src.NotificationID+"/"+t.TransactionID, t.OutTradeNo, kind, detail, t)
		}
		nid := notificationID(src, t)
		if t.TradeState != TradeSuccess {
			_, err := s.q.NotificationInsert(ctx, tx, dbsqlc.NotificationInsertParams{Channel: Channel, NotificationID: nid,
				TransactionID: t.TransactionID, EventType: "TRANSACTION.SUCCESS", OrderID: &p.OrderID, Outcome: string(t.TradeState)})
			switch {
			case errors.Is(err, db.ErrNotFound):
				outcome = "duplicate"
				return nil
			case err != nil:
				return err
			}
			outcome = "ignored"
			return nil
		}
		paidAt := s.paidAt(t)
		// The notification and the payment in one statement.
		rec, err := s.q.PaymentRecordSuccess(ctx, tx, dbsqlc.PaymentRecordSuccessParams{Channel: Channel, NotificationID: nid,
			TransactionID: t.TransactionID, OrderID: &p.OrderID, PaidAt: &paidAt, PaymentID: p.ID})
		switch {
		case err != nil:
			return err
		case rec.Recorded && !rec.Paid && p.TransactionID != nil && *p.TransactionID != t.TransactionID:
			// The platform reports a second successful transaction for a
			// payment already paid by another: money we did not ask for.
			// Recorded as an anomaly, and given back.
			outcome = "refunded_second"
			if err := s.recordAnomaly(ctx, tx, nid+"/"+t.TransactionID, t.OutTradeNo, anomalySecondTransaction,
				fmt.Sprintf("transaction %s, but %s paid it", t.TransactionID, *p.TransactionID), t); err != nil {
				return err
			}
			second := p
			second.AmountFen = t.Amount.Total
			return s.o.Effects.refundTx(ctx, tx, second, "a second transaction for "+p.OutTradeNo, t.TransactionID)
		case !rec.Recorded, !rec.Paid:
			outcome = "duplicate" // seen before, or already SUCCESS (e.g. the query got there first)
			return nil
		}
		a, err := s.o.Orders.ApplyTx(ctx, tx, p.OrderID, statemachine.Pay, paymentActor(src), "paid "+t.TransactionID)
		switch pe, _ := problem.As(err); {
		case err == nil && !a.Replayed:
			outcome = "applied"
			return nil
		case err == nil && a.Replayed, pe != nil && pe.Type == problem.OrderStatusConflict:
			// Paid by another payment already, or too late (cancelled,
			// refunding, ...): give this money back.
			outcome = "refunded_late"
			if err == nil {
				outcome = "refunded_double"
			}
			return s.o.Effects.refundTx(ctx, tx, p, "payment for an order that could not take it", "")
		default:
			return err
		}
	})
	return outcome, err
}

// outcomeMoved is payment_settle's TK002 as an outcome: the order was not
// waiting for payment; nothing was written.
const outcomeMoved = "moved"

// newSucceedGroup commits the one-statement payment successes of the
// same moment together (db.Group): payment_settle alone,
// payment_settle_grouped (which answers moved where payment_settle
// raises TK002) for several.
func (s *Service) newSucceedGroup(maxGroup, slots int) *db.Group[dbsqlc.PaymentSettleParams, string] {
	return db.NewGroup(db.GroupOptions{Statement: "payment_settle", Max: maxGroup, Slots: slots}, s.succeedAlone, s.succeedTogether)
}

// succeedAlone applies one payment in a statement (and a transaction) of
// its own.
func (s *Service) succeedAlone(ctx context.Context, p dbsqlc.PaymentSettleParams) (string, error) {
	outcome, err := s.q.PaymentSettle(ctx, s.o.Pool, p)
	switch {
	case db.Raised(err, codeOrderMoved):
		return outcomeMoved, nil
	case err != nil:
		return "", fmt.Errorf("apply payment %s: %w", p.OutTradeNo, err)
	}
	return outcome, nil
}

// succeedTogether applies payments in one pipeline and one transaction,
// in out_trade_no order: two groups lock their payments in the same
// order, so they wait for each other rather than deadlock.
func (s *Service) succeedTogether(ctx context.Context, ps []dbsqlc.PaymentSettleParams) ([]string, error) {
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ps[a].OutTradeNo, ps[b].OutTradeNo) })
	params := make([]dbsqlc.PaymentSettleGroupedParams, len(ps))
	for i, j := range order {
		params[i] = dbsqlc.PaymentSettleGroupedParams(ps[j])
	}
	rows, err := db.BatchRows(len(ps), s.q.PaymentSettleGrouped(ctx, s.o.Pool, params))
	if err != nil {
		return nil, fmt.Errorf("apply payments together: %w", err)
	}
	out := make([]string, len(ps))
	for i, j := range order {
		out[j] = rows[i]
	}
	return out, nil
}
