package order

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
)

// The order side of a partial refund: which orders may be refunded in
// part, which of their lines, and their stock.

// RefundLine is units of one line of an order, given back.
type RefundLine struct {
	Line int16 `json:"line"`
	Qty  int32 `json:"qty"`
}

// refundable are the statuses of a paid order that staff may refund in
// part; a whole refund is the lifecycle's (reject, refund, cancel).
var refundable = []statemachine.Status{statemachine.Paid, statemachine.Accepted, statemachine.Ready, statemachine.Delivering, statemachine.Completed}

// beforeDispatch are the statuses whose stock is still held: a refunded
// line's units can go back on sale.
var beforeDispatch = []statemachine.Status{statemachine.Paid, statemachine.Accepted, statemachine.Ready}

// LinesRefund is what a refund of some of an order's lines gives back.
type LinesRefund struct {
	// AmountFen is what the units cost: unit price and packaging fee, less
	// their part of the line's discount (refundOfUnits).
	AmountFen int64
	// Whole is true when, with these, every unit of every line is
	// refunded: the refund then gives back all that is left of the
	// payment (the delivery fee too).
	Whole bool
}

// PrepareRefundTx locks an order for a partial refund by actor, in tx,
// and checks it may be refunded in part. For lines it marks their units
// refunded (and, with restock, gives their stock back to sale) and
// returns what they were sold for. Refund requests of one order take
// turns on the lock.
func (s *Service) PrepareRefundTx(ctx context.Context, tx pgx.Tx, orderID int64, actor Actor, lines []RefundLine, restock bool) (LinesRefund, error) {
	o, err := s.q.OrderGetForUpdate(ctx, tx, orderID)
	if errors.Is(err, db.ErrNotFound) || (err == nil && !owns(actor, o)) {
		return LinesRefund{}, ErrOrderNotFound
	}
	if err != nil {
		return LinesRefund{}, fmt.Errorf("lock order: %w", err)
	}
	if !slices.Contains(refundable, o.Status) {
		return LinesRefund{}, problem.New(problem.OrderStatusConflict, "cannot refund part of an order that is %s", o.Status).With("current_status", o.Status)
	}
	if restock && !slices.Contains(beforeDispatch, o.Status) {
		return LinesRefund{}, problem.New(problem.OrderStatusConflict, "the order is %s: its food left the kitchen, so no stock goes back", o.Status).
			With("current_status", o.Status)
	}
	var out LinesRefund
	for i, l := range lines {
		it, err := s.q.OrderItemRefund(ctx, tx, dbsqlc.OrderItemRefundParams{OrderID: orderID, Line: l.Line, Qty: l.Qty, Restock: restock})
		if errors.Is(err, db.ErrNotFound) {
			return LinesRefund{}, problem.Field(fmt.Sprintf("lines[%d]", i), "the order has no line %d with %d units left to refund", l.Line, l.Qty)
		}
		if err != nil {
			return LinesRefund{}, fmt.Errorf("refund line %d: %w", l.Line, err)
		}
		out.AmountFen += refundOfUnits(it.UnitPriceFen, it.PackagingFeeFen, it.DiscountFen, it.Qty, it.RefundedQty-l.Qty, l.Qty)
		if restock {
			if err := inventory.GiveBack(ctx, tx, orderID, it.DishID, l.Qty); err != nil {
				return LinesRefund{}, err
			}
		}
	}
	items, err := s.q.OrderItemsByOrder(ctx, tx, orderID)
	if err != nil {
		return LinesRefund{}, fmt.Errorf("read order items: %w", err)
	}
	out.Whole = len(lines) > 0 && !slices.ContainsFunc(items, func(it dbsqlc.OrderItem) bool { return it.RefundedQty < it.Qty })
	return out, nil
}
