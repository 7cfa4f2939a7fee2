// Package db owns takeout's PostgreSQL access: the connection pool, the
// embedded schema migrations, the start-up check of the constraints that
// guard exactly-once, transactions, and the mapping of driver errors to
// the few cases callers branch on.
package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is what a query that expects one row returns when it finds
// none. It is pgx's own error, so the generated queries need no mapping:
// callers match it with errors.Is, never pgx directly.
var ErrNotFound = pgx.ErrNoRows

// Limits bound what one connection's session may hold: a statement's
// run, a wait for a lock, a transaction left idle. Zero leaves one unset.
type Limits struct {
	Statement, Lock, IdleInTransaction time.Duration
}

// Open connects a pool to url, each connection under limits, and checks
// that the server answers. configure, when given, adjusts the pool's
// configuration last (a tracer, say).
func Open(ctx context.Context, url string, maxConns int32, limits Limits, configure ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	for param, d := range map[string]time.Duration{
		"statement_timeout": limits.Statement, "lock_timeout": limits.Lock,
		"idle_in_transaction_session_timeout": limits.IdleInTransaction,
	} {
		if d > 0 {
			cfg.ConnConfig.RuntimeParams[param] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "takeout"
	// UTC everywhere: timestamps cross the wire as RFC 3339 in UTC.
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	for _, f := range configure {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// Beginner starts transactions; *pgxpool.Pool and pgx.Tx (savepoints) are
// Beginners.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction and commits it when fn returns nil; any
// error or panic rolls it back. This is the one place transactions begin
// and commit: code that must be atomic with its caller takes the pgx.Tx.
func WithTx(ctx context.Context, b Beginner, fn func(tx pgx.Tx) error) error {
	_, err := WithTxV(ctx, b, func(tx pgx.Tx) (struct{}, error) { return struct{}{}, fn(tx) })
	return err
}

// WithTxV is WithTx for a function that returns a value.
func WithTxV[T any](ctx context.Context, b Beginner, fn func(tx pgx.Tx) (T, error)) (T, error) {
	var zero T
	tx, err := b.Begin(ctx)
	if err != nil {
		return zero, fmt.Errorf("begin: %w", err)
	}
	// Rollback after Commit is a no-op; this also covers panics.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	v, err := fn(tx)
	if err != nil {
		return zero, err
	}
	if err := tx.Commit(ctx); err != nil {
		return zero, fmt.Errorf("commit: %w", err)
	}
	return v, nil
}

// Postgres error codes that callers branch on.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeCheckViolation      = "23514"

	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

// CheckViolation reports whether err violates a CHECK constraint, and
// which.
func CheckViolation(err error) (constraint string, ok bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeCheckViolation {
		return pe.ConstraintName, true
	}
	return "", false
}

// Raised reports whether err is an exception that our own SQL raised
// with the SQLSTATE code (a RAISE ... USING ERRCODE in a migration's
// function).
func Raised(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// UniqueViolation reports whether err is a unique violation, and of which
// constraint.
func UniqueViolation(err error) (constraint string, ok bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeUniqueViolation {
		return pe.ConstraintName, true
	}
	return "", false
}

// ForeignKeyViolation reports whether err violates a foreign key, and
// which.
func ForeignKeyViolation(err error) (constraint string, ok bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeForeignKeyViolation {
		return pe.ConstraintName, true
	}
	return "", false
}

// RetryAborted runs a transaction (run, which begins and commits it, as
// WithTxV does) again, up to twice more, while PostgreSQL aborts it to
// break a deadlock or a serialization conflict (Aborted): nothing of it
// was written, and the other transaction has gone on. run must have no
// effect outside its transaction. A third abort is returned, and is
// Unavailable (503): the client retries later.
func RetryAborted[T any](ctx context.Context, run func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := run()
		if attempt == 2 || !Aborted(err) || ctx.Err() != nil {
			return v, err
		}
	}
}

// Aborted reports whether PostgreSQL aborted err's transaction to break
// a deadlock (40P01) or a serialization conflict (40001): nothing of it
// was written, the other transaction went on, and running it again is
// the remedy.
func Aborted(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == codeDeadlockDetected || pe.Code == codeSerializationFailure)
}

// Unavailable reports whether err means PostgreSQL could not be reached,
// the connection broke or timed out, the statement ran out of time
// (statement or lock timeout, the request's deadline), or the
// transaction was aborted (Aborted), rather than being refused: the
// request did not commit and may be retried. Connection failures, broken
// sockets, server shutdown and "cannot connect now" (recovery after a
// crash) all count.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if Aborted(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" ||
			pe.Code == "57014" || pe.Code == "55P03" || pe.Code == "25P03" // query_canceled, lock_not_available, idle_in_transaction_session_timeout
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}

// ServerName asks the server pool writes to for its address and port
// (inet_server_addr, inet_server_port): with a multi-host URL and
// target_session_attrs=read-write, the current primary. A server reached
// over a Unix socket names itself "local:port".
func ServerName(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var addr *string
	var port *int32
	if err := pool.QueryRow(ctx, "SELECT host(inet_server_addr()), inet_server_port()").Scan(&addr, &port); err != nil {
		return "", fmt.Errorf("ask the server its name: %w", err)
	}
	if addr == nil {
		local := "local"
		addr = &local
	}
	p := int32(0)
	if port != nil {
		p = *port
	}
	return net.JoinHostPort(*addr, strconv.Itoa(int(p))), nil
}
