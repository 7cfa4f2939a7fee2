package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// insertTx stores a user's record in the transaction of the change it
// answers. When a request with the same key committed first, the insert
// fails and recorded reports it: the transaction rolls back and that
// request's answer is replayed.
func (s *Store) insertTx(ctx context.Context, tx dbsqlc.DBTX, c *claim, rec Record) error {
	row, err := s.recordRow(c, rec.Response)
	if err != nil {
		return err
	}
	var orderID *int64
	if rec.OrderID != 0 {
		orderID = &rec.OrderID
	}
	err = s.q.IdempotencyRecordInsert(ctx, tx, dbsqlc.IdempotencyRecordInsertParams{
		UserID: row.UserID, Key: row.Key, Fingerprint: row.Fingerprint, DigestAlg: row.DigestAlg, OrderID: orderID,
		StatusCode: row.StatusCode, Headers: row.Headers, Body: row.Body, ExpiresAt: row.ExpiresAt,
	})
	if err != nil {
		return fmt.Errorf("insert idempotency record: %w", err)
	}
	return nil
}

// recordRow is the row that records resp as the answer to c's request.
func (s *Store) recordRow(c *claim, resp Response) (RecordRow, error) {
	headers, err := json.Marshal(resp.headerMap())
	if err != nil {
		return RecordRow{}, fmt.Errorf("encode headers: %w", err)
	}
	return RecordRow{
		UserID: c.scope.userID, Key: c.key, Fingerprint: c.fp, DigestAlg: DigestAlg,
		StatusCode: int32(resp.Status), Headers: headers, Body: resp.Body, //nolint:gosec // G115: an HTTP status fits
		ExpiresAt: s.opts.Now().Add(s.opts.Retention),
	}, nil
}

// recorded reports whether err is insertTx's conflict with a record of
// the same key, committed by a concurrent request.
func (s *Store) recorded(ctx context.Context, err error) bool {
	if c, ok := db.UniqueViolation(err); ok && c == recordKeyConstraint {
		s.count(ctx, "postgres", "backstop")
		return true
	}
	return false
}

// recordKeyConstraint allows one completed response per (user, key).
const recordKeyConstraint = "idempotency_records_user_key_key"

// lookup reads a live completed record from PostgreSQL.
func (s *Store) lookup(ctx context.Context, scope Scope, key string) (Record, bool, error) {
	if scope.name != "" {
		row, err := s.q.RequestRecordGet(ctx, s.opts.DB, dbsqlc.RequestRecordGetParams{Scope: scope.name, Key: key})
		if errors.Is(err, db.ErrNotFound) || (err == nil && (row.StatusCode == 0 || !row.ExpiresAt.After(s.opts.Now()))) {
			return Record{}, false, nil
		}
		if err != nil {
			return Record{}, false, fmt.Errorf("read idempotency record: %w", err)
		}
		return decodeRecord(row.Fingerprint, 0, row.StatusCode, row.Headers, row.Body)
	}
	row, err := s.q.IdempotencyRecordGet(ctx, s.opts.DB, dbsqlc.IdempotencyRecordGetParams{UserID: scope.userID, Key: key})
	if errors.Is(err, db.ErrNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("read idempotency record: %w", err)
	}
	var orderID int64
	if row.OrderID != nil {
		orderID = *row.OrderID
	}
	return decodeRecord(row.Fingerprint, orderID, row.StatusCode, row.Headers, row.Body)
}

func decodeRecord(fp []byte, orderID int64, status int32, rawHeaders, body []byte) (Record, bool, error) {
	var headers map[string]string
	if err := json.Unmarshal(rawHeaders, &headers); err != nil {
		return Record{}, false, fmt.Errorf("decode idempotency headers: %w", err)
	}
	return Record{Fingerprint: fp, OrderID: orderID, Response: Response{Status: int(status), Headers: headers, Body: body}}, true, nil
}

// resolve is called when the transaction found the key already recorded
// (recorded said so): it returns the stored response to replay, or
// ErrMismatch when the key answered another request.
func (s *Store) resolve(ctx context.Context, c *claim) (Record, error) {
	rec, ok, err := s.lookup(ctx, c.scope, c.key)
	if err != nil {
		return Record{}, err
	}
	if !ok {
		return Record{}, errors.New("idempotency: record vanished after a conflict")
	}
	if string(rec.Fingerprint) != string(c.fp) {
		s.count(ctx, "postgres", "mismatch")
		return Record{}, ErrMismatch
	}
	s.count(ctx, "postgres", "replay")
	return rec, nil
}

