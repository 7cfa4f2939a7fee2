package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/db"
)

// template is the migrated template database of this binary's migrations.
var template = sync.OnceValues(func() (string, error) {
	admin, err := postgresURL()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return ensureTemplate(ctx, admin)
})

// ensureTemplate builds the template database once across all test
// binaries running at the same time: under an advisory lock, migrate a
// scratch database and rename it, so a half-built template never exists
// under the real name.
func ensureTemplate(ctx context.Context, adminURL string) (string, error) {
	hash, err := db.SchemaHash()
	if err != nil {
		return "", err
	}
	name := "takeout_tpl_" + hash
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to test PostgreSQL (%s): %w", howToRun, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7461001)"); err != nil {
		return "", err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7461001)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	scratch := name + "_build"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+scratch+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+scratch); err != nil {
		return "", err
	}
	if err := migrateURL(ctx, withDatabase(adminURL, scratch)); err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+scratch+" RENAME TO "+name); err != nil {
		return "", err
	}
	return name, nil
}

func migrateURL(ctx context.Context, u string) error {
	pool, err := db.Open(ctx, u, 2, db.Limits{})
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := db.NewMigrator(pool)
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.Up(ctx)
	return err
}

func withDatabase(adminURL, name string) string {
	u, err := url.Parse(adminURL)
	if err != nil {
		panic(fmt.Sprintf("test database url: %v", err))
	}
	u.Path = "/" + name
	return u.String()
}

// NewDatabaseURL returns the URL of a fresh database for this test, with
// the schema migrated, dropped when the test ends.
func NewDatabaseURL(t testing.TB) string {
	t.Helper()
	tpl, err := template()
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	admin, _ := postgresURL()
	return cloneDatabase(t, admin, tpl)
}

// NewEmptyDatabaseURL returns the URL of a fresh database with no schema.
func NewEmptyDatabaseURL(t testing.TB) string {
	t.Helper()
	admin, err := postgresURL()
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	return cloneDatabase(t, admin, "template0")
}

func cloneDatabase(t testing.TB, adminURL, tpl string) string {
	t.Helper()
	ctx := context.Background()
	name := "takeout_test_" + randomHex(8)
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("connect to test PostgreSQL (%s): %v", howToRun, err)
	}
	defer conn.Close(ctx)
	// Concurrent clones of one template can collide briefly; retry.
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+tpl)
		if err == nil || attempt == 20 || !strings.Contains(err.Error(), "is being accessed by other users") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), adminURL)
		if err != nil {
			t.Errorf("drop test database: %v", err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	return withDatabase(adminURL, name)
}

// NewDB returns a pool on a fresh, migrated database for this test.
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := db.Open(context.Background(), NewDatabaseURL(t), 10, db.Limits{})
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Pool opens a pool on url for this test.
func Pool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := db.Open(context.Background(), url, 4, db.Limits{})
	if err != nil {
		t.Fatalf("open database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
