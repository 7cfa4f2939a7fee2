package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// Request names a creating request for Once: who sent it (Scope, e.g.
// "staff:alice"), its Idempotency-Key, and its Fingerprint (what it asked
// for: the same key with another fingerprint is refused).
type Request struct {
	Scope       string
	Key         string
	Fingerprint []byte
}

// RequestFingerprint is the fingerprint of a request by its method, path
// and body.
func RequestFingerprint(method, path string, body []byte) []byte {
	h := sm3.New()
	h.Write([]byte(method + " " + path + "\n"))
	h.Write(body)
	return h.Sum(nil)
}

// Once runs change at most once per (req.Scope, req.Key), in a transaction
// that also records its response: a retry with the same key and
// fingerprint gets that response back (replayed is true), a concurrent
// one waits for the first to commit and then gets it too, and the same
// key with another fingerprint is ErrMismatch. When change fails, nothing
// is recorded, so a retry runs it again. PostgreSQL alone decides:
// creating requests other than submit are few, and need no faster layer.
func (s *Store) Once(ctx context.Context, b db.Beginner, req Request, change func(tx pgx.Tx) (Response, error)) (resp Response, replayed bool, err error) {
	err = db.WithTx(ctx, b, func(tx pgx.Tx) error {
		claimed, err := s.q.RequestRecordClaim(ctx, tx, dbsqlc.RequestRecordClaimParams{
			Scope: req.Scope, Key: req.Key, Fingerprint: req.Fingerprint, ExpiresAt: time.Now().Add(s.opts.Retention),
		})
		if err != nil {
			return fmt.Errorf("claim idempotency key: %w", err)
		}
		if claimed == 0 {
			resp, replayed, err = s.replayRecord(ctx, tx, req)
			return err
		}
		if resp, err = change(tx); err != nil {
			return err
		}
		headers, err := json.Marshal(resp.headerMap())
		if err != nil {
			return err
		}
		return s.q.RequestRecordComplete(ctx, tx, dbsqlc.RequestRecordCompleteParams{
			Scope: req.Scope, Key: req.Key, StatusCode: int32(resp.Status), Headers: headers, Body: resp.Body, //nolint:gosec // G115: an HTTP status
		})
	})
	return resp, replayed, err
}

// replayRecord answers a key that a committed request holds.
func (s *Store) replayRecord(ctx context.Context, tx pgx.Tx, req Request) (Response, bool, error) {
	row, err := s.q.RequestRecordGet(ctx, tx, dbsqlc.RequestRecordGetParams{Scope: req.Scope, Key: req.Key})
	if err != nil {
		return Response{}, false, fmt.Errorf("read idempotency record: %w", err)
	}
	if string(row.Fingerprint) != string(req.Fingerprint) {
		s.count("postgres", "mismatch")
		return Response{}, false, ErrMismatch
	}
	if row.StatusCode == 0 {
		// Claimed by a transaction that committed without completing it:
		// only a bug gets here.
		return Response{}, false, errors.New("idempotency: record claimed but never completed")
	}
	var headers map[string]string
	if err := json.Unmarshal(row.Headers, &headers); err != nil {
		return Response{}, false, fmt.Errorf("decode idempotency headers: %w", err)
	}
	s.count("postgres", "replay")
	return Response{Status: int(row.StatusCode), Headers: headers, Body: row.Body}, true, nil
}
