package staff

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/takeout/takeout/internal/redisconn"
)

// attempts counts login attempts in fixed windows shared by every
// instance through Redis; while Redis is unavailable each instance counts
// on its own (a guesser spread over n instances gets n times the tries
// until Redis is back, not unlimited ones).
type attempts struct {
	rds   *redisconn.Conn
	now   func() time.Time
	mu    sync.Mutex
	local map[string]window
}

type window struct {
	n     int64
	until time.Time
}

func newAttempts(rds *redisconn.Conn, now func() time.Time) *attempts {
	return &attempts{rds: rds, now: now, local: map[string]window{}}
}

// reset forgets key's window.
func (a *attempts) reset(ctx context.Context, key string) {
	if a.rds.Client != nil {
		_ = a.rds.Client.Del(ctx, a.rds.Key(key)).Err()
	}
	a.mu.Lock()
	delete(a.local, key)
	a.mu.Unlock()
}

// hitScript adds one to a window's count (ARGV[2] = 1) or reads it
// (ARGV[2] = 0), starting the window of ARGV[1] ms at its first hit, and
// returns the count and the milliseconds left.
var hitScript = redis.NewScript(`
local n
if ARGV[2] == '1' then
  n = redis.call('INCR', KEYS[1])
  if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
else
  n = tonumber(redis.call('GET', KEYS[1]) or '0')
end
return {n, redis.call('PTTL', KEYS[1])}
`)

// count adds one to key's window (add) or reads it, returning the count
// and how long the window still runs.
func (a *attempts) count(ctx context.Context, key string, span time.Duration, add bool) (int64, time.Duration) {
	if a.rds.Client != nil {
		flag := "0"
		if add {
			flag = "1"
		}
		res, err := hitScript.Run(ctx, a.rds.Client, []string{a.rds.Key(key)}, span.Milliseconds(), flag).Int64Slice()
		if err == nil && len(res) == 2 {
			return res[0], time.Duration(max(res[1], 0)) * time.Millisecond
		}
	}
	return a.countLocally(key, span, add)
}

// maxLocalWindows bounds the memory of counting without Redis.
const maxLocalWindows = 100_000

func (a *attempts) countLocally(key string, span time.Duration, add bool) (int64, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	w, ok := a.local[key]
	if !ok || !now.Before(w.until) {
		w = window{until: now.Add(span)}
	}
	if add {
		if len(a.local) >= maxLocalWindows {
			for k, v := range a.local {
				if !now.Before(v.until) {
					delete(a.local, k)
				}
			}
		}
		w.n++
		if len(a.local) < maxLocalWindows || ok {
			a.local[key] = w
		}
	}
	return w.n, w.until.Sub(now)
}
