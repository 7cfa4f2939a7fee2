package db

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/takeout/takeout/db/migrations"
)

// Migrator applies the embedded migrations. Several instances starting at
// once are serialised by a PostgreSQL advisory lock.
type Migrator struct {
	pool     *pgxpool.Pool
	sqlDB    *sql.DB
	provider *goose.Provider
	river    *rivermigrate.Migrator[pgx.Tx]
}

// NewMigrator prepares the embedded migrations for pool's database.
func NewMigrator(pool *pgxpool.Pool) (*Migrator, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	rm, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	return &Migrator{pool: pool, sqlDB: sqlDB, provider: p, river: rm}, nil
}

// Close releases the migrator's connection handle (not the pool).
func (m *Migrator) Close() error { return m.sqlDB.Close() }

// riverLock serialises River's migrations between instances starting at
// once (goose's own lock covers ours).
const riverLock = 7461003

// withRiverLock runs fn holding riverLock on a dedicated connection.
func (m *Migrator) withRiverLock(ctx context.Context, fn func() error) error {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", riverLock); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", riverLock) //nolint:errcheck
	return fn()
}

// Up applies every pending migration (ours, then River's job tables) and
// returns the versions of ours applied.
func (m *Migrator) Up(ctx context.Context) ([]int64, error) {
	res, err := m.provider.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate up: %w", err)
	}
	err = m.withRiverLock(ctx, func() error {
		_, err := m.river.Migrate(ctx, rivermigrate.DirectionUp, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("migrate river up: %w", err)
	}
	versions := make([]int64, 0, len(res))
	for _, r := range res {
		versions = append(versions, r.Source.Version)
	}
	return versions, nil
}

// DownAll rolls every migration back; tests use it to prove the down
// migrations work.
func (m *Migrator) DownAll(ctx context.Context) error {
	err := m.withRiverLock(ctx, func() error {
		_, err := m.river.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1})
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate river down: %w", err)
	}
	if _, err := m.provider.DownTo(ctx, 0); err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// Versions returns the database's schema version and the newest version
// this binary embeds.
func (m *Migrator) Versions(ctx context.Context) (current, target int64, err error) {
	current, target, err = m.provider.GetVersions(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migration versions: %w", err)
	}
	return current, target, nil
}

// SchemaHash identifies the full schema this binary migrates to: our
// migration files and River's. Test templates are named by it, so a
// changed migration (ours or a River upgrade) builds a new one.
func SchemaHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	rm, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return "", fmt.Errorf("river migrations: %w", err)
	}
	for _, m := range rm.AllVersions() {
		fmt.Fprintf(h, "river/%d\x00%s\x00", m.Version, m.SQLUp)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
