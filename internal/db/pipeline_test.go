package db_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/testenv"
)

// Queued statements run in order in one round trip, with a last row-
// returning query when there is one; the first failure is reported and
// nothing after it runs.
func TestPipeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE piped (n int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM piped").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		p := db.NewPipeline(tx)
		for _, n := range []int{1, 2, 3} {
			if _, err := p.Exec(ctx, "INSERT INTO piped (n) VALUES ($1)", n); err != nil {
				return err
			}
		}
		if count() != 0 {
			t.Error("a queued statement ran before Send")
		}
		return p.Send(ctx)
	})
	if err != nil || count() != 3 {
		t.Fatalf("send: %v, %d rows; want 3", err, count())
	}

	// A row-returning query last: its row sees the queued inserts.
	var total int
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		p := db.NewPipeline(tx)
		_, _ = p.Exec(ctx, "INSERT INTO piped (n) VALUES ($1)", 10)
		return p.QueryRow(ctx, "SELECT sum(n) FROM piped WHERE n > $1", 0).Scan(&total)
	})
	if err != nil || total != 16 || count() != 4 {
		t.Fatalf("query last: %v, sum %d; want 16", err, total)
	}
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		p := db.NewPipeline(tx)
		_, _ = p.Exec(ctx, "INSERT INTO piped (n) VALUES ($1)", 11)
		return p.QueryRow(ctx, "SELECT n FROM piped WHERE n < 0").Scan(&total)
	})
	if !errors.Is(err, pgx.ErrNoRows) || count() != 4 {
		t.Fatalf("no row last: %v, want pgx.ErrNoRows and the transaction rolled back", err)
	}

	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		p := db.NewPipeline(tx)
		_, _ = p.Exec(ctx, "INSERT INTO piped (n) VALUES ($1)", 4)
		_, _ = p.Exec(ctx, "INSERT INTO piped (n) VALUES ($1)", 1) // duplicate
		_, _ = p.Exec(ctx, "INSERT INTO piped (n) VALUES ($1)", 5)
		return p.QueryRow(ctx, "SELECT count(*) FROM piped").Scan(&total)
	})
	if c, ok := db.UniqueViolation(err); !ok || c != "piped_pkey" {
		t.Fatalf("duplicate in a pipeline: %v, want a unique violation of piped_pkey", err)
	}
	if count() != 4 {
		t.Errorf("%d rows after a failed pipeline, want 4 (rolled back)", count())
	}

	// A multi-row query last.
	var got []int
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		p := db.NewPipeline(tx)
		_, _ = p.Exec(ctx, "INSERT INTO piped (n) VALUES ($1)", 20)
		rows, err := p.Query(ctx, "SELECT n FROM piped WHERE n >= $1 ORDER BY n", 3)
		if err != nil {
			return err
		}
		got, err = pgx.CollectRows(rows, pgx.RowTo[int])
		return err
	})
	if err != nil || fmt.Sprint(got) != "[3 10 20]" {
		t.Fatalf("rows last: %v %v, want [3 10 20]", got, err)
	}
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		p := db.NewPipeline(tx)
		_, _ = p.Exec(ctx, "INSERT INTO piped (n) VALUES ($1)", 20) // duplicate
		rows, err := p.Query(ctx, "SELECT n FROM piped")
		if err == nil {
			rows.Close()
		}
		return err
	})
	if _, ok := db.UniqueViolation(err); !ok {
		t.Fatalf("duplicate before rows: %v, want a unique violation", err)
	}
}
