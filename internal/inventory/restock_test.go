package inventory_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/problem"
)

// place inserts order id holding lines and takes their stock, committed.
func (s shop) place(ctx context.Context, user, id int64, lines ...inventory.Line) error {
	return db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		digest := sha256.Sum256(fmt.Append(nil, "order ", id))
		if _, err := dbsqlc.New().OrderInsert(ctx, tx, dbsqlc.OrderInsertParams{
			ID: id, UserID: user, MerchantID: s.merchant, IntentDigest: digest[:], ContentDigest: digest[:], IntentSeq: 1,
			DigestAlg: "SM3", ItemsTotalFen: 1, TotalFen: 1, Address: []byte("{}"), PayDeadline: time.Now(), CreatedAt: time.Now(), Fulfilment: "delivery",
		}); err != nil {
			return err
		}
		if err := inventory.Hold(ctx, tx, id, lines); err != nil {
			return err
		}
		return inventory.Take(ctx, tx, nil, inventory.Merchant{ID: s.merchant, QuoteVersion: 1}, lines)
	})
}

func (s shop) release(ctx context.Context, id int64) error {
	return db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := inventory.Release(ctx, tx, id)
		return err
	})
}

func (s shop) consume(ctx context.Context, id int64) error {
	return db.WithTx(ctx, s.pool, func(tx pgx.Tx) error { return inventory.Consume(ctx, tx, id) })
}

func (s shop) restock(ctx context.Context, dish int64, c inventory.Change) (inventory.Level, error) {
	c.Actor = "test"
	return db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (inventory.Level, error) { return inventory.Restock(ctx, tx, dish, c) })
}

func (s shop) level(t *testing.T, dish int64) inventory.Level {
	t.Helper()
	var l inventory.Level
	if err := s.pool.QueryRow(context.Background(), "SELECT stock, held, stock + held FROM dishes_with_stock WHERE id = $1", dish).
		Scan(&l.Available, &l.Held, &l.OnHand); err != nil {
		t.Fatal(err)
	}
	return l
}

func ptr[T any](v T) *T { return &v }

// The hostile tester's sequence: the merchant reads 20, a customer buys
// 3, the merchant sets 20, the customer cancels. On hand counts held
// units, so the set does not add the 3 a second time: 20 for sale after
// the cancel, not 23.
func TestReleaseAfterRestockNeverExceedsWhatWasSet(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	ctx := context.Background()
	user := s.user(t)
	d := s.dish(t, "noodles", 20)
	step := func(what string, err error, want inventory.Level) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if diff := cmp.Diff(want, s.level(t, d)); diff != "" {
			t.Fatalf("after %s (-want +got):\n%s", what, diff)
		}
	}
	step("a sale of 3", s.place(ctx, user, 1, inventory.Line{DishID: d, Qty: 3, UnitPriceFen: 1000, OptionsVersion: 1}), inventory.Level{Available: 17, Held: 3, OnHand: 20})
	_, err := s.restock(ctx, d, inventory.Change{SetOnHand: ptr(int32(20))})
	step("setting 20 on hand", err, inventory.Level{Available: 17, Held: 3, OnHand: 20})
	step("the cancel", s.release(ctx, 1), inventory.Level{Available: 20, Held: 0, OnHand: 20})

	// A dispatched order's units leave what is on hand for good.
	step("a sale of 5", s.place(ctx, user, 2, inventory.Line{DishID: d, Qty: 5, UnitPriceFen: 1000, OptionsVersion: 1}), inventory.Level{Available: 15, Held: 5, OnHand: 20})
	step("its dispatch", s.consume(ctx, 2), inventory.Level{Available: 15, Held: 0, OnHand: 15})
	step("a release after the dispatch", s.release(ctx, 2), inventory.Level{Available: 15, Held: 0, OnHand: 15})

	// A count made before those sales is refused, with the current figure.
	_, err = s.restock(ctx, d, inventory.Change{SetOnHand: ptr(int32(30)), IfOnHand: ptr(int32(20))})
	if p, ok := problem.As(err); !ok || p.Type != problem.StockChanged || p.Extra["current"] != (inventory.Level{Available: 15, OnHand: 15}) {
		t.Fatalf("a set on a stale count: %v %+v, want stock-changed with the current level", err, p)
	}
	_, err = s.restock(ctx, d, inventory.Change{SetOnHand: ptr(int32(30)), IfOnHand: ptr(int32(15))})
	step("a set on the current count", err, inventory.Level{Available: 30, OnHand: 30})
	_, err = s.restock(ctx, d, inventory.Change{Delta: ptr(int32(-4))})
	step("removing 4 spoiled", err, inventory.Level{Available: 26, OnHand: 26})

	// Units held by an open order cannot be counted away.
	step("a sale of 6", s.place(ctx, user, 3, inventory.Line{DishID: d, Qty: 6, UnitPriceFen: 1000, OptionsVersion: 1}), inventory.Level{Available: 20, Held: 6, OnHand: 26})
	for _, c := range []inventory.Change{{SetOnHand: ptr(int32(5))}, {Delta: ptr(int32(-21))}} {
		_, err := s.restock(ctx, d, c)
		if p, ok := problem.As(err); !ok || p.Type != problem.StockHeld {
			t.Fatalf("%+v below what is held: %v, want stock-held", c, err)
		}
	}
	step("refusals change nothing", nil, inventory.Level{Available: 20, Held: 6, OnHand: 26})
	_, err = s.restock(ctx, d, inventory.Change{SetOnHand: ptr(int32(6))})
	step("on hand exactly what is held", err, inventory.Level{Available: 0, Held: 6, OnHand: 6})
	ledger(t, s, d)
}

