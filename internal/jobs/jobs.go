// Package jobs runs takeout's background jobs on River: jobs are inserted
// in the transaction that causes them, retried with backoff, and discarded
// after their last attempt. Discarded jobs are the dead letters: admins
// list them and retry one through the API.
package jobs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
)

// Client is the River client of this instance.
type Client = river.Client[pgx.Tx]

// Options configure New.
type Options struct {
	Pool *pgxpool.Pool
	// SweepLocks is the pool the sweeps' advisory locks are held on (at
	// most SweepLockConns connections), apart from Pool, whose
	// connections a sweep's lock would otherwise take from requests for
	// as long as the sweep runs; nil means Pool.
	SweepLocks *pgxpool.Pool
	Logger     *slog.Logger
	// Workers registers every job kind's worker.
	Workers *river.Workers
	// Periodic jobs run on the elected leader only.
	Periodic    []*river.PeriodicJob
	MaxWorkers  int
	MaxAttempts int
	// PollInterval is how often workers look for due jobs besides
	// LISTEN/NOTIFY (and for retries, which are not notified).
	PollInterval time.Duration
	// RetryMaxDelay caps the exponential backoff between attempts (jobs
	// with their own NextRetry, like webhooks, keep theirs).
	RetryMaxDelay time.Duration
	// RescueAfter is how long a job may stay running before it is taken
	// for orphaned (its instance crashed) and run again; a job's own run
	// is limited to half of it.
	RescueAfter time.Duration
	Registerer  prometheus.Registerer
	// Middleware wraps every insert and every job's run (tracing).
	Middleware []rivertype.Middleware
	// Kinds are the job kinds whose failure and dead-letter series exist
	// from the start, at 0 (alerts take their increase).
	Kinds []string
}

// CappedBackoff is the retry policy: 1s, 2s, 4s, ... doubling up to Max,
// with up to 10% jitter. River's default (attempt^4 seconds) leaves a
// refund or a pay-deadline cancel waiting minutes after a database blip
// of a second; these jobs fail for transient reasons and should come back
// soon, and Max still spreads a long outage over many attempts.
type CappedBackoff struct {
	Max time.Duration
}

// NextRetry implements river.ClientRetryPolicy.
func (b CappedBackoff) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(b.delay(job.Attempt))
}

func (b CappedBackoff) delay(attempt int) time.Duration {
	d := b.Max
	if attempt >= 1 && attempt <= 30 {
		d = min(time.Second<<(attempt-1), b.Max)
	}
	return d + rand.N(d/10+1) //nolint:gosec // G404: jitter, not a secret
}

// NewInserter returns a River client that only inserts jobs. It needs no
// workers, so it is built before the services that insert jobs in their
// transactions (and whose workers the working client, New, then takes).
// maxAttempts is applied to the jobs it inserts, as New's is.
//
// middleware (tracing, say) wraps every insert, as New's does.
func NewInserter(pool *pgxpool.Pool, logger *slog.Logger, maxAttempts int, middleware ...rivertype.Middleware) (*Client, error) {
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger, MaxAttempts: maxAttempts, Middleware: middleware})
	if err != nil {
		return nil, fmt.Errorf("river insert client: %w", err)
	}
	return c, nil
}

// New returns a River client that works jobs (and can insert them).
func New(opts Options) (*Client, *Metrics, error) {
	c, err := river.NewClient(riverpgxv5.New(opts.Pool), &river.Config{
		Logger:            opts.Logger,
		Workers:           opts.Workers,
		PeriodicJobs:      opts.Periodic,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: opts.MaxWorkers}},
		MaxAttempts:       opts.MaxAttempts,
		FetchPollInterval: opts.PollInterval,
		FetchCooldown:     min(opts.PollInterval, 100*time.Millisecond),
		RetryPolicy:       CappedBackoff{Max: cmp.Or(opts.RetryMaxDelay, 5*time.Minute)},
		// River's default (an hour) would leave a crashed instance's
		// pay-deadline cancel or refund waiting that long.
		RescueStuckJobsAfter: cmp.Or(opts.RescueAfter, 2*time.Minute),
		JobTimeout:           cmp.Or(opts.RescueAfter, 2*time.Minute) / 2,
		// Keep dead letters for an operator to look at.
		DiscardedJobRetentionPeriod: 30 * 24 * time.Hour,
		// The sweep guard innermost: a sweep skipped is traced as one.
		Middleware: append(slices.Clone(opts.Middleware), &sweepGuard{pool: cmp.Or(opts.SweepLocks, opts.Pool)}),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("river client: %w", err)
	}
	m := &Metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_job_failures_total", Help: "Job attempts that failed, by kind.",
		}, []string{"kind"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_jobs_dead_total", Help: "Jobs discarded after their last attempt (dead letters), by kind.",
		}, []string{"kind"}),
	}
	for _, kind := range opts.Kinds {
		m.failures.WithLabelValues(kind)
		m.dead.WithLabelValues(kind)
	}
	if opts.Registerer != nil {
		for _, col := range []prometheus.Collector{m.failures, m.dead} {
			if err := opts.Registerer.Register(col); err != nil {
				return nil, nil, fmt.Errorf("register job metrics: %w", err)
			}
		}
	}
	return c, m, nil
}

// Metrics counts job failures and dead letters.
type Metrics struct {
	failures *prometheus.CounterVec
	dead     *prometheus.CounterVec
}

// Run counts the client's failed and discarded jobs until ctx ends. Start
// it before the client starts working.
func (m *Metrics) Run(ctx context.Context, c *Client) {
	events, cancel := c.Subscribe(river.EventKindJobFailed)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			m.failures.WithLabelValues(ev.Job.Kind).Inc()
			if ev.Job.FinalizedAt != nil {
				m.dead.WithLabelValues(ev.Job.Kind).Inc()
			}
		}
	}
}
