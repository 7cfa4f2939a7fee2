package idempotency

import (
	"context"
	"errors"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// Request is one request under an Idempotency-Key, for Do.
type Request struct {
	Scope Scope
	Key   string
	// Route and Body are what the request asks for: Route is its method
	// and its path with the path parameters in it, escaped (no newline),
	// e.g. "POST /admin/v1/orders/42/refunds" (see HTTPRoute); Body is its
	// body, or for a submit its confirm token. The same key with another
	// route, path parameter or body is refused with ErrMismatch in every
	// layer: L1 compares them as they are; Redis and PostgreSQL keep their
	// fingerprint (RequestFingerprint), computed only when a layer needs
	// it.
	Route, Body string
}

// Operation is the change a request makes, which Do runs at most once
// per key. Do calls its methods in this order, each at most once, and
// none when L1 answers.
type Operation interface {
	// Check runs once L1 has missed and before anything outside the
	// process is touched, so that a request it refuses (a forged token)
	// costs neither Redis nor PostgreSQL anything. To refuse only a
	// request that has not run before (an expired token whose order may
	// have been placed), return ReplayOnly(err).
	Check() error
	// Direct, for a user's key, makes the change and records its answer
	// in one statement of its own (one round trip, one transaction),
	// taking the record's columns from row. It reports false, having
	// changed nothing, when this request needs Change's transaction
	// after all; Do then runs Change.
	Direct(ctx context.Context, row RecordRower) (Record, bool, error)
	// Change makes the change in tx and answers with tx.Answer or
	// tx.AnswerWith. An error rolls the transaction back and records
	// nothing, so a retry runs it again; Do itself runs it again when
	// PostgreSQL aborted the transaction to break a deadlock.
	Change(ctx context.Context, tx *Tx) (Answer, error)
}

// ChangeFunc is an Operation that is a transaction alone: nothing to
// check first, no one-statement path.
type ChangeFunc func(ctx context.Context, tx *Tx) (Answer, error)

// Check refuses nothing.
func (ChangeFunc) Check() error { return nil }

// Direct declines: the change runs in a transaction.
func (ChangeFunc) Direct(context.Context, RecordRower) (Record, bool, error) {
	return Record{}, false, nil
}

// Change runs f.
func (f ChangeFunc) Change(ctx context.Context, tx *Tx) (Answer, error) { return f(ctx, tx) }

// RecordRow is the idempotency_records row of a user's answer, for a
// Request.Direct statement to insert with its change.
type RecordRow struct {
	UserID      int64
	Key         string
	Fingerprint []byte
	DigestAlg   string
	StatusCode  int32
	Headers     []byte
	Body        []byte
	ExpiresAt   time.Time
}

// RecordRower renders the response a direct change answers with as its
// record's row.
type RecordRower func(Response) (RecordRow, error)

// Result is Do's answer: the response to send, and whether it is the
// stored answer of an earlier request with the key.
type Result struct {
	Response Response
	Replayed bool
}

// replayOnlyError is a refusal that does not apply to a request already
// answered: see ReplayOnly.
type replayOnlyError struct{ err error }

func (e replayOnlyError) Error() string { return e.err.Error() }
func (e replayOnlyError) Unwrap() error { return e.err }

// ReplayOnly wraps a refusal from Request.Check that holds only for a
// request that never ran: when the key already has this request's
// response, Do replays it; otherwise Do returns err.
func ReplayOnly(err error) error { return replayOnlyError{err} }

// Tx is the transaction an Operation's Change runs in (a pgx.Tx), which
// also records its answer.
type Tx struct {
	pgx.Tx
	s       *Store
	c       *claim
	atStart bool // the record is claimed, not inserted (named scopes)
}

// Answer is what a Change answers with: its record, and whether the
// record was already sent with the change's statements. Only Tx.Answer
// and Tx.AnswerWith make one, so the answer recorded and the answer sent
// are one value.
type Answer struct {
	tx     *Tx
	rec    Record
	queued bool
}

// Answer is the answer rec, recorded by Do after the change.
func (t *Tx) Answer(rec Record) Answer { return Answer{tx: t, rec: rec} }

// AnswerWith queues the answer rec's record on q (a db.Pipeline of the
// transaction) so that it reaches PostgreSQL with the change's next
// statement instead of in one of its own after the change: for a change
// whose last statement takes locks (a stock take), held then until the
// commit that follows. For a scope whose record is claimed at the start
// it is Answer.
func (t *Tx) AnswerWith(ctx context.Context, q dbsqlc.DBTX, rec Record) (Answer, error) {
	if t.atStart {
		return t.Answer(rec), nil
	}
	rec.Fingerprint = t.c.fp
	if err := t.s.insertTx(ctx, q, t.c, rec); err != nil {
		return Answer{}, err
	}
	return Answer{tx: t, rec: rec, queued: true}, nil
}

// errNoAnswer is a Change that returned an Answer it did not make with
// its own Tx.
var errNoAnswer = errors.New("idempotency: the change returned no answer of its transaction")

// Do runs change at most once per (req.Scope, req.Key), whatever the
// retries, their concurrency, the instances they reach and the state of
// Redis, and answers every retry with the first answer, byte for byte.
// The layers, cheapest first:
//
//  1. L1: a completed answer to this exact request in this process.
//  2. Redis: one Lua round trip claims the key, or finds its answer, or
//     finds it in flight and waits up to CoalesceWait (then asks
//     PostgreSQL, then answers InProgress: 409 request-in-progress).
//  3. PostgreSQL, the truth: change runs in a transaction that also
//     records its response. A user's record is inserted last: a
//     concurrent request that committed first makes the insert fail, the
//     transaction rolls back, and its answer is replayed. Another scope's
//     record is claimed first: a concurrent duplicate waits on it.
//
// After commit the answer goes to Redis and L1; on failure before commit
// the Redis claim is released so that a retry can run.
func (s *Store) Do(ctx context.Context, req Request, op Operation) (Result, error) {
	var fp []byte
	fingerprint := func() []byte {
		if fp == nil {
			fp = RequestFingerprint(req.Route, req.Body)
		}
		return fp
	}
	if resp, ok, err := s.cached(ctx, req.Scope, req.Key, req.Route, req.Body, fingerprint); err != nil || ok {
		return Result{Response: resp, Replayed: ok}, err
	}
	s.count(ctx, "l1", "miss")
	var refused error
	if err := op.Check(); err != nil {
		var ro replayOnlyError
		if !errors.As(err, &ro) {
			return Result{}, err
		}
		refused = ro.err
	}
	out, err := s.begin(ctx, req.Scope, req.Key, fingerprint())
	if err != nil || out.replay != nil {
		return s.replayed(out.replay), err
	}
	c := out.claim
	if refused != nil {
		return s.replayOrRefuse(ctx, c, req, refused)
	}
	rec, replayed, err := s.run(ctx, c, op)
	if err != nil {
		c.release(ctx)
		return Result{}, err
	}
	rec.Request = requestText(req.Route, req.Body)
	c.finalize(ctx, rec)
	return Result{Response: rec.Response, Replayed: replayed}, nil
}

func (s *Store) replayed(resp *Response) Result {
	if resp == nil {
		return Result{}
	}
	return Result{Response: *resp, Replayed: true}
}

// replayOrRefuse answers a request that may not run anew: with its
// recorded response, if PostgreSQL has one for this very request, else
// with refused.
func (s *Store) replayOrRefuse(ctx context.Context, c *claim, req Request, refused error) (Result, error) {
	rec, ok, err := s.lookup(ctx, c.scope, c.key)
	if err != nil || !ok || string(rec.Fingerprint) != string(c.fp) {
		c.release(ctx)
		return Result{}, refused
	}
	rec.Request = requestText(req.Route, req.Body)
	c.finalize(ctx, rec)
	return Result{Response: rec.Response, Replayed: true}, nil
}

// run runs op and records its response: by its one statement, or in one
// transaction with its change. It returns the record to answer with, and
// whether that record was an earlier request's (a replay).
func (s *Store) run(ctx context.Context, c *claim, op Operation) (Record, bool, error) {
	if c.scope.name != "" {
		return s.runClaimed(ctx, c, op)
	}
	rec, ok, err := op.Direct(ctx, func(resp Response) (RecordRow, error) { return s.recordRow(c, resp) })
	switch {
	case s.recorded(ctx, err):
		rec, err := s.resolve(ctx, c)
		return rec, err == nil, err
	case err != nil:
		return Record{}, false, err
	case ok:
		rec.Fingerprint = c.fp
		return rec, false, nil
	}
	rec, err = db.RetryAborted(ctx, func() (Record, error) {
		return db.WithTxV(ctx, s.opts.DB, func(ptx pgx.Tx) (Record, error) {
			tx := &Tx{Tx: ptx, s: s, c: c}
			ans, err := op.Change(ctx, tx)
			switch {
			case err != nil:
				return Record{}, err
			case ans.tx != tx:
				return Record{}, errNoAnswer
			case ans.queued:
				return ans.rec, nil // inserted with the change's last statement
			}
			ans.rec.Fingerprint = c.fp
			return ans.rec, s.insertTx(ctx, ptx, c, ans.rec)
		})
	})
	if s.recorded(ctx, err) {
		// A request with this key committed first: replay its answer.
		rec, err := s.resolve(ctx, c)
		return rec, err == nil, err
	}
	return rec, false, err
}

// RequestFingerprint is the fingerprint of a request by its route (method
// and path) and body.
func RequestFingerprint(route, body string) []byte {
	h := sm3.New()
	h.Write([]byte(route + "\n"))
	h.Write([]byte(body))
	return h.Sum(nil)
}
