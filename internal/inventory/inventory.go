// Package inventory reserves dish stock for orders inside the caller's
// transaction: conditional decrements (never below zero) taken in dish-id
// order so that concurrent orders cannot deadlock, plus one reservation row
// per (order, dish) that is released exactly once when an order ends
// unfulfilled.
package inventory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
)

// Line is one dish of an order at its quoted unit price.
type Line struct {
	DishID       int64
	Qty          int32
	UnitPriceFen int64
}

// ShortDish is a dish that lacks stock, for the out-of-stock problem.
type ShortDish struct {
	DishID    string `json:"dish_id"`
	Name      string `json:"name"`
	Requested int32  `json:"requested"`
	Available int32  `json:"available"`
}

// ErrOutOfStock is the out-of-stock problem; its "dishes" member names
// every short dish.
func ErrOutOfStock(short []ShortDish) error {
	names := make([]string, len(short))
	for i, s := range short {
		names[i] = s.Name
	}
	return problem.New(problem.OutOfStock, "not enough stock of %v; nothing was reserved", names).With("dishes", short)
}

// ErrQuoteChanged is the quote-changed problem.
func ErrQuoteChanged(dishIDs []int64) error {
	ids := make([]string, len(dishIDs))
	for i, id := range dishIDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	return problem.New(problem.QuoteChanged, "the price or sale status of dishes %v changed since confirm; confirm again", ids).With("dish_ids", ids)
}

// Hold records one reservation row per line for orderID in tx. It locks no
// dish row for writing, so it belongs early in the transaction.
func Hold(ctx context.Context, tx dbsqlc.DBTX, orderID int64, lines []Line) error {
	q := dbsqlc.New()
	for _, l := range sorted(lines) {
		if err := q.ReservationInsert(ctx, tx, dbsqlc.ReservationInsertParams{OrderID: orderID, DishID: l.DishID, Qty: l.Qty}); err != nil {
			return fmt.Errorf("insert reservation: %w", err)
		}
	}
	return nil
}

// Take decrements the lines' stock in tx, in dish-id order (so that
// concurrent orders cannot deadlock), never below zero and only at the
// quoted price. Each decrement locks its dish row until the transaction
// ends, so callers run Take last, just before commit: a popular dish is
// then locked for a commit, not for the whole order. When any dish is
// short, or no longer sold at the quoted price, it returns the problem
// naming every such dish; the caller rolls back, so nothing is taken.
func Take(ctx context.Context, tx dbsqlc.DBTX, merchantID int64, lines []Line) error {
	q := dbsqlc.New()
	var failed []Line
	for _, l := range sorted(lines) {
		_, err := q.DishReserveStock(ctx, tx, dbsqlc.DishReserveStockParams{
			ID: l.DishID, MerchantID: merchantID, PriceFen: l.UnitPriceFen, Qty: l.Qty,
		})
		if errors.Is(db.NoRows(err), db.ErrNotFound) {
			failed = append(failed, l)
			continue
		}
		if err != nil {
			return fmt.Errorf("reserve dish %d: %w", l.DishID, err)
		}
	}
	if len(failed) > 0 {
		return explain(ctx, tx, merchantID, failed)
	}
	return nil
}

func sorted(lines []Line) []Line {
	out := slices.Clone(lines)
	slices.SortFunc(out, func(a, b Line) int { return cmp.Compare(a.DishID, b.DishID) })
	return out
}

// explain tells why the failed lines could not be reserved: a changed
// quote wins over short stock, since confirming again is the fix for both.
func explain(ctx context.Context, tx dbsqlc.DBTX, merchantID int64, failed []Line) error {
	ids := make([]int64, len(failed))
	for i, l := range failed {
		ids[i] = l.DishID
	}
	rows, err := dbsqlc.New().DishesForQuote(ctx, tx, dbsqlc.DishesForQuoteParams{MerchantID: merchantID, Ids: ids})
	if err != nil {
		return fmt.Errorf("explain reservation failure: %w", err)
	}
	byID := map[int64]dbsqlc.DishesForQuoteRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	var changed []int64
	var short []ShortDish
	for _, l := range failed {
		d, ok := byID[l.DishID]
		switch {
		case !ok || !d.OnSale || d.PriceFen != l.UnitPriceFen:
			changed = append(changed, l.DishID)
		case d.Stock < l.Qty:
			short = append(short, ShortDish{DishID: strconv.FormatInt(d.ID, 10), Name: d.Name, Requested: l.Qty, Available: d.Stock})
		default:
			// Stock came back between the decrement and this read; report
			// it as short anyway: the whole order is rolled back.
			short = append(short, ShortDish{DishID: strconv.FormatInt(d.ID, 10), Name: d.Name, Requested: l.Qty, Available: d.Stock})
		}
	}
	if len(changed) > 0 {
		return ErrQuoteChanged(changed)
	}
	return ErrOutOfStock(short)
}

// Release returns the stock an order holds, in tx. Each reservation is
// released once however often Release runs; dishes are updated in id
// order, like Reserve, so the two cannot deadlock.
func Release(ctx context.Context, tx dbsqlc.DBTX, orderID int64) (int32, error) {
	q := dbsqlc.New()
	rows, err := q.ReservationRelease(ctx, tx, orderID)
	if err != nil {
		return 0, fmt.Errorf("release reservations: %w", err)
	}
	slices.SortFunc(rows, func(a, b dbsqlc.ReservationReleaseRow) int { return cmp.Compare(a.DishID, b.DishID) })
	var units int32
	for _, r := range rows {
		if err := q.DishReturnStock(ctx, tx, dbsqlc.DishReturnStockParams{ID: r.DishID, Qty: r.Qty}); err != nil {
			return 0, fmt.Errorf("return stock of dish %d: %w", r.DishID, err)
		}
		units += r.Qty
	}
	return units, nil
}
