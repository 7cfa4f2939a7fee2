package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/redisconn"
)

// Revocations are the tokens revoked before they expire. Every instance
// keeps the live ones in memory, so a request checks one map: a
// revocation is stored in PostgreSQL (the truth), applied here at once,
// and announced to the other instances over Redis pub/sub; each instance
// also reloads the list periodically and whenever it resubscribes, since
// messages sent while it was disconnected (or without Redis) are lost.
type Revocations struct {
	db      dbsqlc.DBTX
	q       *dbsqlc.Queries
	redis   *redisconn.Conn
	channel string
	logger  *slog.Logger

	mu  sync.RWMutex
	ids map[string]struct{}
	// watched are the tokens long requests (order streams) wait on: each
	// channel is closed when its token is revoked.
	watched map[string]*watch
}

// watch is the watchers of one token.
type watch struct {
	revoked  chan struct{}
	watchers int
}

const revocationChannel = "tokens:revoked"

// NewRevocations returns the revocations kept in db, announced over rds.
func NewRevocations(db dbsqlc.DBTX, rds *redisconn.Conn, logger *slog.Logger) *Revocations {
	return &Revocations{db: db, q: dbsqlc.New(), redis: rds, channel: rds.Key(revocationChannel), logger: logger,
		ids: map[string]struct{}{}, watched: map[string]*watch{}}
}

// Revoked reports whether the token with this id was revoked.
func (r *Revocations) Revoked(id string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.ids[id]
	return ok
}

// Revocation is one token to revoke.
type Revocation struct {
	TokenID   string
	Kind      string // user, staff, unknown (revoked by id alone)
	Subject   string
	ExpiresAt time.Time
	By        string
}

// Revoke revokes a token: stored, applied here, and announced. Revoking
// one twice changes nothing.
func (r *Revocations) Revoke(ctx context.Context, rev Revocation) error {
	if err := r.q.RevokedTokenInsert(ctx, r.db, dbsqlc.RevokedTokenInsertParams{
		TokenID: rev.TokenID, Kind: rev.Kind, Subject: rev.Subject, ExpiresAt: rev.ExpiresAt, RevokedBy: rev.By,
	}); err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	r.add(rev.TokenID)
	if err := r.redis.Publish(context.WithoutCancel(ctx), r.channel, rev.TokenID); err != nil {
		r.logger.WarnContext(ctx, "publish token revocation failed; other instances catch up at their next reload", "err", err)
	}
	return nil
}

func (r *Revocations) add(id string) {
	r.mu.Lock()
	r.ids[id] = struct{}{}
	r.fire(id)
	r.mu.Unlock()
}

// fire closes the channel of id's watchers; r.mu is held.
func (r *Revocations) fire(id string) {
	if w, ok := r.watched[id]; ok {
		close(w.revoked)
		delete(r.watched, id)
	}
}

// Watch returns a channel that is closed when the token with this id is
// revoked, here or on another instance (closed already if it was): a
// long request made with the token ends then. stop ends the watch.
func (r *Revocations) Watch(id string) (revoked <-chan struct{}, stop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ids[id]; ok {
		ch := make(chan struct{})
		close(ch)
		return ch, func() {}
	}
	w, ok := r.watched[id]
	if !ok {
		w = &watch{revoked: make(chan struct{})}
		r.watched[id] = w
	}
	w.watchers++
	return w.revoked, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if w.watchers--; w.watchers == 0 && r.watched[id] == w {
			delete(r.watched, id)
		}
	}
}

// Load replaces the in-memory list with the live revocations in the
// database.
func (r *Revocations) Load(ctx context.Context) error {
	ids, err := r.q.RevokedTokensLive(ctx, r.db)
	if err != nil {
		return fmt.Errorf("load token revocations: %w", err)
	}
	m := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	r.mu.Lock()
	// Revocations applied meanwhile stay: a reload never forgets one.
	for id := range r.ids {
		m[id] = struct{}{}
	}
	r.ids = m
	// A revocation whose announcement was lost (Redis down) reaches the
	// watchers of its token here.
	for id := range r.watched {
		if _, ok := m[id]; ok {
			r.fire(id)
		}
	}
	r.mu.Unlock()
	return nil
}

// Run applies other instances' revocations until ctx ends, reloading
// from the database every interval and on each (re)subscription.
func (r *Revocations) Run(ctx context.Context, every time.Duration) {
	go r.redis.Subscribe(ctx, r.channel, redisconn.Subscription{
		OnMessage: r.add,
		OnSubscribe: func() {
			if err := r.Load(ctx); err != nil && ctx.Err() == nil {
				r.logger.Warn("reload token revocations", "err", err)
			}
		},
	}, nil)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Load(ctx); err != nil && ctx.Err() == nil {
				r.logger.Warn("reload token revocations", "err", err)
			}
			if _, err := r.q.RevokedTokensPrune(ctx, r.db); err != nil && ctx.Err() == nil {
				r.logger.Warn("prune token revocations", "err", err)
			}
		}
	}
}

// newTokenID is a token's id (its jti): what a revocation names.
func newTokenID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// legacyTokenID names a token issued before tokens carried an id: by a
// digest of the token itself, so it can be revoked by presenting it.
func legacyTokenID(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return "sha256:" + hex.EncodeToString(sum[:16])
}
