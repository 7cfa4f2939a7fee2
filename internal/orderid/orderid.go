// Package orderid generates 64-bit, time-ordered order ids that never
// repeat across instances: 41 bits of milliseconds since 2026-01-01 UTC,
// 10 bits of worker id and 12 bits of sequence. Worker ids are leased from
// PostgreSQL, so two live instances never share one; a clock that steps
// backwards is waited out (up to a bound) and never yields a repeat.
package orderid

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Epoch is the zero of the id's time field.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

const (
	workerBits   = 10
	sequenceBits = 12
	maxWorker    = 1<<workerBits - 1
	maxSequence  = 1<<sequenceBits - 1
	timeShift    = workerBits + sequenceBits
)

// ErrClockBackwards means the clock went back further than the generator
// waits; it refuses rather than risk a repeat.
var ErrClockBackwards = errors.New("orderid: clock moved backwards beyond the tolerated step")

// ErrLeaseLost means the generator's worker lease is no longer valid, so
// another instance may hold its worker id: it refuses to generate.
var ErrLeaseLost = errors.New("orderid: worker lease lost")

// Generator hands out ids for one worker id.
type Generator struct {
	mu       sync.Mutex
	worker   int64
	lastMS   int64
	seq      int64
	now      func() time.Time
	sleep    func(context.Context, time.Duration) error
	maxStep  time.Duration
	validTil func() time.Time // end of the worker lease; zero means forever

	backwards prometheus.Counter
}

// Options configure a Generator.
type Options struct {
	Worker int
	// Now is the clock (time.Now outside tests).
	Now func() time.Time
	// MaxBackwardStep is how far back the clock may step before Next
	// refuses instead of waiting (default 5s).
	MaxBackwardStep time.Duration
	// LeaseValidUntil reports until when the worker id is ours; nil means
	// forever (tests).
	LeaseValidUntil func() time.Time
	// Floor is the earliest time an id may carry (the lease's Floor):
	// ids start past it, so a clock stepped back since the worker id's
	// last holder waits (up to MaxBackwardStep) or is refused, never
	// reissues an id.
	Floor time.Time
	// Registerer receives takeout_orderid_clock_backwards_total.
	Registerer prometheus.Registerer
}

// New returns a generator for opts.Worker.
func New(opts Options) (*Generator, error) {
	if opts.Worker < 0 || opts.Worker > maxWorker {
		return nil, fmt.Errorf("orderid: worker %d out of range 0..%d", opts.Worker, maxWorker)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBackwardStep == 0 {
		opts.MaxBackwardStep = 5 * time.Second
	}
	g := &Generator{
		worker:   int64(opts.Worker),
		now:      opts.Now,
		maxStep:  opts.MaxBackwardStep,
		validTil: opts.LeaseValidUntil,
		sleep: func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		},
		backwards: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "takeout_orderid_clock_backwards_total",
			Help: "Times the clock was seen going backwards while generating order ids.",
		}),
	}
	if !opts.Floor.IsZero() {
		// As if an id of the millisecond before the floor, with its
		// sequence spent, had just been issued.
		g.lastMS, g.seq = opts.Floor.UnixMilli()-epoch-1, maxSequence
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(g.backwards); err != nil {
			return nil, fmt.Errorf("register orderid metrics: %w", err)
		}
	}
	return g, nil
}

// Worker returns the generator's worker id.
func (g *Generator) Worker() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return int(g.worker)
}

// rebase moves the generator onto a newly leased worker id whose ids must
// stay at or above floor. Its ids keep rising across the move.
func (g *Generator) rebase(worker int, floor time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.worker = int64(worker)
	if ms := floor.UnixMilli() - epoch - 1; ms > g.lastMS {
		g.lastMS, g.seq = ms, maxSequence
	}
}

// NextFloor is the earliest time the worker id's next holder may use:
// just past the last id issued.
func (g *Generator) NextFloor() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.UnixMilli(g.lastMS + epoch + 1)
}

// Next returns a new id. It waits when the clock went back by less than
// the tolerated step, or when the millisecond's sequence is exhausted.
func (g *Generator) Next(ctx context.Context) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		now := g.now()
		if g.validTil != nil && !now.Before(g.validTil()) {
			return 0, ErrLeaseLost
		}
		ms := now.UnixMilli() - epoch
		switch {
		case ms < g.lastMS:
			g.backwards.Inc()
			behind := time.Duration(g.lastMS-ms) * time.Millisecond
			if behind > g.maxStep {
				return 0, fmt.Errorf("%w: %v behind", ErrClockBackwards, behind)
			}
			if err := g.sleep(ctx, behind); err != nil {
				return 0, err
			}
			continue
		case ms == g.lastMS:
			if g.seq == maxSequence {
				if err := g.sleep(ctx, time.Millisecond/4); err != nil {
					return 0, err
				}
				continue
			}
			g.seq++
		default:
			g.lastMS, g.seq = ms, 0
		}
		if ms >= 1<<41 {
			return 0, errors.New("orderid: time field exhausted")
		}
		return ms<<timeShift | g.worker<<sequenceBits | g.seq, nil
	}
}
