package db_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/db/functions"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/lab"
	"github.com/takeout/takeout/internal/testenv"
)

var update = flag.Bool("update", false, "write db/schema.sql from a freshly migrated database (make schema)")

// definedIn lists the functions and views the files of db/functions
// create, by name.
func definedIn(t *testing.T) (funcs, views []string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^CREATE OR REPLACE (FUNCTION|VIEW) (\w+)`)
	err := fs.WalkDir(functions.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(functions.FS, path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if m[1] == "FUNCTION" {
				funcs = append(funcs, m[2])
			} else {
				views = append(views, m[2])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(funcs)
	slices.Sort(views)
	return funcs, views
}

// What is installed is what db/functions holds: every function and view
// of ours is defined there, once (no overload left behind by an earlier
// release), and nothing else is.
func TestLiveCodeIsDbFunctions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	wantFuncs, wantViews := definedIn(t)
	if len(wantFuncs) == 0 {
		t.Fatal("db/functions defines no function")
	}
	rows, err := pool.Query(ctx, `
		SELECT p.proname FROM pg_proc p
		WHERE p.pronamespace = current_schema()::regnamespace AND p.proname NOT LIKE 'river%'
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	gotFuncs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantFuncs, gotFuncs); diff != "" {
		t.Errorf("installed functions (-db/functions +installed):\n%s", diff)
	}
	rows, err = pool.Query(ctx, `SELECT viewname::text FROM pg_views WHERE schemaname = current_schema() ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	gotViews, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantViews, gotViews); diff != "" {
		t.Errorf("installed views (-db/functions +installed):\n%s", diff)
	}
}

// A start applies only the files that changed since the last: the
// unchanged ones are not run again (no lock taken on their tables); a
// file whose recorded version differs is installed anew.
func TestLiveCodeAppliesWhatChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	applied := func() map[string]string {
		rows, err := pool.Query(ctx, `SELECT file, applied_at::text FROM live_code`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for rows.Next() {
			var f, at string
			if err := rows.Scan(&f, &at); err != nil {
				t.Fatal(err)
			}
			out[f] = at
		}
		return out
	}
	before := applied()
	if _, err := pool.Exec(ctx, `UPDATE live_code SET sha256 = '\x00' WHERE file = 'quote_holds.sql'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DROP FUNCTION quote_holds CASCADE`); err != nil {
		t.Fatal(err)
	}
	m, err := db.NewMigrator(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	after := applied()
	for f, at := range before {
		changed := after[f] != at
		if changed != (f == "quote_holds.sql") {
			t.Errorf("%s: applied again %v, want %v", f, changed, f == "quote_holds.sql")
		}
	}
	if err := pool.QueryRow(ctx, `SELECT quote_holds(x.d, x.m, 1, 1, 1, 1, 1)
		FROM (SELECT NULL::dishes AS d, NULL::merchants AS m) x`).Scan(new(*bool)); err != nil {
		t.Fatalf("quote_holds was not installed again: %v", err)
	}
}

// Every PL/pgSQL function of db/functions passes plpgsql_check: no error,
// no warning (a trigger function is checked against each table it
// fires on).
func TestLiveCodeLints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS plpgsql_check"); err != nil {
		t.Fatalf("plpgsql_check is not installed for this PostgreSQL: run `scripts/dev/services.sh db-lint-packages` (make test does): %v", err)
	}
	rows, err := pool.Query(ctx, `
		SELECT p.oid::regprocedure::text, coalesce(t.tgrelid, 0)::int8
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang AND l.lanname = 'plpgsql'
		LEFT JOIN pg_trigger t ON t.tgfoid = p.oid AND NOT t.tgisinternal
		WHERE p.pronamespace = current_schema()::regnamespace AND p.proname NOT LIKE 'river%'
		  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
		ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Fn    string
		Relid int64
	}
	targets, err := pgx.CollectRows(rows, pgx.RowToStructByPos[target])
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) == 0 {
		t.Fatal("no PL/pgSQL function to check")
	}
	for _, tg := range targets {
		rows, err := pool.Query(ctx, `
			SELECT level, coalesce(lineno, 0), message, coalesce(detail, ''), coalesce(hint, '')
			FROM plpgsql_check_function_tb($1::regprocedure, $2::oid::regclass,
				fatal_errors => false, other_warnings => true, extra_warnings => true, performance_warnings => true)`,
			tg.Fn, tg.Relid)
		if err != nil {
			t.Fatalf("%s: %v", tg.Fn, err)
		}
		for rows.Next() {
			var level, message, detail, hint string
			var line int
			if err := rows.Scan(&level, &line, &message, &detail, &hint); err != nil {
				t.Fatal(err)
			}
			t.Errorf("%s (table %d) line %d: %s: %s %s %s", tg.Fn, tg.Relid, line, level, message, detail, hint)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// db/schema.sql is the live schema: what pg_dump shows of a database the
// migrations and db/functions just built. A change to either must come
// with the file regenerated (make schema), so a reader sees what is
// installed.
func TestSchemaFileIsTheLiveSchema(t *testing.T) {
	t.Parallel()
	url := testenv.NewDatabaseURL(t)
	bin, err := lab.PGBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(context.Background(), filepath.Join(bin, "pg_dump"), //nolint:gosec // G204: PostgreSQL's own program
		"--schema-only", "--no-owner", "--no-privileges", "--dbname", url).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok { //nolint:errorlint // exec's own type
			stderr = ee.Stderr
		}
		t.Fatalf("pg_dump: %v: %s", err, stderr)
	}
	got := normalizeDump(out)
	path := filepath.Join("..", "..", "db", "schema.sql")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil { //nolint:gosec // G306: a source file
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path) //nolint:gosec // G304: our own file
	if err != nil {
		t.Fatalf("%v: generate it with `make schema`", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("db/schema.sql is not the live schema: run `make schema` and commit it; the difference (-file +live):\n%s",
			cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")))
	}
}

// normalizeDump drops what differs between two dumps of one schema: the
// versions of the server and of pg_dump, and the random key of the
// \restrict guard newer pg_dump releases write.
func normalizeDump(b []byte) []byte {
	var out bytes.Buffer
	out.WriteString("-- The live schema: pg_dump --schema-only of a database that the\n" +
		"-- migrations (db/migrations) and the live code (db/functions) just built.\n" +
		"-- Generated by `make schema`; make test fails when it is out of date.\n")
	blank := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "-- Dumped from database version"),
			strings.HasPrefix(line, "-- Dumped by pg_dump version"),
			strings.HasPrefix(line, `\restrict`), strings.HasPrefix(line, `\unrestrict`):
			continue
		}
		if line == "" {
			if blank {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		fmt.Fprintln(&out, line)
	}
	return bytes.TrimRight(out.Bytes(), "\n")
}

// Instances starting at once all start: the files of db/functions are
// made stale, then four migrators, each on its own pool, install them
// while their transactions overlap (held on live_code until all four
// wait). Every one succeeds, whichever order PostgreSQL grants them, and
// every file ends recorded at its current version. (The advisory lock
// makes the later ones find nothing left to do; PostgreSQL also queues
// the CREATE OR REPLACEs themselves, so this test holds the outcome.)
func TestInstancesStartingAtOnceInstallLiveCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabaseURL(t)
	check := testenv.Pool(t, url)
	const instances = 4
	migrators := make([]*db.Migrator, instances)
	for i := range migrators {
		pool, err := db.Open(ctx, url, 4, db.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if migrators[i], err = db.NewMigrator(pool); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = migrators[i].Close() })
	}
	var files int
	if err := check.QueryRow(ctx, `SELECT count(*) FROM live_code`).Scan(&files); err != nil || files == 0 {
		t.Fatalf("live_code holds %d files (%v)", files, err)
	}
	for round := range 3 {
		if _, err := check.Exec(ctx, `UPDATE live_code SET sha256 = '\x00'`); err != nil {
			t.Fatal(err)
		}
		// Hold live_code until all four are waiting on a lock, so that
		// their transactions overlap.
		hold, err := check.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hold.Exec(ctx, `LOCK TABLE live_code IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, instances)
		for _, m := range migrators {
			go func() { errs <- m.ApplyLiveCode(ctx) }()
		}
		for waiting := 0; waiting < instances; {
			if err := check.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := hold.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		for range instances {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: an instance failed to install the live code: %v", round, err)
			}
		}
		var rows int
		if err := check.QueryRow(ctx, `SELECT count(*) FROM live_code WHERE sha256 <> '\x00'`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != files {
			t.Fatalf("round %d: %d of %d files recorded at their version", round, rows, files)
		}
	}
}
