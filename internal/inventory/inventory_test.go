package inventory_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/testenv"
)

// shop is one merchant's dishes in a fresh database.
type shop struct {
	pool     *pgxpool.Pool
	merchant int64
}

func newShop(t *testing.T) shop {
	t.Helper()
	pool := testenv.NewDB(t)
	m, err := dbsqlc.New().MerchantInsert(context.Background(), pool, dbsqlc.MerchantInsertParams{Name: "Shop", Status: "open"})
	if err != nil {
		t.Fatal(err)
	}
	return shop{pool: pool, merchant: m.ID}
}

// dish adds a dish at 1000 fen with units of stock.
func (s shop) dish(t *testing.T, name string, units int32) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (int64, error) {
		id, err := dbsqlc.New().DishInsert(ctx, tx, dbsqlc.DishInsertParams{MerchantID: s.merchant, Name: name, PriceFen: 1000, OnSale: true})
		if err != nil {
			return 0, err
		}
		_, err = inventory.Restock(ctx, tx, id, inventory.Change{SetOnHand: &units, Opening: true, Actor: "test"})
		return id, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// shards returns a dish's shard units in shard order.
func (s shop) shards(t *testing.T, dish int64) []int32 {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), "SELECT units FROM dish_stock WHERE dish_id = $1 ORDER BY shard", dish)
	if err != nil {
		t.Fatal(err)
	}
	units, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return units
}

func (s shop) stock(t *testing.T, dish int64) int32 {
	t.Helper()
	var total int32
	for _, u := range s.shards(t, dish) {
		total += u
	}
	return total
}

// take runs Take for lines in a transaction of its own and commits.
func (s shop) take(ctx context.Context, lines ...inventory.Line) error {
	return db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		return inventory.Take(ctx, tx, nil, inventory.Merchant{ID: s.merchant, QuoteVersion: 1}, lines)
	})
}

