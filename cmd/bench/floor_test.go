package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/takeout/takeout/internal/lab"
	"github.com/takeout/takeout/internal/testenv"
)

// The floor's scripts run under pgbench and do their work once per
// transaction: an order, its two lines and its event per placement; a
// payment and its event per callback, each order paid at most once.
func TestFloorScriptsDoTheirWork(t *testing.T) {
	t.Parallel()
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
