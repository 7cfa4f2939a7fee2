package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// InsertTx stores rec in the caller's transaction, next to the change it
// answers; q is the transaction or a db.Pipeline sent in it. When a
// request with the same key committed first, the insert fails and
// Recorded reports it: the caller must roll back and replay that one.
func (s *Store) InsertTx(ctx context.Context, q dbsqlc.DBTX, c *Claim, rec Record) error {
	headers, err := json.Marshal(rec.Response.headerMap())
	if err != nil {
		return fmt.Errorf("encode headers: %w", err)
	}
	var orderID *int64
	if rec.OrderID != 0 {
		orderID = &rec.OrderID
	}
	err = s.q.IdempotencyRecordInsert(ctx, q, dbsqlc.IdempotencyRecordInsertParams{
		UserID: c.userID, Key: c.key, Fingerprint: rec.Fingerprint, DigestAlg: DigestAlg, OrderID: orderID,
		StatusCode: int32(rec.Response.Status), Headers: headers, Body: rec.Response.Body, //nolint:gosec // G115: an HTTP status fits
		ExpiresAt: time.Now().Add(s.opts.Retention),
	})
	if err != nil {
		return fmt.Errorf("insert idempotency record: %w", err)
	}
	return nil
}

// Recorded reports whether err is InsertTx's conflict with a record of
// the same key, committed by a concurrent request.
func (s *Store) Recorded(err error) bool {
	if c, ok := db.UniqueViolation(err); ok && c == recordKeyConstraint {
		s.count("postgres", "backstop")
		return true
	}
	return false
}

// recordKeyConstraint allows one completed response per (user, key).
const recordKeyConstraint = "idempotency_records_user_key_key"

// Lookup reads a live record from PostgreSQL.
func (s *Store) Lookup(ctx context.Context, q dbsqlc.DBTX, userID int64, key string) (Record, bool, error) {
	row, err := s.q.IdempotencyRecordGet(ctx, q, dbsqlc.IdempotencyRecordGetParams{UserID: userID, Key: key})
	if errors.Is(db.NoRows(err), db.ErrNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("read idempotency record: %w", err)
	}
	var headers map[string]string
	if err := json.Unmarshal(row.Headers, &headers); err != nil {
		return Record{}, false, fmt.Errorf("decode idempotency headers: %w", err)
	}
	rec := Record{Fingerprint: row.Fingerprint, Response: Response{Status: int(row.StatusCode), Headers: headers, Body: row.Body}}
	if row.OrderID != nil {
		rec.OrderID = *row.OrderID
	}
	return rec, true, nil
}

// Resolve is called when the transaction found the key already recorded
// (Recorded said so): it returns the stored response to replay, or
// ErrMismatch when the key answered another request.
func (s *Store) Resolve(ctx context.Context, c *Claim) (Record, error) {
	rec, ok, err := s.Lookup(ctx, s.opts.DB, c.userID, c.key)
	if err != nil {
		return Record{}, err
	}
	if !ok {
		return Record{}, errors.New("idempotency: record vanished after a conflict")
	}
	if string(rec.Fingerprint) != string(c.fp) {
		s.count("postgres", "mismatch")
		return Record{}, ErrMismatch
	}
	s.count("postgres", "replay")
	return rec, nil
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
