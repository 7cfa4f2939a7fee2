package payment

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/paystate"
)

// Effects is the part of payments that order transitions cause inside
// their transaction: a refund recorded with the job that asks the
// platform for it, and the job that closes an order's open payments. It
// implements order.Payments. It needs no order service, so it is built
// before the order service (which takes it) and the payment Service
// after both: the two capabilities call each other, and no forward
// reference joins them.
type Effects struct {
	jobs order.JobInserter
	q    *dbsqlc.Queries
}

// NewEffects returns the payment effects, inserting jobs through jobs.
func NewEffects(jobs order.JobInserter) *Effects {
	return &Effects{jobs: jobs, q: dbsqlc.New()}
}

var _ order.Payments = (*Effects)(nil)

// RefundArgs is the job that asks the platform for a refund.
type RefundArgs struct {
	OutRefundNo string `json:"out_refund_no"`
}

// Kind names the job.
func (RefundArgs) Kind() string { return "payment.refund" }

// ClosePaymentArgs is the job that closes a cancelled order's open
// payments at the provider. Attempt, when set, names the attempt whose
// prepay was recorded after the cancel (so that this job is not taken for
// a duplicate of the cancel's own).
type ClosePaymentArgs struct {
	OrderID int64  `json:"order_id,string"`
	Attempt string `json:"attempt,omitempty"`
}

// Kind names the job.
func (ClosePaymentArgs) Kind() string { return "payment.close" }

// RefundTx refunds the order's successful payment, if it has one; the
// order lifecycle calls it when an order moves to REFUNDING.
func (e *Effects) RefundTx(ctx context.Context, tx pgx.Tx, orderID int64, reason string) error {
	pays, err := e.q.PaymentsByOrder(ctx, tx, orderID)
	if err != nil {
		return fmt.Errorf("read payments: %w", err)
	}
	for _, p := range pays {
		if p.Status == paystate.Paid {
			return e.refundTx(ctx, tx, p, reason, "")
		}
	}
	return nil
}

// CloseTx inserts, in the cancel's transaction, the job that closes the
// order's open payments; the call to the provider happens after commit,
// retried until it answers.
func (e *Effects) CloseTx(ctx context.Context, tx pgx.Tx, orderID int64) error {
	return e.closeLaterTx(ctx, tx, orderID, "")
}

func (e *Effects) closeLaterTx(ctx context.Context, tx pgx.Tx, orderID int64, attempt string) error {
	_, err := e.jobs.InsertTx(ctx, tx, ClosePaymentArgs{OrderID: orderID, Attempt: attempt}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}})
	if err != nil {
		return fmt.Errorf("insert close job: %w", err)
	}
	return nil
}

// refundTx records the refund of payment p and inserts the job that asks
// the platform for it, in tx; the same payment is refunded once. With
// transactionID, it refunds that transaction of p's out_trade_no instead
// (one we did not expect), once.
func (e *Effects) refundTx(ctx context.Context, tx pgx.Tx, p dbsqlc.Payment, reason, transactionID string) error {
	no, amount := OutRefundNo(p.OutTradeNo), p.AmountFen
	var txn *string
	if transactionID != "" {
		no, txn = "R"+transactionID, &transactionID
	} else {
		// What partial refunds gave back (or owe) is not refunded twice.
		// The caller holds the order's row, on which refund requests of
		// the order take turns.
		got, err := e.q.RefundedOfPayment(ctx, tx, p.ID)
		if err != nil {
			return fmt.Errorf("read refunds: %w", err)
		}
		if amount -= got.RefundedFen; amount <= 0 {
			return nil
		}
	}
	r, err := e.q.RefundInsert(ctx, tx, dbsqlc.RefundInsertParams{PaymentID: p.ID, OrderID: p.OrderID, OutRefundNo: no, AmountFen: amount, Reason: reason, TransactionID: txn})
	if errors.Is(err, db.ErrNotFound) {
		return nil // already refunding
	}
	if err != nil {
		return fmt.Errorf("insert refund: %w", err)
	}
	return e.refundJobTx(ctx, tx, r.OutRefundNo)
}

// refundJobTx inserts the job that sends a recorded refund, once.
func (e *Effects) refundJobTx(ctx context.Context, tx pgx.Tx, outRefundNo string) error {
	if _, err := e.jobs.InsertTx(ctx, tx, RefundArgs{OutRefundNo: outRefundNo}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}); err != nil {
		return fmt.Errorf("insert refund job: %w", err)
	}
	return nil
}
