// Package inventory reserves dish stock for orders inside the caller's
// transaction: conditional decrements (never below zero) of a dish's
// stock shards, taken in dish-id order so that concurrent orders cannot
// deadlock, plus one reservation row per (order, dish) that is released
// exactly once when an order ends unfulfilled.
package inventory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
)

// Merchant is the merchant side of a quote: an order is taken only while
// its merchant is open and its rules (delivery fees, minimum order, hours)
// are those of the quote, the version it was quoted at.
type Merchant struct {
	ID           int64
	QuoteVersion int64
}

// Line is one dish of an order (all its lines, whatever their options)
// with the quote it was sold at: the dish's unit price before options,
// its packaging fee per unit and the version of its options.
type Line struct {
	DishID          int64
	Qty             int32
	UnitPriceFen    int64
	PackagingFeeFen int64
	OptionsVersion  int64
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
	return problem.New(problem.QuoteChanged, "the price, options or sale status of dishes %v changed since confirm; confirm again", ids).With("dish_ids", ids)
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

// Take takes the lines' stock in tx, in dish-id order (so that concurrent
// orders cannot deadlock across dishes), never below zero and only at the
// quoted price. A dish's stock is split over shard rows (see Set); each
// line takes its units from one shard, whose lock it holds until the
// transaction ends, so callers run Take last, just before commit, and the
// buyers of one popular dish spread over its shards instead of queueing
// for one row. Statements queued on pending (if not nil) are sent in the
// same round trip as Take's first. When any dish is short, or no longer
// sold at the quoted price, it returns the problem naming every such
// dish; the caller rolls back, so nothing is taken.
func Take(ctx context.Context, tx pgx.Tx, pending *db.Pipeline, m Merchant, lines []Line) error {
	var failed []Line
	for _, l := range sorted(lines) {
		if pending == nil {
			pending = db.NewPipeline(tx)
		}
		ok, err := take(ctx, tx, pending, m, l)
		if err != nil {
			return fmt.Errorf("take stock of dish %d: %w", l.DishID, err)
		}
		if !ok {
			failed = append(failed, l)
		}
	}
	if len(failed) > 0 {
		return explain(ctx, tx, m, failed)
	}
	return nil
}

// FreeTake is lines as the arrays of a statement that takes each line's
// units from a free shard in one go (db/functions/order_place.sql): in
// dish-id order, each with the shard to start looking from, spread at
// random as take's first step does.
type FreeTake struct {
	DishIDs          []int64
	Qtys             []int32
	PricesFen        []int64
	PackagingFeesFen []int64
	OptionsVersions  []int64
	StartShards      []int16
}

// FreeTakeOf is lines as a FreeTake.
func FreeTakeOf(lines []Line) FreeTake {
	lines = sorted(lines)
	t := FreeTake{
		DishIDs: make([]int64, len(lines)), Qtys: make([]int32, len(lines)), PricesFen: make([]int64, len(lines)),
		PackagingFeesFen: make([]int64, len(lines)), OptionsVersions: make([]int64, len(lines)), StartShards: make([]int16, len(lines)),
	}
	for i, l := range lines {
		t.DishIDs[i], t.Qtys[i], t.PricesFen[i] = l.DishID, l.Qty, l.UnitPriceFen
		t.PackagingFeesFen[i], t.OptionsVersions[i] = l.PackagingFeeFen, l.OptionsVersion
		t.StartShards[i] = int16(rand.IntN(maxShards)) //nolint:gosec // G115: below maxShards; G404: spreads load, guards nothing
	}
	return t
}

// take takes one line's units, reporting false when the dish lacks them or
// the quote no longer holds. It tries, in order:
//
//  1. a shard that has the units and is free, without waiting;
//  2. a shard that had them, waiting for its lock (all were busy);
//  3. every shard, locked in shard order, taking from several (the units
//     are spread thin, near the end of the stock).
//
// Steps 1 and 2 run in a savepoint that is rolled back when they take
// nothing: a row lock they took in passing (a shard that changed under
// them) is dropped with it, so a transaction never waits for one shard of
// a dish while it holds another, and waits cannot form a cycle. The first
// try goes out with whatever pipe holds.
func take(ctx context.Context, tx pgx.Tx, pipe *db.Pipeline, m Merchant, l Line) (bool, error) {
	q := dbsqlc.New()
	for range 3 {
		ok, err := try(ctx, tx, pipe, func(p *db.Pipeline) error {
			_, err := q.StockTakeFree(ctx, p, dbsqlc.StockTakeFreeParams{
				Qty: l.Qty, DishID: l.DishID, MerchantID: m.ID, QuoteVersion: m.QuoteVersion, PriceFen: l.UnitPriceFen,
				PackagingFeeFen: l.PackagingFeeFen, OptionsVersion: l.OptionsVersion, Start: int16(rand.IntN(maxShards)), //nolint:gosec // G115: below maxShards; G404: spreads load, guards nothing
			})
			return err
		})
		if ok || err != nil {
			return ok, err
		}
		shards, err := q.StockShardsWith(ctx, tx, dbsqlc.StockShardsWithParams{
			DishID: l.DishID, Qty: l.Qty, MerchantID: m.ID, QuoteVersion: m.QuoteVersion, PriceFen: l.UnitPriceFen,
			PackagingFeeFen: l.PackagingFeeFen, OptionsVersion: l.OptionsVersion,
		})
		if err != nil {
			return false, err
		}
		if len(shards) == 0 {
			break
		}
		ok, err = try(ctx, tx, pipe, func(p *db.Pipeline) error {
			_, err := q.StockTakeShard(ctx, p, dbsqlc.StockTakeShardParams{
				Qty: l.Qty, DishID: l.DishID, Shard: shards[rand.IntN(len(shards))], MerchantID: m.ID, QuoteVersion: m.QuoteVersion, PriceFen: l.UnitPriceFen, //nolint:gosec // G404: spreads load, guards nothing
				PackagingFeeFen: l.PackagingFeeFen, OptionsVersion: l.OptionsVersion,
			})
			return err
		})
		if ok || err != nil {
			return ok, err
		}
	}
	return gather(ctx, tx, m, l)
}

// try runs attempt in a savepoint, both sent in one round trip with
// whatever pipe holds. It keeps the attempt's work when it found a row and
// rolls it back, row locks included, when it found none.
func try(ctx context.Context, tx pgx.Tx, pipe *db.Pipeline, attempt func(*db.Pipeline) error) (bool, error) {
	q := dbsqlc.New()
	if err := q.StockSavepoint(ctx, pipe); err != nil {
		return false, err
	}
	err := attempt(pipe)
	if errors.Is(err, db.ErrNotFound) {
		return false, q.StockRollbackToSavepoint(ctx, tx)
	}
	// Success leaves the savepoint in place: it ends with tx, saving a
	// round trip; an error aborts tx anyway.
	return err == nil, err
}

// gather locks every shard of the line's dish in shard order and takes the
// units from as many shards as it needs.
func gather(ctx context.Context, tx pgx.Tx, m Merchant, l Line) (bool, error) {
	q := dbsqlc.New()
	shards, err := q.StockLockShards(ctx, tx, l.DishID)
	if err != nil {
		return false, err
	}
	holds, err := q.StockQuoteHolds(ctx, tx, dbsqlc.StockQuoteHoldsParams{DishID: l.DishID, MerchantID: m.ID, QuoteVersion: m.QuoteVersion, PriceFen: l.UnitPriceFen,
		PackagingFeeFen: l.PackagingFeeFen, OptionsVersion: l.OptionsVersion})
	if err != nil || !holds {
		return false, err
	}
	var total int64
	for _, s := range shards {
		total += int64(s.Units)
	}
	if total < int64(l.Qty) {
		return false, nil
	}
	need := l.Qty
	for _, s := range shards {
		n := min(need, s.Units)
		if n == 0 {
			continue
		}
		if err := q.StockTakeLocked(ctx, tx, dbsqlc.StockTakeLockedParams{Qty: n, DishID: l.DishID, Shard: s.Shard}); err != nil {
			return false, err
		}
		if need -= n; need == 0 {
			break
		}
	}
	return true, nil
}

// maxShards is the most shards a dish's stock is split over, and
// unitsPerShard the fewest units that make a shard worth having: a dish
// with 10 units has one shard, one with 100 has 6, one with 1000 has 32.
const (
	maxShards     = 32
	unitsPerShard = 16
)

// shardsFor is the number of shards for units of stock.
func shardsFor(units int32) int32 {
	return min(maxShards, max(1, units/unitsPerShard))
}

// Level is a dish's stock as merchants see it: Available is for sale,
// Held is reserved by open orders (placed, not yet dispatched or ended),
// and OnHand is their sum: what the kitchen has.
type Level struct {
	Available int32 `json:"stock"`
	Held      int32 `json:"held"`
	OnHand    int32 `json:"on_hand"`
}

// Change is one restock: set what is on hand (SetOnHand), optionally only
// if it is still the figure the merchant saw (IfOnHand), or adjust it by
// Delta. Exactly one of SetOnHand and Delta is set.
type Change struct {
	SetOnHand *int32
	IfOnHand  *int32
	Delta     *int32
	// Opening marks the first stock of a new dish, for the ledger.
	Opening bool
	// Actor names who restocked, for the ledger.
	Actor string
}

// MaxOnHand is the most units a dish may have on hand.
const MaxOnHand = 1_000_000

// ErrAboveMax is a delta that would put more than MaxOnHand on hand.
var ErrAboveMax = problem.Field("delta", "on hand would exceed %d", MaxOnHand)

// Restock changes what a dish has on hand, in tx, and records the change
// in the dish's stock ledger. What is for sale becomes on hand minus what
// open orders hold, so a sale, a cancel or a dispatch that races the
// restock is neither lost nor counted twice: the restock locks the dish
// and then every shard, which waits for the orders taking stock or
// returning it, and reads what is held after that. An order that commits
// a release later returns its units on top of a figure that still counted
// them as held (on hand is unchanged); one that reserves later takes them
// from the new figure.
func Restock(ctx context.Context, tx dbsqlc.DBTX, dishID int64, c Change) (Level, error) {
	q := dbsqlc.New()
	if _, err := q.DishLockForRestock(ctx, tx, dishID); err != nil {
		return Level{}, fmt.Errorf("lock dish %d: %w", dishID, err)
	}
	shards, err := q.StockLockShards(ctx, tx, dishID)
	if err != nil {
		return Level{}, fmt.Errorf("lock stock of dish %d: %w", dishID, err)
	}
	held, err := q.StockHeld(ctx, tx, dishID)
	if err != nil {
		return Level{}, fmt.Errorf("read held stock of dish %d: %w", dishID, err)
	}
	var cur Level
	for _, s := range shards {
		cur.Available += s.Units
	}
	cur.Held, cur.OnHand = held, cur.Available+held

	kind, target := "set", cur.OnHand
	switch {
	case c.Delta != nil:
		kind = "delta"
		if t := int64(cur.OnHand) + int64(*c.Delta); t > MaxOnHand {
			return Level{}, ErrAboveMax.With("current", cur)
		} else if t < int64(held) {
			return Level{}, belowHeld(cur, t)
		}
		target += *c.Delta
	case c.SetOnHand != nil:
		if c.IfOnHand != nil && *c.IfOnHand != cur.OnHand {
			return Level{}, problem.New(problem.StockChanged, "on hand is %d, not %d: sales, cancels or another restock changed it; read it again", cur.OnHand, *c.IfOnHand).
				With("current", cur)
		}
		if *c.SetOnHand < held {
			return Level{}, belowHeld(cur, int64(*c.SetOnHand))
		}
		target = *c.SetOnHand
	default:
		return Level{}, errors.New("restock: neither a figure nor a delta")
	}
	if c.Opening {
		kind = "opening"
	}
	next := Level{Available: target - held, Held: held, OnHand: target}
	if err := spread(ctx, tx, dishID, next.Available); err != nil {
		return Level{}, err
	}
	if err := q.StockAdjustmentInsert(ctx, tx, dbsqlc.StockAdjustmentInsertParams{
		DishID: dishID, Kind: kind, Delta: target - cur.OnHand, OnHandAfter: target, Actor: c.Actor,
	}); err != nil {
		return Level{}, fmt.Errorf("record stock adjustment of dish %d: %w", dishID, err)
	}
	return next, nil
}

func belowHeld(cur Level, want int64) error {
	return problem.New(problem.StockHeld, "open orders hold %d units, so on hand cannot be %d; cancel or reject orders first", cur.Held, want).
		With("current", cur)
}

// spread sets the units for sale, spread evenly over the dish's shards;
// the caller holds every shard's lock.
func spread(ctx context.Context, tx dbsqlc.DBTX, dishID int64, units int32) error {
	q := dbsqlc.New()
	n := shardsFor(units)
	if err := q.StockDeleteShardsFrom(ctx, tx, dbsqlc.StockDeleteShardsFromParams{DishID: dishID, Shards: int16(n)}); err != nil { //nolint:gosec // G115: at most maxShards
		return fmt.Errorf("drop stock shards of dish %d: %w", dishID, err)
	}
	if err := q.StockSpread(ctx, tx, dbsqlc.StockSpreadParams{DishID: dishID, Units: units, Shards: n}); err != nil {
		return fmt.Errorf("set stock of dish %d: %w", dishID, err)
	}
	return nil
}

// Consume marks the units an order holds as gone with it (dispatched):
// they leave what is on hand, and can no longer be released.
func Consume(ctx context.Context, tx dbsqlc.DBTX, orderID int64) error {
	if err := dbsqlc.New().ReservationConsume(ctx, tx, orderID); err != nil {
		return fmt.Errorf("consume reservations: %w", err)
	}
	return nil
}

func sorted(lines []Line) []Line {
	out := slices.Clone(lines)
	slices.SortFunc(out, func(a, b Line) int { return cmp.Compare(a.DishID, b.DishID) })
	return out
}

// explain tells why the failed lines could not be reserved: a closed
// merchant first, then a changed quote (the merchant's rules, a price,
// packaging, options, sale status), then
// short stock, since confirming again is the fix for the last two.
func explain(ctx context.Context, tx dbsqlc.DBTX, m Merchant, failed []Line) error {
	merchant, err := dbsqlc.New().MerchantGetByID(ctx, tx, m.ID)
	if err != nil {
		return fmt.Errorf("explain reservation failure: %w", err)
	}
	if merchant.Status != "open" {
		return problem.New(problem.MerchantClosed, "the merchant closed since confirm")
	}
	if merchant.QuoteVersion != m.QuoteVersion {
		return problem.New(problem.QuoteChanged, "the merchant's delivery fees, minimum order or hours changed since confirm; confirm again").
			With("delivery_fee_fen", merchant.DeliveryFeeFen)
	}
	merchantID := m.ID
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
		case !ok || !d.OnSale || d.PriceFen != l.UnitPriceFen || d.PackagingFeeFen != l.PackagingFeeFen || d.OptionsVersion != l.OptionsVersion:
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
// order, like Take, and each waits for one shard while holding none of
// that dish's, so the two cannot deadlock.
func Release(ctx context.Context, tx dbsqlc.DBTX, orderID int64) (int32, error) {
	q := dbsqlc.New()
	rows, err := q.ReservationRelease(ctx, tx, orderID)
	if err != nil {
		return 0, fmt.Errorf("release reservations: %w", err)
	}
	slices.SortFunc(rows, func(a, b dbsqlc.ReservationReleaseRow) int { return cmp.Compare(a.DishID, b.DishID) })
	var units int32
	for _, r := range rows {
		// Any shard will do: the stock is their sum.
		pick := rand.Int32N(maxShards) //nolint:gosec // G404: spreads load, guards nothing
		n, err := q.StockReturn(ctx, tx, dbsqlc.StockReturnParams{DishID: r.DishID, Qty: r.Qty, Pick: pick})
		if err == nil && n == 0 {
			// A restock dropped the shard while this waited for it.
			err = q.StockReturnFirst(ctx, tx, dbsqlc.StockReturnFirstParams{DishID: r.DishID, Qty: r.Qty})
		}
		if err != nil {
			return 0, fmt.Errorf("return stock of dish %d: %w", r.DishID, err)
		}
		units += r.Qty
	}
	return units, nil
}

// ErrNothingHeld is a give-back of units an order no longer holds (they
// left with it, or went back already).
var ErrNothingHeld = problem.New(problem.OrderStatusConflict, "the order no longer holds these units: they left the kitchen with it, or went back already")

// GiveBack returns qty of the units an order holds of a dish to sale, in
// tx: a refunded line whose food was not made. The order's reservation
// shrinks by them (and is released when none is left), so a later
// release or dispatch counts only what it still holds.
func GiveBack(ctx context.Context, tx dbsqlc.DBTX, orderID, dishID int64, qty int32) error {
	q := dbsqlc.New()
	if _, err := q.ReservationShrink(ctx, tx, dbsqlc.ReservationShrinkParams{OrderID: orderID, DishID: dishID, Qty: qty}); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return ErrNothingHeld
		}
		return fmt.Errorf("shrink reservation: %w", err)
	}
	pick := rand.Int32N(maxShards) //nolint:gosec // G404: spreads load, guards nothing
	n, err := q.StockReturn(ctx, tx, dbsqlc.StockReturnParams{DishID: dishID, Qty: qty, Pick: pick})
	if err == nil && n == 0 {
		err = q.StockReturnFirst(ctx, tx, dbsqlc.StockReturnFirstParams{DishID: dishID, Qty: qty})
	}
	if err != nil {
		return fmt.Errorf("return stock of dish %d: %w", dishID, err)
	}
	return nil
}
