package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/redisconn"
	"github.com/takeout/takeout/internal/testenv"
)

var admin = auth.Staff{Subject: "ops", Role: auth.Role{Admin: true}}

type bundle struct {
	pool  *pgxpool.Pool
	redis testenv.Redis
	svc   *catalog.Service
}

func setup(t *testing.T) bundle {
	t.Helper()
	b := bundle{pool: testenv.NewDB(t), redis: testenv.NewRedis(t)}
	b.svc = newService(t, b.pool, b.redis.Conn(t))
	return b
}

// newService starts a catalog service with a cache TTL far longer than any
// test, so that only invalidation can refresh it.
func newService(t *testing.T, pool *pgxpool.Pool, rds *redisconn.Conn) *catalog.Service {
	t.Helper()
	svc, err := catalog.NewService(catalog.Options{
		Pool: pool, Redis: rds, Logger: slog.New(slog.DiscardHandler), CacheTTL: time.Hour, CacheSize: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); svc.RunInvalidations(ctx, ready) }()
	t.Cleanup(func() { cancel(); <-done; svc.Close() })
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("invalidation subscription not ready")
	}
	return svc
}

func ptr[T any](v T) *T { return &v }

func createMerchantWithDish(t *testing.T, svc *catalog.Service, pool *pgxpool.Pool, price int64, stock int32) (catalog.Merchant, catalog.Dish) {
	t.Helper()
	ctx := context.Background()
	m, err := db.WithTxV(ctx, pool, func(tx pgx.Tx) (catalog.Merchant, error) {
		return svc.CreateMerchant(ctx, tx, catalog.CreateMerchantRequest{Name: "Noodle Bar"})
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := createDish(ctx, svc, pool, admin, id(t, m.ID), catalog.CreateDishRequest{Name: "Beef Noodles", PriceFen: ptr(price), Stock: ptr(stock)})
	if err != nil {
		t.Fatal(err)
	}
	return m, d
}

// createDish creates a dish in a transaction of its own and announces it.
func createDish(ctx context.Context, svc *catalog.Service, pool *pgxpool.Pool, staff auth.Staff, merchantID int64, req catalog.CreateDishRequest) (catalog.Dish, error) {
	d, err := db.WithTxV(ctx, pool, func(tx pgx.Tx) (catalog.Dish, error) {
		return svc.CreateDish(ctx, tx, staff, merchantID, req)
	})
	if err == nil {
		svc.Changed(ctx, merchantID)
	}
	return d, err
}

func id(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func menu(t *testing.T, svc *catalog.Service, merchantID string) catalog.Menu {
	t.Helper()
	b, err := svc.MenuJSON(context.Background(), id(t, merchantID))
	if err != nil {
		t.Fatal(err)
	}
	var m catalog.Menu
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Many staff restock one dish at once, each reading what is on hand and
// setting it one higher on the condition that it is still what they read
// (retrying on stock-changed). Without the condition increments would be
// lost; with it, every one lands, and the dish's version (its name, price
// and sale status) is untouched.
func TestConcurrentConditionalRestocksLoseNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, d := createMerchantWithDish(t, b.svc, b.pool, 1000, 0)
	dishID := id(t, d.ID)

	const workers, perWorker = 8, 10
	var conflicts sync.Map
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range perWorker {
				for {
					cur, err := b.svc.Dish(ctx, admin, dishID)
					if err != nil {
						t.Error(err)
						return
					}
					_, err = b.svc.SetStock(ctx, admin, dishID, catalog.SetStockRequest{OnHand: ptr(*cur.OnHand + 1), IfOnHand: cur.OnHand})
					if p, ok := problem.As(err); ok && p.Type == problem.StockChanged {
						conflicts.Store(w, true)
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()

	got, err := b.svc.Dish(ctx, admin, dishID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stock != workers*perWorker || *got.OnHand != workers*perWorker {
		t.Errorf("stock = %d, on hand %d, want %d: restocks were lost", got.Stock, *got.OnHand, workers*perWorker)
	}
	if got.Version != d.Version {
		t.Errorf("version = %d, want %d: a restock is not an edit of the dish", got.Version, d.Version)
	}
	n := 0
	conflicts.Range(func(any, any) bool { n++; return true })
	if n == 0 {
		t.Log("no worker saw a stock-changed conflict; the race was not exercised this run")
	}
}

func TestStaleVersionIsAConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, d := createMerchantWithDish(t, b.svc, b.pool, 1000, 5)
	dishID := id(t, d.ID)

	if _, err := b.svc.UpdateDish(ctx, admin, dishID, catalog.UpdateDishRequest{Version: ptr(d.Version), PriceFen: ptr(int64(1200))}); err != nil {
		t.Fatal(err)
	}
	_, err := b.svc.UpdateDish(ctx, admin, dishID, catalog.UpdateDishRequest{Version: ptr(d.Version), PriceFen: ptr(int64(900))})
	p, ok := problem.As(err)
	if !ok || p.Type != problem.VersionConflict {
		t.Fatalf("stale update: %v, want version-conflict", err)
	}
	if diff := cmp.Diff(map[string]any{"current_version": d.Version + 1}, p.Extra); diff != "" {
		t.Errorf("problem extras (-want +got):\n%s", diff)
	}
	got, _ := b.svc.Dish(ctx, admin, dishID)
	if got.PriceFen != 1200 {
		t.Errorf("price = %d after rejected update, want 1200", got.PriceFen)
	}
}

// Merchant staff act only on their own merchant; admins on any.
func TestMerchantStaffScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ma, da := createMerchantWithDish(t, b.svc, b.pool, 1000, 5)
	mb, db := createMerchantWithDish(t, b.svc, b.pool, 2000, 5)
	staffA := auth.Staff{Subject: "a", Role: auth.Role{MerchantID: id(t, ma.ID)}}

	tests := []struct {
		name string
		call func() error
	}{
		{"update other dish", func() error {
			_, err := b.svc.UpdateDish(ctx, staffA, id(t, db.ID), catalog.UpdateDishRequest{Version: ptr(db.Version), PriceFen: ptr(int64(1))})
			return err
		}},
		{"set other stock", func() error {
			_, err := b.svc.SetStock(ctx, staffA, id(t, db.ID), catalog.SetStockRequest{OnHand: ptr(int32(0))})
			return err
		}},
		{"create dish at other merchant", func() error {
			_, err := createDish(ctx, b.svc, b.pool, staffA, id(t, mb.ID), catalog.CreateDishRequest{Name: "x", PriceFen: ptr(int64(1)), Stock: ptr(int32(1))})
			return err
		}},
		{"update other merchant", func() error {
			_, err := b.svc.UpdateMerchant(ctx, staffA, id(t, mb.ID), catalog.UpdateMerchantRequest{Version: ptr(mb.Version), Status: ptr("closed")})
			return err
		}},
		{"read other dish", func() error { _, err := b.svc.Dish(ctx, staffA, id(t, db.ID)); return err }},
		{"list other dishes", func() error { _, err := b.svc.Dishes(ctx, staffA, id(t, mb.ID)); return err }},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, auth.ErrOtherMerchant) {
			t.Errorf("%s: %v, want %v", tt.name, err, auth.ErrOtherMerchant)
		}
	}
	// Nothing of merchant B changed.
	if got := menu(t, b.svc, mb.ID); got.Merchant.Version != mb.Version || len(got.Dishes) != 1 || got.Dishes[0].Version != db.Version {
		t.Errorf("merchant B changed: %+v", got)
	}
	// Their own dish they may change.
	if _, err := b.svc.UpdateDish(ctx, staffA, id(t, da.ID), catalog.UpdateDishRequest{Version: ptr(da.Version), PriceFen: ptr(int64(1100))}); err != nil {
		t.Errorf("own dish: %v", err)
	}
}

func TestRetriedDishCreateMakesOneDish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m, _ := createMerchantWithDish(t, b.svc, b.pool, 1000, 5)
	req := catalog.CreateDishRequest{Name: "Dumplings", PriceFen: ptr(int64(800)), Stock: ptr(int32(3))}

	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() {
			_, err := createDish(ctx, b.svc, b.pool, admin, id(t, m.ID), req)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	created := 0
	for err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, catalog.ErrDishExists):
			t.Errorf("create: %v", err)
		}
	}
	var n int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM dishes WHERE name = 'Dumplings'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if created != 1 || n != 1 {
		t.Errorf("created %d, rows %d; want 1 and 1", created, n)
	}
}

// Two instances share a database and Redis: a change through one reaches
// the other's cache through pub/sub.
func TestInvalidationReachesOtherInstance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	other := newService(t, b.pool, b.redis.Conn(t))
	m, d := createMerchantWithDish(t, b.svc, b.pool, 1000, 5)

	if got := menu(t, other, m.ID).Dishes[0].PriceFen; got != 1000 {
		t.Fatalf("price = %d, want 1000", got)
	}
	if _, err := b.svc.UpdateDish(ctx, admin, id(t, d.ID), catalog.UpdateDishRequest{Version: ptr(d.Version), PriceFen: ptr(int64(1500))}); err != nil {
		t.Fatal(err)
	}
	if got := menu(t, b.svc, m.ID).Dishes[0].PriceFen; got != 1500 {
		t.Errorf("writer's own cache: price = %d, want 1500", got)
	}
	waitFor(t, "other instance to serve the new price", func() bool {
		return menu(t, other, m.ID).Dishes[0].PriceFen == 1500
	})
}

