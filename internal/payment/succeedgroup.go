package payment

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// outcomeMoved is payment_settle's TK002 as an outcome: the order was not
// waiting for payment; nothing was written.
const outcomeMoved = "moved"

// newSucceedGroup commits the one-statement payment successes of the
// same moment together (db.Group): payment_settle alone,
// payment_settle_grouped (migration 00026, each payment in a
// subtransaction that answers moved for TK002) for several.
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
