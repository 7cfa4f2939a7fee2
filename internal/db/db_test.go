package db_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/testenv"
)

// Migrations apply to an empty database, roll back completely, and apply
// again: the down migrations are real.
func TestMigrationsFromEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Open(ctx, testenv.NewEmptyDatabaseURL(t), 4, db.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := db.NewMigrator(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	applied, err := m.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur, target, err := m.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || cur != target || cur != applied[len(applied)-1] {
		t.Fatalf("after up: applied %v, version %d, target %d", applied, cur, target)
	}
	if err := db.CheckConstraints(ctx, pool); err != nil {
		t.Fatalf("constraints after up: %v", err)
	}

	if err := m.DownAll(ctx); err != nil {
		t.Fatal(err)
	}
	if cur, _, _ := m.Versions(ctx); cur != 0 {
		t.Fatalf("after down: version %d, want 0", cur)
	}
	problems, err := db.ConstraintProblems(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != len(db.RequiredUniqueIndexes()) {
		t.Fatalf("after down: problems %v, want every index missing", problems)
	}

	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if err := db.CheckConstraints(ctx, pool); err != nil {
		t.Fatalf("constraints after second up: %v", err)
	}
}

// An invalid unique index (as an interrupted CREATE INDEX CONCURRENTLY
// leaves) enforces nothing; the start-up check must catch it, as it must
// catch a dropped one.
func TestConstraintProblems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)

	if err := db.CheckConstraints(ctx, pool); err != nil {
		t.Fatalf("fresh schema: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE pg_index SET indisvalid = false
		WHERE indexrelid = 'users_openid_key'::regclass`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE dishes DROP CONSTRAINT dishes_merchant_name_key`); err != nil {
		t.Fatal(err)
	}
	problems, err := db.ConstraintProblems(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"users_openid_key: invalid (rebuild it)", "dishes_merchant_name_key: missing"}
	if !slices.Equal(problems, want) {
		t.Fatalf("problems = %q, want %q", problems, want)
	}
	if err := db.CheckConstraints(ctx, pool); err == nil {
		t.Fatal("CheckConstraints passed with broken constraints")
	}
}

func TestWithTxRollsBackOnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	q := dbsqlc.New()
	boom := errors.New("boom")

	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := q.UserUpsertByOpenID(ctx, tx, "rolled-back"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic was swallowed")
			}
		}()
		_ = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			if _, err := q.UserUpsertByOpenID(ctx, tx, "panicked"); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM users").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d users committed, want 0", n)
	}

	u, err := db.WithTxV(ctx, pool, func(tx pgx.Tx) (dbsqlc.User, error) {
		return q.UserUpsertByOpenID(ctx, tx, "committed")
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.UserGetByID(ctx, pool, u.ID); err != nil {
		t.Fatalf("committed user not found: %v", err)
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	q := dbsqlc.New()

	_, err := q.UserGetByID(ctx, pool, 424242)
	if !errors.Is(err, db.ErrNotFound) {
		t.Errorf("missing row: %v, want ErrNotFound", err)
	}
	m, err := q.MerchantInsert(ctx, pool, dbsqlc.MerchantInsertParams{Name: "m", Status: "open"})
	if err != nil {
		t.Fatal(err)
	}
	d := dbsqlc.DishInsertParams{MerchantID: m.ID, Name: "rice", PriceFen: 100, OnSale: true}
	rice, err := q.DishInsert(ctx, pool, d)
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.DishInsert(ctx, pool, d)
	if c, ok := db.UniqueViolation(err); !ok || c != "dishes_merchant_name_key" {
		t.Errorf("duplicate dish: %v (constraint %q), want unique violation", err, c)
	}
	d.Name, d.MerchantID = "soup", 999999
	if _, err = q.DishInsert(ctx, pool, d); !isFK(err) {
		t.Errorf("unknown merchant: %v, want foreign key violation", err)
	}
	err = q.StockSpread(ctx, pool, dbsqlc.StockSpreadParams{DishID: rice, Units: -1, Shards: 1})
	if err == nil {
		t.Error("negative stock accepted")
	} else if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "23514" { // check_violation
		t.Errorf("negative stock: %v, want check violation", err)
	}
}

// Unavailable tells a database that is unreachable or went away from a
// statement that was refused, with errors produced for real.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)

	_, refused := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")

	victim, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Release()
	var pid int
	if err := victim.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	_, terminated := victim.Exec(ctx, "SELECT 1")

	_, syntax := pool.Exec(ctx, "SELEC 1")
	_, unique := pool.Exec(ctx, "INSERT INTO users (openid) VALUES ('u'), ('u')")
	noRows := pool.QueryRow(ctx, "SELECT 1 WHERE false").Scan(new(int))
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, deadline := pool.Exec(tctx, "SELECT pg_sleep(5)")
	deadlock := deadlockVictim(t, pool)

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"backend terminated", terminated, true},
		{"statement timed out by the caller", deadline, true},
		{"wrapped", fmt.Errorf("begin: %w", refused), true},
		{"deadlock victim", deadlock, true},
		{"syntax error", syntax, false},
		{"unique violation", unique, false},
		{"no rows", noRows, false},
		{"nil", nil, false},
		{"plain", errors.New("boom"), false},
	} {
		if tc.want && tc.err == nil {
			t.Fatalf("%s: no error produced", tc.name)
		}
		if got := db.Unavailable(tc.err); got != tc.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// deadlockVictim makes two transactions lock two rows in opposite orders
// and returns the error of the one PostgreSQL aborts.
func deadlockVictim(t *testing.T, pool *pgxpool.Pool) error {
	t.Helper()
	ctx := context.Background()
	var a, b int64
	if err := pool.QueryRow(ctx, "INSERT INTO users (openid) VALUES ('dl-a') RETURNING id").Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "INSERT INTO users (openid) VALUES ('dl-b') RETURNING id").Scan(&b); err != nil {
		t.Fatal(err)
	}
	lockBoth := func(first, second int64, locked *sync.WaitGroup) error {
		return db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "UPDATE users SET openid = openid WHERE id = $1", first); err != nil {
				return err
			}
			locked.Done()
			locked.Wait()
			_, err := tx.Exec(ctx, "UPDATE users SET openid = openid WHERE id = $1", second)
			return err
		})
	}
	var locked sync.WaitGroup
	locked.Add(2)
	errs := make(chan error, 2)
	go func() { errs <- lockBoth(a, b, &locked) }()
	go func() { errs <- lockBoth(b, a, &locked) }()
	var victim error
	for range 2 {
		if err := <-errs; err != nil {
			victim = err
		}
	}
	if !db.Aborted(victim) {
		t.Fatalf("the deadlock's victim failed with %v, want 40P01", victim)
	}
	return victim
}

func isFK(err error) bool {
	_, ok := db.ForeignKeyViolation(err)
	return ok
}