func TestSetSpreadsStockOverShards(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	for _, tc := range []struct {
		units int32
		want  []int32
	}{
		{0, []int32{0}},
		{10, []int32{10}},
		{33, []int32{17, 16}},
		{100, []int32{17, 17, 17, 17, 16, 16}},
		{1000, slices.Concat(slices.Repeat([]int32{32}, 8), slices.Repeat([]int32{31}, 24))}, // at most 32 shards
		{5, []int32{5}}, // shrinking drops the extra shards
	} {
		t.Run(fmt.Sprint(tc.units), func(t *testing.T) {
			d := s.dish(t, fmt.Sprint("set ", tc.units), 1000)
			if err := db.WithTx(context.Background(), s.pool, func(tx pgx.Tx) error {
				_, err := inventory.Restock(context.Background(), tx, d, inventory.Change{SetOnHand: &tc.units, Actor: "test"})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, s.shards(t, d)); diff != "" {
				t.Errorf("shards (-want +got):\n%s", diff)
			}
		})
	}
}

// A line takes from several shards when no single shard has its units,
// and Release gives them back.
func TestTakeGathersFromSeveralShards(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	ctx := context.Background()
	d := s.dish(t, "thin", 40) // two shards of 20
	if err := s.take(ctx, inventory.Line{DishID: d, Qty: 30, UnitPriceFen: 1000, OptionsVersion: 1}); err != nil {
		t.Fatal(err)
	}
	if got := s.stock(t, d); got != 10 {
		t.Fatalf("stock %d after taking 30 of 40, want 10", got)
	}
	err := s.take(ctx, inventory.Line{DishID: d, Qty: 11, UnitPriceFen: 1000, OptionsVersion: 1})
	p, ok := problem.As(err)
	if !ok || p.Type != problem.OutOfStock {
		t.Fatalf("taking 11 of 10: %v, want out-of-stock", err)
	}
	short := p.Extra["dishes"].([]inventory.ShortDish)
	if len(short) != 1 || short[0].Available != 10 || short[0].Requested != 11 {
		t.Errorf("short dishes %+v, want 11 requested, 10 available", short)
	}
	if got := s.stock(t, d); got != 10 {
		t.Errorf("a refused take changed the stock to %d", got)
	}
}

func TestTakeRefusesAChangedQuote(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	ctx := context.Background()
	d := s.dish(t, "repriced", 100)
	err := s.take(ctx, inventory.Line{DishID: d, Qty: 1, UnitPriceFen: 999, OptionsVersion: 1})
	if p, ok := problem.As(err); !ok || p.Type != problem.QuoteChanged {
		t.Fatalf("take at an old price: %v, want quote-changed", err)
	}
	for _, l := range []inventory.Line{
		{DishID: d, Qty: 1, UnitPriceFen: 1000, OptionsVersion: 1, PackagingFeeFen: 100},
		{DishID: d, Qty: 1, UnitPriceFen: 1000, OptionsVersion: 2},
	} {
		if err := s.take(ctx, l); !isQuoteChanged(err) {
			t.Fatalf("take of %+v (packaging 0, options version 1): %v, want quote-changed", l, err)
		}
	}
	if _, err := s.pool.Exec(ctx, "UPDATE dishes SET on_sale = false WHERE id = $1", d); err != nil {
		t.Fatal(err)
	}
	err = s.take(ctx, inventory.Line{DishID: d, Qty: 1, UnitPriceFen: 1000, OptionsVersion: 1})
	if p, ok := problem.As(err); !ok || p.Type != problem.QuoteChanged {
		t.Fatalf("take of a dish off sale: %v, want quote-changed", err)
	}
	if got := s.stock(t, d); got != 100 {
		t.Errorf("stock %d, want 100 untouched", got)
	}
}

// Buyers of a few dishes, with one to three lines each, take at once,
// while some cancel and return what they took: no shard goes below zero
// (the schema refuses it), the stock plus what is held is what was seeded,
// nobody is refused while the stock could serve them, and no two orders
// deadlock (PostgreSQL would abort one with an error).
func TestConcurrentTakesNeverOversell(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		stock   []int32
		buyers  int
		maxQty  int32
		release int // one buyer in release cancels: returns its stock after commit
	}{
		{name: "one hot dish, 32 shards", stock: []int32{1000}, buyers: 600, maxQty: 3},
		{name: "one dish sold out", stock: []int32{100}, buyers: 200, maxQty: 3},
		{name: "three dishes, carts of several", stock: []int32{60, 45, 200}, buyers: 200, maxQty: 4, release: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newShop(t)
			ctx := context.Background()
			user := s.user(t)
			var dishes []int64
			for i, units := range tc.stock {
				dishes = append(dishes, s.dish(t, fmt.Sprint("dish ", i), units))
			}
			var (
				mu       sync.Mutex
				taken    = map[int64]int32{}
				refused  = map[int64]int32{} // the smallest refused quantity per dish
				wg       sync.WaitGroup
				failures []error
			)
			gate := make(chan struct{}, 24)
			for b := range tc.buyers {
				wg.Go(func() {
					gate <- struct{}{}
					defer func() { <-gate }()
					rng := rand.New(rand.NewPCG(uint64(b), 7)) //nolint:gosec // G404: test data
					var lines []inventory.Line
					for _, d := range dishes {
						if len(lines) == 0 || rng.IntN(2) == 0 {
							lines = append(lines, inventory.Line{DishID: d, Qty: 1 + rng.Int32N(tc.maxQty), UnitPriceFen: 1000, OptionsVersion: 1})
						}
					}
					rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
					giveBack := tc.release > 0 && b%tc.release == 0
					err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
						orderID := int64(b + 1)
						digest := sha256.Sum256(fmt.Append(nil, "order ", orderID))
						if _, err := dbsqlc.New().OrderInsert(ctx, tx, dbsqlc.OrderInsertParams{
							ID: orderID, UserID: user, MerchantID: s.merchant, IntentDigest: digest[:], ContentDigest: digest[:], IntentSeq: 1,
							DigestAlg: "SM3", ItemsTotalFen: 1, TotalFen: 1, Address: []byte("{}"), PayDeadline: time.Now(), CreatedAt: time.Now(), Fulfilment: "delivery",
						}); err != nil {
							return err
						}
						if err := inventory.Hold(ctx, tx, orderID, lines); err != nil {
							return err
						}
						return inventory.Take(ctx, tx, nil, inventory.Merchant{ID: s.merchant, QuoteVersion: 1}, lines)
					})
					if err == nil && giveBack {
						err = db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
							_, err := inventory.Release(ctx, tx, int64(b+1))
							return err
						})
					}
					mu.Lock()
					defer mu.Unlock()
					var p *problem.Error
					switch {
					case err == nil && !giveBack:
						for _, l := range lines {
							taken[l.DishID] += l.Qty
						}
					case err == nil:
					case errors.As(err, &p) && p.Type == problem.OutOfStock:
						for _, sd := range p.Extra["dishes"].([]inventory.ShortDish) {
							for _, l := range lines {
								if fmt.Sprint(l.DishID) == sd.DishID && (refused[l.DishID] == 0 || l.Qty < refused[l.DishID]) {
									refused[l.DishID] = l.Qty
								}
							}
						}
					default:
						failures = append(failures, err)
					}
				})
			}
			wg.Wait()
			for _, err := range failures {
				t.Errorf("take failed: %v", err)
			}
			for i, d := range dishes {
				left := s.stock(t, d)
				if left+taken[d] != tc.stock[i] {
					t.Errorf("dish %d: %d left + %d taken != %d seeded", i, left, taken[d], tc.stock[i])
				}
				// Without returns stock only goes down, so a refusal of q
				// units means fewer than q were left at the end.
				if q := refused[d]; tc.release == 0 && q > 0 && left >= q {
					t.Errorf("dish %d: a buyer of %d was refused, yet %d are left", i, q, left)
				}
			}
			if tc.name == "one dish sold out" && s.stock(t, dishes[0]) >= tc.maxQty {
				t.Errorf("200 buyers of up to 3 left %d of 100 units", s.stock(t, dishes[0]))
			}
		})
	}
}

// user returns the id of a user for the test's orders.
func (s shop) user(t *testing.T) int64 {
	t.Helper()
	u, err := dbsqlc.New().UserUpsertByOpenID(context.Background(), s.pool, "buyer")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

func isQuoteChanged(err error) bool {
	p, ok := problem.As(err)
	return ok && p.Type == problem.QuoteChanged
}
