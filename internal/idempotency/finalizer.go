package idempotency

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A request's answer goes to Redis after it went to the client, and the
// answers of the requests that ended within Options.FinalizeWindow of each
// other
// go in one pipeline: one write and one read for them all instead of a
// round trip each. Sent one by one, finalizes were an eighth of the api's
// CPU per order and as many commands on the Redis server. L1 has the
// answer before the client does, so a retry reaching this instance is
// answered from it at once; one reaching another instance within the
// window finds the key still in flight and waits (Do polls the claim),
// as it would for a request still running. A finalize lost to a crash
// leaves the claim to expire: its retries are answered from PostgreSQL
// after the coalescing wait.
const (
	defaultFinalizeWindow = 2 * time.Millisecond
	finalizeBatch         = 128
)

// finalWrite is one answer waiting to be stored in Redis.
type finalWrite struct {
	ctx    context.Context // the request's, for its trace; never cancelled
	rk     string
	owner  string
	fp     []byte
	record []byte // the record, JSON
}

// finalizer gathers finalizes and sends them together.
type finalizer struct {
	s *Store

	mu      sync.Mutex
	pending []finalWrite
	closed  bool
	sending sync.WaitGroup
}

// add queues w; the batch goes out a window after its first write,
// or at once when it is full. After close, w is sent at once.
func (f *finalizer) add(w finalWrite) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		f.send([]finalWrite{w})
		return
	}
	f.pending = append(f.pending, w)
	switch len(f.pending) {
	case finalizeBatch:
		batch := f.take()
		f.mu.Unlock()
		go f.sendTaken(batch)
		return
	case 1:
		// A timer armed for an earlier batch that went out full may fire
		// first and take this one early: no harm.
		time.AfterFunc(f.s.opts.FinalizeWindow, f.flush)
	}
	f.mu.Unlock()
}

// take empties pending and counts the batch as being sent; f.mu is held.
func (f *finalizer) take() []finalWrite {
	batch := f.pending
	f.pending = nil
	if len(batch) > 0 {
		f.sending.Add(1)
	}
	return batch
}

func (f *finalizer) flush() {
	f.mu.Lock()
	batch := f.take()
	f.mu.Unlock()
	f.sendTaken(batch)
}

func (f *finalizer) sendTaken(batch []finalWrite) {
	if len(batch) == 0 {
		return
	}
	defer f.sending.Done()
	f.send(batch)
}

// close sends what is pending and waits for every batch on its way: on
// shutdown, after the last request.
func (f *finalizer) close() {
	f.mu.Lock()
	f.closed = true
	batch := f.take()
	f.mu.Unlock()
	f.sendTaken(batch)
	f.sending.Wait()
}

// send stores a batch's answers in Redis, one pipeline per shard through
// the shard's circuit breaker. Failures are logged: PostgreSQL holds
// every record.
func (f *finalizer) send(batch []finalWrite) {
	s := f.s
	byShard := map[string][]finalWrite{}
	for _, w := range batch {
		shard := s.opts.Redis.Shard(w.ctx, w.rk)
		byShard[shard] = append(byShard[shard], w)
	}
	retention := s.opts.Retention.Milliseconds()
	for shard, ws := range byShard {
		ctx := ws[0].ctx
		_, err := s.breakers.forShard(shard).Execute(func() (any, error) {
			pipe := s.opts.Redis.Client.Pipeline()
			cmds := make([]*redis.Cmd, len(ws))
			for i, w := range ws {
				cmds[i] = pipe.EvalSha(ctx, finalizeScript.Hash(), []string{w.rk}, w.owner, w.fp, w.record, retention)
			}
			_, _ = pipe.Exec(ctx) // each write's error is in its command
			var first error
			for i, cmd := range cmds {
				err := cmd.Err()
				if redis.HasErrorPrefix(err, "NOSCRIPT") {
					// Redis restarted or flushed its scripts: this write loads
					// the script again, and the next batch runs by SHA.
					w := ws[i]
					err = finalizeScript.Run(ctx, s.opts.Redis.Client, []string{w.rk}, w.owner, w.fp, w.record, retention).Err()
				}
				if err != nil && first == nil {
					first = err
				}
			}
			return nil, first
		})
		if err != nil {
			s.logger.WarnContext(ctx, "finalize idempotency records in redis", "records", len(ws), "err", err)
		}
	}
}
