package payment

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// outcomeMoved is payment_succeed's TK002 as an outcome: the order moved
// since it was read; nothing was written.
const outcomeMoved = "moved"

// newSucceedGroup commits the one-statement payment successes of the
// same moment together (db.Group): payment_succeed alone,
// payment_succeed_grouped (migration 00025, each payment in a
// subtransaction that answers moved for TK002) for several.
func (s *Service) newSucceedGroup(maxGroup, slots int) *db.Group[dbsqlc.PaymentSucceedParams, string] {
	return db.NewGroup(db.GroupOptions{Statement: "payment_succeed", Max: maxGroup, Slots: slots}, s.succeedAlone, s.succeedTogether)
}

// succeedAlone applies one payment in a statement (and a transaction) of
// its own.
func (s *Service) succeedAlone(ctx context.Context, p dbsqlc.PaymentSucceedParams) (string, error) {
	outcome, err := s.q.PaymentSucceed(ctx, s.o.Pool, p)
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
func (s *Service) succeedTogether(ctx context.Context, ps []dbsqlc.PaymentSucceedParams) ([]string, error) {
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ps[a].OutTradeNo, ps[b].OutTradeNo) })
	params := make([]dbsqlc.PaymentSucceedGroupedParams, len(ps))
	for i, j := range order {
		params[i] = dbsqlc.PaymentSucceedGroupedParams(ps[j])
	}
	rows, err := db.BatchRows(len(ps), s.q.PaymentSucceedGrouped(ctx, s.o.Pool, params))
	if err != nil {
		return nil, fmt.Errorf("apply payments together: %w", err)
	}
	out := make([]string, len(ps))
	for i, j := range order {
		out[j] = rows[i]
	}
	return out, nil
}
