package idempotency

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/redisconn"
)

// Inspection is what operators see of a key.
type Inspection struct {
	UserID string `json:"user_id"`
	Key    string `json:"key"`
	// State is "completed" (a stored response) or "in_flight" (claimed in
	// Redis, not committed yet).
	State          string     `json:"state"`
	Fingerprint    string     `json:"fingerprint"`
	DigestAlg      string     `json:"digest_alg"`
	OrderID        *string    `json:"order_id"`
	ResponseStatus *int       `json:"response_status"`
	CreatedAt      *time.Time `json:"created_at"`
	ExpiresAt      *time.Time `json:"expires_at"`
	InRedis        bool       `json:"in_redis"`
}

// ErrNoRecord is the not-found problem of an unknown key.
var ErrNoRecord = problem.New(problem.NotFound, "no idempotency record for this user and key")

// Inspect describes a key from PostgreSQL and Redis.
func (s *Store) Inspect(ctx context.Context, userID int64, key string) (Inspection, error) {
	in := Inspection{UserID: strconv.FormatInt(userID, 10), Key: key, DigestAlg: DigestAlg}
	var redisState, redisFP string
	if rk := s.redisKey(UserScope(userID), key); s.redisUsable(ctx, rk) {
		vals, err := s.opts.Redis.Client.HMGet(ctx, rk, "state", "fp").Result()
		if err == nil && vals[0] != nil {
			in.InRedis = true
			redisState, _ = vals[0].(string)
			redisFP, _ = vals[1].(string)
		}
	}
	row, err := s.q.IdempotencyRecordGet(ctx, s.opts.DB, dbsqlc.IdempotencyRecordGetParams{UserID: userID, Key: key})
	switch {
	case errors.Is(err, db.ErrNotFound):
		if redisState != "inflight" {
			return Inspection{}, ErrNoRecord
		}
		in.State, in.Fingerprint = "in_flight", hex.EncodeToString([]byte(redisFP))
		return in, nil
	case err != nil:
		return Inspection{}, fmt.Errorf("read idempotency record: %w", err)
	}
	status := int(row.StatusCode)
	in.State, in.Fingerprint, in.DigestAlg = "completed", hex.EncodeToString(row.Fingerprint), row.DigestAlg
	in.ResponseStatus, in.CreatedAt, in.ExpiresAt = &status, &row.CreatedAt, &row.ExpiresAt
	if row.OrderID != nil {
		id := strconv.FormatInt(*row.OrderID, 10)
		in.OrderID = &id
	}
	return in, nil
}

// Purge forgets a key everywhere: PostgreSQL, Redis, and every instance's
// L1 (over pub/sub). The next request with the key runs afresh; the
// order it placed, if any, stays (a resubmit of its token answers 200
// duplicate).
func (s *Store) Purge(ctx context.Context, userID int64, key string) error {
	n, err := s.q.IdempotencyRecordDelete(ctx, s.opts.DB, dbsqlc.IdempotencyRecordDeleteParams{UserID: userID, Key: key})
	if err != nil {
		return fmt.Errorf("delete idempotency record: %w", err)
	}
	rk := UserScope(userID).l1Key(key)
	inL1 := s.l1.invalidate(rk)
	var inRedis int64
	if s.opts.Redis.Client != nil {
		inRedis, err = s.opts.Redis.Client.Del(ctx, s.redisKey(UserScope(userID), key)).Result()
		if err != nil {
			return fmt.Errorf("delete idempotency record from redis: %w", err)
		}
		if err := s.opts.Redis.Publish(ctx, s.channel(), rk); err != nil {
			return fmt.Errorf("publish idempotency purge: %w", err)
		}
	}
	if n == 0 && inRedis == 0 && !inL1 {
		return ErrNoRecord
	}
	return nil
}

func (s *Store) channel() string { return s.opts.Redis.Key("idem:purge") }

// RunPurges drops the keys other instances purge from this instance's L1
// until ctx ends; a resubscription flushes L1, since purges sent while
// disconnected are lost. ready, if not nil, is closed once subscribed.
func (s *Store) RunPurges(ctx context.Context, ready chan<- struct{}) {
	s.opts.Redis.Subscribe(ctx, s.channel(), redisconn.Subscription{
		OnMessage:   func(payload string) { s.l1.invalidate(payload) },
		OnSubscribe: s.l1.clear,
	}, ready)
}

// ParseUserID parses a user id path parameter.
func ParseUserID(s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || id <= 0 {
		return 0, ErrNoRecord
	}
	return id, nil
}
