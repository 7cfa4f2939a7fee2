package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/paystate"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/web"
)

// PartialRefundRequest is the body of POST /admin/v1/orders/{id}/refunds:
// lines (units of the order's lines, given back with their packaging) or
// an amount, a reason the customer sees, and, for lines of an order not
// yet dispatched, whether their stock goes back on sale.
type PartialRefundRequest struct {
	Lines     []order.RefundLine `json:"lines"`
	AmountFen *int64             `json:"amount_fen"`
	Reason    string             `json:"reason"`
	Restock   bool               `json:"restock"`
}

// maxRefundReason is WeChat Pay's limit on a refund's reason (characters).
const maxRefundReason = 80

// Validate checks the request's shape; what is left to refund is checked
// against the order.
func (r *PartialRefundRequest) Validate() error {
	switch {
	case (r.Lines == nil) == (r.AmountFen == nil):
		return problem.New(problem.InvalidRequest, "send either lines or amount_fen")
	case r.Lines != nil && len(r.Lines) == 0:
		return problem.Field("lines", "at least one line")
	case r.AmountFen != nil && (*r.AmountFen < 1 || *r.AmountFen > 100_000_000):
		return problem.Field("amount_fen", "must be between 1 and 100000000 (fen)")
	case r.AmountFen != nil && r.Restock:
		return problem.Field("restock", "only with lines: an amount names no stock")
	case len(r.Lines) > 100:
		return problem.Field("lines", "at most 100")
	}
	n := utf8.RuneCountInString(r.Reason)
	if n == 0 || n > maxRefundReason || !utf8.ValidString(r.Reason) {
		return problem.Field("reason", "required, at most %d characters: the customer sees it", maxRefundReason)
	}
	seen := map[int16]bool{}
	for i, l := range r.Lines {
		switch {
		case l.Line < 0 || l.Line > 99:
			return problem.Field(fmt.Sprintf("lines[%d].line", i), "must be a line number of the order (0 to 99)")
		case l.Qty < 1 || l.Qty > 99:
			return problem.Field(fmt.Sprintf("lines[%d].qty", i), "must be between 1 and 99")
		case seen[l.Line]:
			return problem.Field(fmt.Sprintf("lines[%d].line", i), "line %d is listed twice", l.Line)
		}
		seen[l.Line] = true
	}
	return nil
}

// ErrNothingPaid is a partial refund of an order without a successful
// payment.
var ErrNothingPaid = problem.New(problem.OrderStatusConflict, "the order has no payment to refund")

// RefundPart records a partial refund of a paid order by staff, in tx,
// with the job that sends it to WeChat Pay: never more than was paid less
// what was refunded or is being refunded. Its out_refund_no is the
// payment's refund number with the request's place among the payment's
// refunds ("-P2"), fixed by the order's lock, so that a retry of the job
// is the same refund at the platform. The order moves to REFUNDED when
// its refunds have given back all that was paid.
func (s *Service) RefundPart(ctx context.Context, tx pgx.Tx, staff auth.Staff, orderID int64, req PartialRefundRequest) (Refund, error) {
	actor := order.Actor{Kind: statemachine.Admin, Name: staff.Subject}
	if !staff.Role.Admin {
		actor = order.Actor{Kind: statemachine.Merchant, MerchantID: staff.Role.MerchantID, Name: staff.Subject}
	}
	return s.RefundPartAs(ctx, tx, actor, orderID, req)
}

// MaxRefundsPerPayment is WeChat Pay's limit on the refunds of one
// payment.
const MaxRefundsPerPayment = 50

// ErrTooManyRefunds is a refund of a payment that has had as many as
// WeChat Pay takes.
var ErrTooManyRefunds = problem.New(problem.RefundLimitReached, "the payment has had %d refunds, as many as WeChat Pay takes", MaxRefundsPerPayment)

