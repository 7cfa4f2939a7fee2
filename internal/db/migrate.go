package db

import (
	"bytes"
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

	"github.com/takeout/takeout/db/functions"
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
// once (goose's own lock covers ours); liveCodeLock does the same for the
// files of db/functions.
const (
	riverLock    = 7461003
	liveCodeLock = 7461004
)

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

// liveCodeFile is one file of db/functions and the hash of its text.
type liveCodeFile struct {
	name string
	sql  string
	sum  []byte
}

// liveCode reads the files of db/functions, in name order.
func liveCode() ([]liveCodeFile, error) {
	entries, err := fs.ReadDir(functions.FS, ".")
	if err != nil {
		return nil, err
	}
	var files []liveCodeFile
	for _, e := range entries {
		b, err := fs.ReadFile(functions.FS, e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		files = append(files, liveCodeFile{name: e.Name(), sql: string(b), sum: sum[:]})
	}
	return files, nil
}

// applyLiveCode installs each file of db/functions whose text differs
// from the version recorded in live_code, in one transaction: a start
// that changes nothing takes no lock but the advisory one.
func (m *Migrator) applyLiveCode(ctx context.Context) error {
	files, err := liveCode()
	if err != nil {
		return fmt.Errorf("read db/functions: %w", err)
	}
	return WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", liveCodeLock); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT file, sha256 FROM live_code")
		if err != nil {
			return err
		}
		installed := map[string][]byte{}
		for rows.Next() {
			var name string
			var sum []byte
			if err := rows.Scan(&name, &sum); err != nil {
				return err
			}
			installed[name] = sum
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, f := range files {
			if bytes.Equal(installed[f.name], f.sum) {
				continue
			}
			if _, err := tx.Exec(ctx, f.sql); err != nil {
				return fmt.Errorf("db/functions/%s: %w", f.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO live_code (file, sha256) VALUES ($1, $2)
				ON CONFLICT (file) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()`, f.name, f.sum); err != nil {
				return err
			}
		}
		return nil
	})
}

// dropLiveCode removes every function, trigger and view of ours (those
// of db/functions and any left by an earlier release), before the
// migrations are rolled back.
func (m *Migrator) dropLiveCode(ctx context.Context) error {
	return WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT format('DROP VIEW IF EXISTS %I.%I CASCADE', schemaname, viewname)
			FROM pg_views WHERE schemaname = current_schema()
			UNION ALL
			SELECT format('DROP FUNCTION IF EXISTS %s CASCADE', p.oid::regprocedure)
			FROM pg_proc p
			WHERE p.pronamespace = current_schema()::regnamespace AND p.prokind = 'f'
			  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')`)
		if err != nil {
			return err
		}
		stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, "DELETE FROM live_code")
		return err
	})
}

// Up applies every pending migration (ours, then River's job tables),
// then the live code of db/functions, and returns the versions of our
// migrations applied.
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
	if err := m.applyLiveCode(ctx); err != nil {
		return nil, fmt.Errorf("install db/functions: %w", err)
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
	if err := m.dropLiveCode(ctx); err != nil {
		return fmt.Errorf("drop db/functions: %w", err)
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
// migration files, our live code and River's migrations. Test templates are named by it, so a
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
	files, err := liveCode()
	if err != nil {
		return "", fmt.Errorf("hash db/functions: %w", err)
	}
	for _, f := range files {
		fmt.Fprintf(h, "functions/%s\x00%x\x00", f.name, f.sum)
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
