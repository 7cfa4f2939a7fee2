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

// PrepareRefundTx locks an order for a partial refund by actor, in tx,
// and checks it may be refunded in part. For lines it marks their units
// refunded (and, with restock, gives their stock back to sale) and
// returns what they cost: unit price and packaging fee. Refund requests
// of one order take turns on the lock.
func (s *Service) PrepareRefundTx(ctx context.Context, tx pgx.Tx, orderID int64, actor Actor, lines []RefundLine, restock bool) (int64, error) {
	o, err := s.q.OrderGetForUpdate(ctx, tx, orderID)
	if errors.Is(err, db.ErrNotFound) || (err == nil && !owns(actor, o)) {
		return 0, ErrOrderNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("lock order: %w", err)
	}
	if !slices.Contains(refundable, o.Status) {
		return 0, problem.New(problem.OrderStatusConflict, "cannot refund part of an order that is %s", o.Status).With("current_status", o.Status)
	}
	if restock && !slices.Contains(beforeDispatch, o.Status) {
		return 0, problem.New(problem.OrderStatusConflict, "the order is %s: its food left the kitchen, so no stock goes back", o.Status).
			With("current_status", o.Status)
	}
	var amount int64
	for i, l := range lines {
		it, err := s.q.OrderItemRefund(ctx, tx, dbsqlc.OrderItemRefundParams{OrderID: orderID, Line: l.Line, Qty: l.Qty, Restock: restock})
		if errors.Is(err, db.ErrNotFound) {
			return 0, problem.Field(fmt.Sprintf("lines[%d]", i), "the order has no line %d with %d units left to refund", l.Line, l.Qty)
		}
		if err != nil {
			return 0, fmt.Errorf("refund line %d: %w", l.Line, err)
		}
		amount += int64(l.Qty) * (it.UnitPriceFen + it.PackagingFeeFen)
		if restock {
			if err := inventory.GiveBack(ctx, tx, orderID, it.DishID, l.Qty); err != nil {
				return 0, err
			}
		}
	}
	return amount, nil
}