// Messages published while a subscriber is disconnected are lost, so a
// resubscription flushes the whole cache.
func TestResubscribeFlushesCache(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m, d := createMerchantWithDish(t, b.svc, b.pool, 1000, 5)
	if got := menu(t, b.svc, m.ID).Dishes[0].PriceFen; got != 1000 {
		t.Fatalf("price = %d, want 1000", got)
	}
	// A change that no invalidation announces, as if its message was lost.
	if _, err := b.pool.Exec(ctx, "UPDATE dishes SET price_fen = 1700 WHERE id = $1", id(t, d.ID)); err != nil {
		t.Fatal(err)
	}
	if got := menu(t, b.svc, m.ID).Dishes[0].PriceFen; got != 1000 {
		t.Fatalf("cached price = %d, want the stale 1000 before the reconnect", got)
	}
	rds := b.redis.Conn(t)
	// Cut every pub/sub connection; the subscriber reconnects by itself.
	if err := rds.Client.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "resubscription to flush the cache", func() bool {
		return menu(t, b.svc, m.ID).Dishes[0].PriceFen == 1700
	})
}

// Without Redis the writer's own cache is still invalidated at once.
func TestWithoutRedisLocalInvalidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	rds, err := redisconn.New(redisconn.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(t, pool, rds)
	m, d := createMerchantWithDish(t, svc, pool, 1000, 5)
	_ = menu(t, svc, m.ID)
	if _, err := svc.UpdateDish(ctx, admin, id(t, d.ID), catalog.UpdateDishRequest{Version: ptr(d.Version), OnSale: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	if got := menu(t, svc, m.ID).Dishes[0]; got.OnSale {
		t.Errorf("dish still on sale in the writer's cache: %+v", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