// runClaimed is run for a named scope: the record is claimed first in the
// transaction, so that a concurrent duplicate (on any instance, with or
// without Redis) waits on the claim until the first commits, and then
// replays its answer; the record is completed after change. These
// requests are few, and waiting beats refusing them.
func (s *Store) runClaimed(ctx context.Context, c *claim, op Operation) (Record, bool, error) {
	out, err := db.RetryAborted(ctx, func() (claimedRun, error) { return s.claimAndChange(ctx, c, op) })
	return out.rec, out.replayed, err
}

// claimedRun is what claimAndChange answers with: the record, and whether
// it was a committed request's.
type claimedRun struct {
	rec      Record
	replayed bool
}

// claimAndChange is runClaimed's transaction.
func (s *Store) claimAndChange(ctx context.Context, c *claim, op Operation) (claimedRun, error) {
	return db.WithTxV(ctx, s.opts.DB, func(ptx pgx.Tx) (claimedRun, error) {
		tx := &Tx{Tx: ptx, s: s, c: c, atStart: true}
		claimed, err := s.q.RequestRecordClaim(ctx, tx, dbsqlc.RequestRecordClaimParams{
			Scope: c.scope.name, Key: c.key, Fingerprint: c.fp, ExpiresAt: s.opts.Now().Add(s.opts.Retention),
		})
		if err != nil {
			return claimedRun{}, fmt.Errorf("claim idempotency key: %w", err)
		}
		if claimed == 0 {
			rec, err := s.replayClaimed(ctx, tx, c)
			return claimedRun{rec: rec, replayed: true}, err
		}
		ans, err := op.Change(ctx, tx)
		if err != nil {
			return claimedRun{}, err
		}
		if ans.tx != tx {
			return claimedRun{}, errNoAnswer
		}
		rec := ans.rec
		rec.Fingerprint = c.fp
		headers, err := json.Marshal(rec.Response.headerMap())
		if err != nil {
			return claimedRun{}, err
		}
		return claimedRun{rec: rec}, s.q.RequestRecordComplete(ctx, tx, dbsqlc.RequestRecordCompleteParams{
			Scope: c.scope.name, Key: c.key, StatusCode: int32(rec.Response.Status), Headers: headers, Body: rec.Response.Body, //nolint:gosec // G115: an HTTP status
		})
	})
}

// replayClaimed answers a named key that a committed request holds.
func (s *Store) replayClaimed(ctx context.Context, tx pgx.Tx, c *claim) (Record, error) {
	row, err := s.q.RequestRecordGet(ctx, tx, dbsqlc.RequestRecordGetParams{Scope: c.scope.name, Key: c.key})
	if err != nil {
		return Record{}, fmt.Errorf("read idempotency record: %w", err)
	}
	if string(row.Fingerprint) != string(c.fp) {
		s.count(ctx, "postgres", "mismatch")
		return Record{}, ErrMismatch
	}
	if row.StatusCode == 0 {
		// Claimed by a transaction that committed without completing it:
		// only a bug gets here.
		return Record{}, errors.New("idempotency: record claimed but never completed")
	}
	s.count(ctx, "postgres", "replay")
	rec, _, err := decodeRecord(row.Fingerprint, 0, row.StatusCode, row.Headers, row.Body)
	return rec, err
}

// Prune deletes expired records (of submits and of other creating
// requests) in batches and returns how many went.
func (s *Store) Prune(ctx context.Context, now time.Time) (int64, error) {
	var total int64
	for _, prune := range []func() (int64, error){
		func() (int64, error) {
			return s.q.IdempotencyRecordsPrune(ctx, s.opts.DB, dbsqlc.IdempotencyRecordsPruneParams{Cutoff: now, MaxRows: 1000})
		},
		func() (int64, error) {
			return s.q.RequestRecordsPrune(ctx, s.opts.DB, dbsqlc.RequestRecordsPruneParams{Cutoff: now, MaxRows: 1000})
		},
	} {
		for {
			n, err := prune()
			if err != nil {
				return total, fmt.Errorf("prune idempotency records: %w", err)
			}
			total += n
			if n < 1000 {
				break
			}
		}
	}
	return total, nil
}
