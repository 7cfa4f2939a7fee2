package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/idempotency"

	"github.com/takeout/takeout/internal/testenv"
)

// Answers go to Redis after Do returns, many in one round trip: each key
// ends up holding its own answer (none lost, none crossed with a
// neighbour's in a shared pipeline, none lost to a Redis that forgot the
// script), another instance replays every one from Redis without running
// anything, and the answers still on their way when an instance shuts
// down are stored by Close.
func TestDeferredFinalizesStoreEveryAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := testenv.NewRedis(t)
	rds := r.Conn(t)
	rds.Check(ctx)
	// A window longer than the test: only Close can have sent the last
	// batch (full batches go out at once).
	first, err := idempotency.NewStore(idempotency.Options{
		DB: testenv.NewDB(t), Redis: rds, Logger: slog.New(slog.DiscardHandler),
		Retention: 72 * time.Hour, InflightTTL: time.Minute, CoalesceWait: 200 * time.Millisecond,
		L1Bytes: 1 << 20, L1TTL: time.Minute, FinalizeWindow: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}

	// Redis forgot the scripts (a restart, SCRIPT FLUSH): the pipelined
	// finalizes are refused NOSCRIPT and load the script again.
	if err := rds.Client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const keys = 300
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			key := fmt.Sprint("k", i)
			out, err := first.Begin(ctx, 7, key, []byte("fp-"+key))
			if err != nil || out.Claim == nil {
				t.Errorf("begin %s: %+v, %v", key, out, err)
				return
			}
			rec := record("fp-" + key)
			rec.Response.Body = []byte(key)
			out.Claim.Finalize(ctx, rec)
		})
	}
	wg.Wait()
	first.Close() // what an instance does on shutdown: nothing may be left behind

	second := newStore(t, rds, nil)
	for i := range keys {
		key := fmt.Sprint("k", i)
		state, err := rds.Client.HGet(ctx, rds.Key("idem:{7:"+key+"}"), "state").Result()
		if err != nil || state != "done" {
			t.Errorf("key %s in redis: state %q, %v; want done", key, state, err)
			continue
		}
		out, err := second.Begin(ctx, 7, key, []byte("fp-"+key))
		if err != nil || out.Replay == nil {
			t.Errorf("another instance's retry of %s: %+v, %v; want a replay from redis", key, out, err)
			continue
		}
		if got := string(out.Replay.Body); got != key {
			t.Errorf("key %s replays %q: another key's answer", key, got)
		}
	}
}

// A retry that reaches another instance before the answer is in Redis
// waits for it as for a request still running, and replays it.
func TestRetryOnAnotherInstanceWaitsForTheFinalize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rds := testenv.NewRedis(t).Conn(t)
	rds.Check(ctx)
	a, b := newStore(t, rds, nil), newStore(t, rds, nil)
	for i := range 50 {
		key := fmt.Sprint("r", i)
		out, err := a.Begin(ctx, 8, key, []byte("fp"))
		if err != nil || out.Claim == nil {
			t.Fatalf("begin: %+v, %v", out, err)
		}
		rec := record("fp")
		rec.Response.Body = []byte(key)
		out.Claim.Finalize(ctx, rec)
		retry, err := b.Begin(ctx, 8, key, []byte("fp"))
		if err != nil || retry.Replay == nil || string(retry.Replay.Body) != key {
			t.Fatalf("retry of %s on another instance right after the answer: %+v, %v", key, retry, err)
		}
	}
}
