package order

import (
	"context"
	"fmt"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// placeOutcome is what the one-statement placement of an order did.
type placeOutcome int16

const (
	// outcomeBusy: a line found no free shard at the quoted terms (a busy,
	// short or changed dish); nothing was written.
	outcomeBusy placeOutcome = -1
	// outcomeExists: an order with the id or the (user, intent digest)
	// exists; nothing was written.
	outcomeExists placeOutcome = 0
	// outcomePlaced: the order, its rows and its record are committed.
	outcomePlaced placeOutcome = 1
)

// newPlaceGroup commits the one-statement placements of the same moment
// together (db.Group): order_place alone, order_place_grouped (migration
// 00025, each order in a subtransaction that answers -1 for order_place's
// TK001) for several.
func (s *Service) newPlaceGroup(maxGroup, slots int) *db.Group[dbsqlc.OrderPlaceParams, placeOutcome] {
	return db.NewGroup(db.GroupOptions{Statement: "order_place", Max: maxGroup, Slots: slots}, s.placeAlone, s.placeTogether)
}

// placeAlone places one order in a statement (and a transaction) of its
// own.
func (s *Service) placeAlone(ctx context.Context, p dbsqlc.OrderPlaceParams) (placeOutcome, error) {
	placed, err := s.q.OrderPlace(ctx, s.opts.Pool, p)
	switch {
	case db.Raised(err, codeTakeNeedsFullPath):
		return outcomeBusy, nil
	case err != nil:
		return 0, fmt.Errorf("place order: %w", err)
	case !placed:
		return outcomeExists, nil
	}
	return outcomePlaced, nil
}

// placeTogether places orders in one pipeline and one transaction.
func (s *Service) placeTogether(ctx context.Context, ps []dbsqlc.OrderPlaceParams) ([]placeOutcome, error) {
	params := make([]dbsqlc.OrderPlaceGroupedParams, len(ps))
	for i, p := range ps {
		params[i] = dbsqlc.OrderPlaceGroupedParams(p)
	}
	rows, err := db.BatchRows(len(ps), s.q.OrderPlaceGrouped(ctx, s.opts.Pool, params))
	if err != nil {
		return nil, fmt.Errorf("place orders together: %w", err)
	}
	out := make([]placeOutcome, len(rows))
	for i, r := range rows {
		out[i] = placeOutcome(r)
	}
	return out, nil
}
