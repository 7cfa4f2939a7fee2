package idempotency

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The scripts run by SHA (EVALSHA) and fall back to EVAL when Redis says
// NOSCRIPT (after a restart or SCRIPT FLUSH): go-redis's Script.Run does
// exactly that, and the finalizer does it per command of its pipelines.
// Each call is on one key; a claim or a release is a round trip of its
// own, finalizes share one (finalizer.go). Keys carry a hash tag, so they
// stay valid on a Redis Cluster when a script grows a second key.

// claimScript: absent -> claim in-flight with our owner token and a TTL;
// in-flight -> "inflight"; done -> the record. Another fingerprint is a
// mismatch in any state.
var claimScript = redis.NewScript(`
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  redis.call('HSET', KEYS[1], 'state', 'inflight', 'owner', ARGV[2], 'fp', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'claimed'}
end
if redis.call('HGET', KEYS[1], 'fp') ~= ARGV[1] then
  return {'mismatch'}
end
if state == 'inflight' then
  return {'inflight'}
end
return {'done', redis.call('HGET', KEYS[1], 'record')}
`)

// finalizeScript stores the record if we still own the claim (or the key
// is gone, e.g. after a flush), and keeps it for the retention.
var finalizeScript = redis.NewScript(`
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'done', 'owner', ARGV[1], 'fp', ARGV[2], 'record', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// releaseScript drops the claim only if we still own it and it is still
// in flight, so a failed request lets a retry run.
var releaseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] and redis.call('HGET', KEYS[1], 'state') == 'inflight' then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

type claimResult struct {
	state  string
	record Record
}

// redisKey is the hash-tagged key of a (scope, key) record.
func (s *Store) redisKey(scope Scope, key string) string {
	return s.opts.Redis.Key("idem:{" + scope.String() + ":" + key + "}")
}

func (s *Store) claimRedis(ctx context.Context, c *claim) (claimResult, error) {
	v, err := s.breakers.forKey(ctx, c.rk).Execute(func() (any, error) {
		return claimScript.Run(ctx, s.opts.Redis.Client, []string{c.rk},
			c.fp, c.owner, s.opts.InflightTTL.Milliseconds()).Slice()
	})
	if err != nil {
		return claimResult{}, err
	}
	parts := v.([]any)
	state, _ := parts[0].(string)
	res := claimResult{state: state}
	if state == "done" {
		raw, _ := parts[1].(string)
		if err := json.Unmarshal([]byte(raw), &res.record); err != nil {
			return claimResult{}, fmt.Errorf("decode stored record: %w", err)
		}
	}
	return res, nil
}

// finalize makes the completed response the answer to every retry: in L1
// at once, and in Redis, when the claim was taken there (or Redis is
// usable), shortly after (see finalizer). It runs after the PostgreSQL
// transaction committed. Failures are logged: PostgreSQL already holds the
// record.
func (c *claim) finalize(ctx context.Context, rec Record) {
	s := c.s
	s.l1.set(c.scope.l1Key(c.key), rec)
	if !c.inRedis && !s.redisUsable(ctx, c.rk) {
		return
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		s.logger.ErrorContext(ctx, "encode idempotency record", "err", err)
		return
	}
	s.finals.add(finalWrite{ctx: context.WithoutCancel(ctx), rk: c.rk, owner: c.owner, fp: rec.Fingerprint, record: raw})
}

// release gives the key up after a failure before commit, so that a retry
// can run. Only the owner's in-flight claim is dropped.
func (c *claim) release(ctx context.Context) {
	if !c.inRedis {
		return
	}
	s := c.s
	_, err := s.breakers.forKey(ctx, c.rk).Execute(func() (any, error) {
		return releaseScript.Run(context.WithoutCancel(ctx), s.opts.Redis.Client, []string{c.rk}, c.owner).Result()
	})
	if err != nil {
		s.logger.WarnContext(ctx, "release idempotency claim", "err", err)
	}
}
