package idempotency

import (
	"context"

	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// The layers' internals as the package's tests drive them one by one
// (Do runs them together).

type Outcome struct {
	Replay *Response
	Claim  *Claim
}

type Claim struct{ c *claim }

func (s *Store) Begin(ctx context.Context, userID int64, key string, fp []byte) (Outcome, error) {
	out, err := s.begin(ctx, UserScope(userID), key, fp)
	o := Outcome{Replay: out.replay}
	if out.claim != nil {
		o.Claim = &Claim{out.claim}
	}
	return o, err
}

func (c *Claim) Finalize(ctx context.Context, rec Record) { c.c.finalize(ctx, rec) }
func (c *Claim) Release(ctx context.Context)              { c.c.release(ctx) }

func (s *Store) InsertTx(ctx context.Context, q dbsqlc.DBTX, c *Claim, rec Record) error {
	return s.insertTx(ctx, q, c.c, rec)
}

func (s *Store) Recorded(err error) bool { return s.recorded(context.Background(), err) }

func (s *Store) Lookup(ctx context.Context, userID int64, key string) (Record, bool, error) {
	return s.lookup(ctx, UserScope(userID), key)
}

func (s *Store) Cached(userID int64, key string, fp []byte) (*Response, bool, error) {
	resp, ok, err := s.cached(context.Background(), UserScope(userID), key, "", "", func() []byte { return fp })
	if !ok {
		return nil, false, err
	}
	return &resp, true, nil
}

func (s *Store) CachedRequest(userID int64, key, route, body string, fingerprint func() []byte) (Response, bool, error) {
	return s.cached(context.Background(), UserScope(userID), key, route, body, fingerprint)
}

// RequestText is a request as L1 keeps it.
func RequestText(route, body string) string { return requestText(route, body) }