// ledger checks a dish's stock ledger: its deltas add up to what is for
// sale plus every unreleased reservation (consumed ones included), and
// returns what the ledger says is on hand now.
func ledger(t *testing.T, s shop, dish int64) int64 {
	t.Helper()
	var deltas, lastAfter, forSale, unreleased, consumed int64
	err := s.pool.QueryRow(context.Background(), `SELECT
	    (SELECT coalesce(sum(delta), 0) FROM stock_adjustments WHERE dish_id = $1),
	    (SELECT on_hand_after FROM stock_adjustments WHERE dish_id = $1 ORDER BY id DESC LIMIT 1),
	    (SELECT coalesce(sum(units), 0) FROM dish_stock WHERE dish_id = $1),
	    (SELECT coalesce(sum(qty), 0) FROM stock_reservations WHERE dish_id = $1 AND released_at IS NULL),
	    (SELECT coalesce(sum(qty), 0) FROM stock_reservations WHERE dish_id = $1 AND consumed_at IS NOT NULL)`, dish).
		Scan(&deltas, &lastAfter, &forSale, &unreleased, &consumed)
	if err != nil {
		t.Fatal(err)
	}
	if deltas != forSale+unreleased {
		t.Errorf("dish %d: ledger %d != %d for sale + %d unreleased", dish, deltas, forSale, unreleased)
	}
	return deltas - consumed
}

// Restocks, some setting what is on hand and some adding or removing
// units, race buyers who take stock and then either cancel (a release)
// or are dispatched (a consume). Whatever the interleaving, no unit is
// created or lost: at the end, when every order has ended, what is for
// sale is exactly what the ledger of restocks says is on hand minus what
// was dispatched, and no restock ever made a set figure grow by a
// release after it.
func TestRestocksDuringSalesConserveStock(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	ctx := context.Background()
	user := s.user(t)
	d := s.dish(t, "hot", 300)

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		failures  []error
		restocked atomic.Int64
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, err)
	}
	gate := make(chan struct{}, 16)
	for b := range 240 {
		wg.Go(func() {
			gate <- struct{}{}
			defer func() { <-gate }()
			id := int64(b + 1)
			err := s.place(ctx, user, id, inventory.Line{DishID: d, Qty: 1 + int32(b%3), UnitPriceFen: 1000, OptionsVersion: 1}) //nolint:gosec // G115: small
			if p, ok := problem.As(err); ok && p.Type == problem.OutOfStock {
				return
			}
			if err != nil {
				fail(fmt.Errorf("place %d: %w", id, err))
				return
			}
			if b%2 == 0 {
				err = s.release(ctx, id)
			} else {
				err = s.consume(ctx, id)
			}
			if err != nil {
				fail(fmt.Errorf("end %d: %w", id, err))
			}
		})
	}
	for r := range 60 {
		wg.Go(func() {
			gate <- struct{}{}
			defer func() { <-gate }()
			rng := rand.New(rand.NewPCG(uint64(r), 11)) //nolint:gosec // G404: test data
			c := inventory.Change{Delta: ptr(rng.Int32N(21) - 8)}
			if r%2 == 0 {
				c = inventory.Change{SetOnHand: ptr(100 + rng.Int32N(200))}
			}
			_, err := s.restock(ctx, d, c)
			var p *problem.Error
			switch {
			case err == nil:
				restocked.Add(1)
			case !errors.As(err, &p) || p.Type != problem.StockHeld:
				fail(fmt.Errorf("restock %+v: %w", c, err))
			}
		})
	}
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	onHand := ledger(t, s, d)
	got := s.level(t, d)
	if got.Held != 0 || int64(got.Available) != onHand || got.OnHand != got.Available {
		t.Errorf("every order ended: level %+v, want %d for sale and on hand as the ledger says", got, onHand)
	}
	// One ledger row per restock that answered success, and the opening.
	var rowsN int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM stock_adjustments WHERE dish_id = $1", d).Scan(&rowsN); err != nil {
		t.Fatal(err)
	}
	if int64(rowsN) != 1+restocked.Load() {
		t.Errorf("ledger has %d rows, want the opening and %d restocks", rowsN, restocked.Load())
	}
}
