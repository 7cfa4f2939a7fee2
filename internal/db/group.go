package db

import (
	"context"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Group commits concurrent one-statement changes together (group
// commit). A change that finds fewer than Slots groups running is sent
// at once, alone; the changes that arrive while every slot is busy wait,
// and the next slot to come free sends up to Max of them together: one
// pipeline in one implicit transaction, so one round trip and one commit
// (one WAL flush) for the group instead of one each. Nothing waits for a
// group to fill, so an idle service answers as fast as without it, and a
// busy one commits less often the busier it is.
//
// The statement run together must give each change its own outcome (a
// subtransaction catching the errors that concern one change alone), so
// that one change does not undo its neighbours. Any other error, or a
// commit that fails, fails the group: then each of its changes runs
// again alone, in its caller (outside the slots), and gets its own
// result or error. A change is answered only
// after its group's commit has returned; the caller's cancellation does
// not stop its group (the statement timeout bounds it).
type Group[P, R any] struct {
	opts     GroupOptions
	alone    func(ctx context.Context, p P) (R, error)
	together func(ctx context.Context, ps []P) ([]R, error)

	sizes   prometheus.Histogram
	waiting prometheus.Gauge
	failed  prometheus.Counter

	mu      sync.Mutex
	queue   []*groupCall[P, R]
	running int
}

// GroupOptions configure a Group.
type GroupOptions struct {
	// Statement names the group's statement in its metrics.
	Statement string
	// Max is the most changes committed together (1: each alone; 0:
	// DefaultGroupMax). Slots is how many groups run at once (0: 1).
	Max, Slots int
}

// DefaultGroupMax is GroupOptions.Max when unset: well below the 64
// subtransactions a transaction holds before every snapshot slows.
const DefaultGroupMax = 32

type groupCall[P, R any] struct {
	ctx    context.Context //nolint:containedctx // the request's, for the group's trace
	params P
	done   chan struct{}
	result R
	err    error
	// alone: the group failed; the caller runs the change by itself.
	alone bool
}

// NewGroup returns a group that runs one change with alone and several
// with together, which returns one result per change, in order.
func NewGroup[P, R any](opts GroupOptions, alone func(ctx context.Context, p P) (R, error), together func(ctx context.Context, ps []P) ([]R, error)) *Group[P, R] {
	if opts.Max <= 0 {
		opts.Max = DefaultGroupMax
	}
	opts.Slots = max(opts.Slots, 1)
	labels := prometheus.Labels{"statement": opts.Statement}
	return &Group[P, R]{
		opts: opts, alone: alone, together: together,
		sizes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "takeout_db_group_commit_size",
			Help:        "Changes committed together by one group commit.",
			Buckets:     []float64{1, 2, 4, 8, 16, 32, 64},
			ConstLabels: labels,
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "takeout_db_group_commit_waiting",
			Help:        "Changes waiting for a group commit slot.",
			ConstLabels: labels,
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "takeout_db_group_commit_failures_total",
			Help:        "Group commits that failed as a whole; their changes ran again one by one.",
			ConstLabels: labels,
		}),
	}
}

// Collectors are the group's metrics, to register.
func (g *Group[P, R]) Collectors() []prometheus.Collector {
	return []prometheus.Collector{g.sizes, g.waiting, g.failed}
}

// Do runs one change, with whichever others are waiting, and returns its
// result once the transaction that made it has committed.
func (g *Group[P, R]) Do(ctx context.Context, p P) (R, error) {
	if g.opts.Max == 1 {
		return g.alone(ctx, p)
	}
	c := &groupCall[P, R]{ctx: ctx, params: p, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	g.waiting.Set(float64(len(g.queue)))
	start := g.running < g.opts.Slots
	if start {
		g.running++
	}
	g.mu.Unlock()
	if start {
		go g.drain()
	}
	<-c.done
	if c.alone {
		return g.alone(ctx, p)
	}
	return c.result, c.err
}

// drain sends the waiting changes, up to Max at a time, until none is
// left.
func (g *Group[P, R]) drain() {
	for {
		g.mu.Lock()
		n := min(len(g.queue), g.opts.Max)
		if n == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		group := make([]*groupCall[P, R], n)
		copy(group, g.queue)
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.waiting.Set(float64(len(g.queue)))
		g.mu.Unlock()
		g.send(group)
	}
}

// send commits group and answers each of its calls.
func (g *Group[P, R]) send(group []*groupCall[P, R]) {
	defer func() {
		for _, c := range group {
			close(c.done)
		}
	}()
	g.sizes.Observe(float64(len(group)))
	// The group's statements run for all its callers: the first one's
	// trace shows them, and no caller's cancellation stops them.
	ctx := context.WithoutCancel(group[0].ctx)
	if len(group) == 1 {
		c := group[0]
		c.result, c.err = g.alone(ctx, c.params)
		return
	}
	params := make([]P, len(group))
	for i, c := range group {
		params[i] = c.params
	}
	results, err := g.together(ctx, params)
	if err == nil && len(results) != len(group) {
		err = errGroupResults
	}
	if err != nil {
		// Nothing of the group is committed, or, if the connection broke
		// at the commit, perhaps all of it: each change, run alone, finds
		// what it made or makes it.
		g.failed.Inc()
		for _, c := range group {
			c.alone = true
		}
		return
	}
	for i, c := range group {
		c.result = results[i]
	}
}

var errGroupResults = errors.New("group commit: not one result per change")

// BatchOne is what sqlc generates for a :batchone query: each statement's
// row in turn, then the batch's end (for a group, its commit).
type BatchOne[T any] interface {
	QueryRow(f func(i int, row T, err error))
	Close() error
}

// BatchRows reads the n rows of a :batchone batch, for a Group's together
// function: every row, or the first error of a row or of the commit.
func BatchRows[T any](n int, results BatchOne[T]) ([]T, error) {
	out := make([]T, n)
	var err error
	results.QueryRow(func(i int, row T, rowErr error) {
		if rowErr != nil {
			err = errors.Join(err, rowErr)
			return
		}
		out[i] = row
	})
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
