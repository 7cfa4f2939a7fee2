package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pipeline queues statements for a transaction and sends them in one
// round trip. Given to sqlc-generated queries as their DBTX, it queues
// :exec statements (Exec), and a :one or :many query (QueryRow, Query)
// goes last: reading its result sends everything queued before it. A transaction's
// inserts that depend on nothing but their arguments, and the read that
// follows them, then cost one round trip instead of one each.
type Pipeline struct {
	tx    pgx.Tx
	batch pgx.Batch
}

// NewPipeline returns an empty pipeline for tx.
func NewPipeline(tx pgx.Tx) *Pipeline {
	return &Pipeline{tx: tx}
}

// Exec queues sql; its error, if any, comes from Send or from the row of
// a later QueryRow.
func (p *Pipeline) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// Query returns the rows of sql run after everything queued, sending the
// pipeline with sql last. It fails with the first queued statement's
// error, if any.
func (p *Pipeline) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	p.batch.Queue(sql, args...)
	results, err := p.flush(ctx, 1)
	if err != nil {
		return nil, err
	}
	rows, err := results.Query()
	if err != nil {
		_ = results.Close()
		return nil, err
	}
	return &pipelinedRows{Rows: rows, results: results}, nil
}

// pipelinedRows closes the batch once its rows are read.
type pipelinedRows struct {
	pgx.Rows
	results pgx.BatchResults
	err     error
}

func (r *pipelinedRows) Close() {
	r.Rows.Close()
	if r.results != nil {
		if err := r.results.Close(); err != nil && r.Rows.Err() == nil {
			r.err = err
		}
		r.results = nil
	}
}

func (r *pipelinedRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// QueryRow returns the row of sql run after everything queued: scanning
// it sends the pipeline with sql last. The scan reports the first queued
// statement's error, if any, or the row's (pgx.ErrNoRows when none).
func (p *Pipeline) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return pipelinedRow{p: p, ctx: ctx, sql: sql, args: args}
}

// SendBatch sends b's statements after everything queued, in one round
// trip, and returns the results of b's statements. After a queued
// statement's error PostgreSQL runs none of b's, and reading their results
// reports that error.
func (p *Pipeline) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	pending := p.batch.Len()
	for _, q := range b.QueuedQueries {
		p.batch.Queue(q.SQL, q.Arguments...)
	}
	batch := p.batch
	p.batch = pgx.Batch{}
	results := p.tx.SendBatch(ctx, &batch)
	for range pending {
		if _, err := results.Exec(); err != nil {
			break
		}
	}
	return results
}

// Send runs the queued statements in order, in one round trip, and
// returns the first error (PostgreSQL skips the rest after it, and the
// transaction is then aborted). The pipeline is empty afterwards.
func (p *Pipeline) Send(ctx context.Context) error {
	if p.batch.Len() == 0 {
		return nil
	}
	results, err := p.flush(ctx, 0)
	if err != nil {
		return err
	}
	return results.Close()
}

// flush sends the queued statements and reads the results of all but the
// last keep of them, leaving those to the caller, who closes the results.
// On an error the results are closed already. The pipeline is empty
// afterwards.
func (p *Pipeline) flush(ctx context.Context, keep int) (pgx.BatchResults, error) {
	n := p.batch.Len()
	batch := p.batch
	p.batch = pgx.Batch{}
	results := p.tx.SendBatch(ctx, &batch)
	for i := range n - keep {
		if _, err := results.Exec(); err != nil {
			_ = results.Close()
			return nil, fmt.Errorf("pipelined statement %d of %d: %w", i+1, n, err)
		}
	}
	return results, nil
}

type pipelinedRow struct {
	p    *Pipeline
	ctx  context.Context //nolint:containedctx // the context of the QueryRow call, used when the row is scanned
	sql  string
	args []any
}

func (r pipelinedRow) Scan(dest ...any) error {
	r.p.batch.Queue(r.sql, r.args...)
	results, err := r.p.flush(r.ctx, 1)
	if err != nil {
		return err
	}
	err = results.QueryRow().Scan(dest...)
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	return err
}