// RefundPartAs is RefundPart for any actor (an after-sales request
// agreed by staff, by the platform or at its deadline).
func (s *Service) RefundPartAs(ctx context.Context, tx pgx.Tx, actor order.Actor, orderID int64, req PartialRefundRequest) (Refund, error) {
	units, err := s.o.Orders.PrepareRefundTx(ctx, tx, orderID, actor, req.Lines, req.Restock)
	if err != nil {
		return Refund{}, err
	}
	amount := units.AmountFen
	if req.AmountFen != nil {
		amount = *req.AmountFen
	}
	paid, left, err := s.paidAndLeft(ctx, tx, orderID)
	if err != nil {
		return Refund{}, err
	}
	if units.Whole && req.AmountFen == nil {
		// The last units of the order: all that is left of the payment,
		// so that refunding every line gives back exactly what was paid.
		amount = left
	}
	if amount > left || (units.Whole && left == 0) {
		return Refund{}, problem.New(problem.RefundExceedsPaid, "%d fen is more than the %d fen left to refund of %d paid", amount, left, paid.AmountFen).
			With("refundable_fen", left)
	}
	n, err := s.q.RefundsOfPayment(ctx, tx, paid.ID)
	if err != nil {
		return Refund{}, fmt.Errorf("count refunds: %w", err)
	}
	if n >= MaxRefundsPerPayment {
		return Refund{}, ErrTooManyRefunds
	}
	lines, err := json.Marshal(req.Lines)
	if err != nil {
		return Refund{}, err
	}
	if req.Lines == nil {
		lines = []byte("[]")
	}
	r, err := s.q.RefundInsertPartial(ctx, tx, dbsqlc.RefundInsertPartialParams{
		PaymentID: paid.ID, OrderID: orderID, OutRefundNo: OutRefundNo(paid.OutTradeNo) + "-P" + strconv.FormatInt(n+1, 10),
		AmountFen: amount, Reason: req.Reason, Lines: lines, Restock: req.Restock,
	})
	if err != nil {
		return Refund{}, fmt.Errorf("insert refund: %w", err)
	}
	if err := s.o.Effects.refundJobTx(ctx, tx, r.OutRefundNo); err != nil {
		return Refund{}, err
	}
	return refundFromRow(r), nil
}

// HandlePartialRefund serves POST /admin/v1/orders/{id}/refunds (merchant
// staff of the order's merchant, or admins): a partial refund, exactly
// once per Idempotency-Key, which it requires.
func HandlePartialRefund(s *Service, idem *idempotency.Store, pool db.Beginner) http.Handler {
	create := idempotency.Creating(idem, pool, true, auth.StaffScope, func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
		staff, _ := auth.StaffFrom(ctx)
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			return idempotency.Created{}, problem.New(problem.NotFound, "no such order")
		}
		req, err := web.Decode[PartialRefundRequest](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		ref, err := s.RefundPart(ctx, tx, staff, id, req)
		if err != nil {
			return idempotency.Created{}, err
		}
		return idempotency.JSONCreated(http.StatusCreated, ref)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			web.Error(w, r, ErrDisabled)
			return
		}
		create.ServeHTTP(w, r)
	})
}

// Refundable returns what is left to refund of an order's payment, in tx:
// what was paid less what its refunds gave back or owe.
func (s *Service) Refundable(ctx context.Context, tx pgx.Tx, orderID int64) (int64, error) {
	_, left, err := s.paidAndLeft(ctx, tx, orderID)
	return left, err
}

// paidAndLeft returns the order's paid payment (the last one, when a
// second one is still being given back) and what is left to refund of it.
func (s *Service) paidAndLeft(ctx context.Context, tx pgx.Tx, orderID int64) (dbsqlc.Payment, int64, error) {
	pays, err := s.q.PaymentsByOrder(ctx, tx, orderID)
	if err != nil {
		return dbsqlc.Payment{}, 0, fmt.Errorf("read payments: %w", err)
	}
	var paid *dbsqlc.Payment
	for i := range pays {
		if pays[i].Status == paystate.Paid {
			paid = &pays[i]
		}
	}
	if paid == nil {
		return dbsqlc.Payment{}, 0, ErrNothingPaid
	}
	got, err := s.q.RefundedOfPayment(ctx, tx, paid.ID)
	if err != nil {
		return dbsqlc.Payment{}, 0, fmt.Errorf("read refunds: %w", err)
	}
	return *paid, paid.AmountFen - got.RefundedFen, nil
}
