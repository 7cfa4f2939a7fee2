package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/takeout/takeout/db/migrations"
)

// Migrator applies the embedded migrations. Several instances starting at
// once are serialised by a PostgreSQL advisory lock.
type Migrator struct {
	sqlDB    *sql.DB
	provider *goose.Provider
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
	return &Migrator{sqlDB: sqlDB, provider: p}, nil
}

// Close releases the migrator's connection handle (not the pool).
func (m *Migrator) Close() error { return m.sqlDB.Close() }

// Up applies every pending migration and returns the versions applied.
func (m *Migrator) Up(ctx context.Context) ([]int64, error) {
	res, err := m.provider.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate up: %w", err)
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
