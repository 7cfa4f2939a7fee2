package main

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// floorFiles are the database floor of an order: the least PostgreSQL
// must do to place an order (place.sql), take a payment callback
// (pay.sql) and sell a hot dish (hot_place.sql), on a schema of their
// own. The bench runs them with pgbench in the same run and at the same
// client counts as takeout's scenarios: the reference its ratios use.
//
//go:embed floor/*.sql
var floorFiles embed.FS

func floorSQL(name string) string {
	b, err := floorFiles.ReadFile("floor/" + name)
	if err != nil {
		panic("bench: embedded floor script " + name + ": " + err.Error()) // the embed directive makes it exist
	}
	return string(b)
}

// setupFloor creates the floor's database with its schema and seed.
func (e *env) setupFloor(ctx context.Context) error {
	var err error
	if e.floorURL, err = freshDatabase(ctx, e.o.adminURL, "takeout_bench_floor"); err != nil {
		return err
	}
	if e.floorDB, err = pgxpool.New(ctx, e.floorURL); err != nil {
		return err
	}
	e.onClose(e.floorDB.Close)
	// One statement at a time: VACUUM cannot run in the implicit
	// transaction of a multi-statement query.
	for _, file := range []string{"schema.sql", "seed.sql"} {
		for _, stmt := range strings.Split(floorSQL(file), ";\n") {
			if strings.TrimSpace(stripComments(stmt)) == "" {
				continue
			}
			if _, err := e.floorDB.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("floor %s: %w", file, err)
			}
		}
	}
	return nil
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// floorSettle starts each floor scenario as settle does takeout's: from a
// vacuumed, checkpointed database; the payments' orders pending again.
func (r *runner) floorSettle(ctx context.Context, pendingAgain bool) func() error {
	return func() error {
		stmts := []string{"VACUUM (ANALYZE)", "CHECKPOINT"}
		if pendingAgain {
			stmts = append([]string{"UPDATE orders SET status = 'PENDING' WHERE status <> 'PENDING'"}, stmts...)
		}
		for _, stmt := range stmts {
			if _, err := r.e.floorDB.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("floor: %s before a scenario: %w", stmt, err)
			}
		}
		return nil
	}
}
