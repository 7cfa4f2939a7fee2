package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/lab"
	"github.com/takeout/takeout/internal/testenv"
)

// floorTestDB is a database of the test's own with the floor's schema and
// seed.
func floorTestDB(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	url := testenv.NewEmptyDatabaseURL(t)
	pool := testenv.Pool(t, url)
	for _, file := range []string{"schema.sql", "seed.sql"} {
		for _, stmt := range strings.Split(floorSQL(file), ";\n") {
			if strings.TrimSpace(stripComments(stmt)) == "" {
				continue
			}
			if _, err := pool.Exec(t.Context(), stmt); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		}
	}
	return url, pool
}

// The floor's scripts run under pgbench and do their work once per
// transaction: an order, its two lines and its event per placement; a
// payment and its event per callback, each order paid at most once.
func TestFloorScriptsDoTheirWork(t *testing.T) {
	t.Parallel()
	url, pool := floorTestDB(t)
	bin, err := lab.PGBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		var n int
		if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	dir := t.TempDir()
	run := func(script string) {
		path := filepath.Join(dir, script)
		if err := os.WriteFile(path, []byte(floorSQL(script)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(bin, "pgbench"), "-n", "-M", "prepared", "-c", "4", "-j", "2", "-t", "25", "-f", path, url).CombinedOutput()
		if err != nil {
			t.Fatalf("pgbench %s: %v\n%s", script, err, out)
		}
	}
	run("place.sql")
	run("hot_place.sql")
	if n := count(`SELECT count(*) FROM orders WHERE id > 1000000`); n != 200 {
		t.Errorf("%d orders placed, want 200", n)
	}
	if n := count(`SELECT count(*) FROM order_items`); n != 400 {
		t.Errorf("%d order lines, want 400", n)
	}
	if n := count(`SELECT 1000000000000 * 1000 - sum(stock) FROM dishes`); n != 600 {
		t.Errorf("%d units taken, want 600", n)
	}
	run("pay.sql")
	if n := count(`SELECT count(*) FROM payments`); n != 100 {
		t.Errorf("%d payments, want 100", n)
	}
	if n := count(`SELECT count(*) FROM orders WHERE status = 'PAID'`); n < 95 || n > 100 {
		t.Errorf("%d orders paid by 100 callbacks on random orders of a million", n)
	}
	if n := count(`SELECT count(*) FROM outbox`); n != 300 {
		t.Errorf("%d events, want 300", n)
	}
}

// The grouped floor commits floorGroup orders (payments) per transaction,
// each the single script's work, and its concurrent transactions never
// deadlock: every one takes its row locks in ascending order.
func TestGroupedFloorDoesEachOrdersWork(t *testing.T) {
	t.Parallel()
	url, pool := floorTestDB(t)
	bin, err := lab.PGBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const clients, each = 8, 20
	run := func(script, spread string) {
		t.Helper()
		text, err := groupedFloor(script, floorGroup, spread)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), script)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(bin, "pgbench"), "-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", "2",
			"-t", strconv.Itoa(each), "-f", path, url).CombinedOutput()
		if err != nil {
			t.Fatalf("pgbench %s grouped: %v\n%s", script, err, out)
		}
		if !strings.Contains(string(out), "number of failed transactions: 0") {
			t.Errorf("pgbench %s grouped: transactions failed:\n%s", script, out)
		}
	}
	run("place.sql", "m")
	orders := clients * each * floorGroup
	if n := count(`SELECT count(*) FROM orders WHERE id > 1000000`); n != orders {
		t.Errorf("%d orders placed, want %d", n, orders)
	}
	if n := count(`SELECT count(*) FROM order_items`); n != 2*orders {
		t.Errorf("%d order lines, want %d", n, 2*orders)
	}
	if n := count(`SELECT 1000000000000 * 1000 - sum(stock) FROM dishes`); n != 3*orders {
		t.Errorf("%d units taken, want %d", n, 3*orders)
	}
	run("pay.sql", "id")
	if n := count(`SELECT count(*) FROM payments`); n != orders {
		t.Errorf("%d payments, want %d", n, orders)
	}
	if n := count(`SELECT count(*) FROM outbox`); n != 2*orders {
		t.Errorf("%d events, want %d", n, 2*orders)
	}
}

// A grouped script gives each order its own variables, drawn from its
// own slice of the spread variable's range.
func TestGroupedFloorScript(t *testing.T) {
	t.Parallel()
	text, err := groupedFloor("place.sql", 5, "m")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`\set m_0 random(0, 9)`, `\set m_4 random(40, 49)`, `\set b_3 random(:a_3 + 1, 20)`,
		"UPDATE dishes SET stock = stock - 1 WHERE id = :m_2 * 20 + :a_2 AND stock >= 1;"} {
		if !strings.Contains(text, want) {
			t.Errorf("grouped place.sql lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "BEGIN;"); n != 1 {
		t.Errorf("%d BEGINs, want one transaction", n)
	}
	if n := strings.Count(text, "INSERT INTO outbox"); n != 5 {
		t.Errorf("%d events, want 5", n)
	}
	if _, err := groupedFloor("place.sql", 100, "m"); err == nil {
		t.Error("100 slices of 50 merchants: no error")
	}
}
