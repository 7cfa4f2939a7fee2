package db_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/testenv"
)

// TestSchemaReadyForDistribution holds the schema to docs/scaling.md: on
// every table marked distributed there, every unique constraint or index
// includes the distribution column, or is one of the doc's listed gaps;
// and every listed gap still exists (a fixed gap is struck from the doc).
func TestSchemaReadyForDistribution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "scaling.md"))
	if err != nil {
		t.Fatal(err)
	}
	marked := distributionTable(t, string(doc))
	gaps := gapList(t, string(doc))
	pool, err := pgxpool.New(ctx, testenv.NewDatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT c.relname, i.relname, array_agg(a.attname::text)
	    FROM pg_index x
	    JOIN pg_class c ON c.oid = x.indrelid
	    JOIN pg_class i ON i.oid = x.indexrelid
	    JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
	    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY (x.indkey)
	    WHERE x.indisunique
	    GROUP BY c.relname, i.relname`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	found := map[string]bool{}
	for rows.Next() {
		var table, index string
		var cols []string
		if err := rows.Scan(&table, &index, &cols); err != nil {
			t.Fatal(err)
		}
		col, ok := marked[table]
		if !ok || slices.Contains(cols, col) {
			continue
		}
		found[index] = true
		if !gaps[index] {
			t.Errorf("%s: unique %s on %v lacks the distribution column %s (docs/scaling.md): include it, or list the gap and how it closes", table, index, cols, col)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for g := range gaps {
		if !found[g] {
			t.Errorf("docs/scaling.md lists the gap %s, which the schema no longer has: strike it", g)
		}
	}
	var missing []string
	for table, col := range marked {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		    WHERE table_schema = 'public' AND table_name = $1 AND column_name = $2`, table, col).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			missing = append(missing, table+"."+col)
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/scaling.md distributes by columns the schema lacks: %v", missing)
	}
}

// section is the text between <!-- name: ... --> and <!-- end name -->.
func section(t *testing.T, doc, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- "+name+":")
	if !ok {
		t.Fatalf("docs/scaling.md has no %q section", name)
	}
	body, _, ok := strings.Cut(rest, "<!-- end "+name+" -->")
	if !ok {
		t.Fatalf("docs/scaling.md: %q section is not closed", name)
	}
	return body
}

// distributionTable reads the distributed tables and their columns.
func distributionTable(t *testing.T, doc string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(section(t, doc, "distribution"), "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 3 {
			continue
		}
		table, placement, col := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if placement == "distributed" {
			out[table] = col
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/scaling.md marks no table distributed")
	}
	return out
}

var gapName = regexp.MustCompile("^- `([a-z0-9_]+)`:")

// gapList reads the names of the listed gaps.
func gapList(t *testing.T, doc string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range strings.Split(section(t, doc, "gaps"), "\n") {
		if m := gapName.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			out[m[1]] = true
		}
	}
	return out
}
