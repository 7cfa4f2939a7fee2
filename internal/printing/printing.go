// Package printing prints an accepted order's tickets on its merchant's
// cloud printers: a kitchen ticket on each kitchen printer whose
// categories the order has dishes of, and the receipt for the counter.
//
// The tickets are an outbox: the transaction that accepts an order
// inserts them (QueueTx, the order's QueuePrints effect), so an accepted
// order always has them and a rolled-back accept never prints. A
// periodic sweep leases the tickets due and queues a River job for
// each; the job sends a queued ticket under its deterministic id
// (TicketID), or asks the provider about a sent one. A ticket is
// printed only when the provider's signed callback or a query says so.
// A send whose outcome is unknown (a timeout) is sent again under the
// same id to a provider that answers a repeated id with the earlier
// result (Yilianyun's origin_id, within its window); to one without
// (Feie) it goes again as the next attempt, printed "重打 #2": the
// kitchen may hold two, and the second says so. Each send writes its
// attempt before the call, so a process dying in it leaves the same
// trace as a timeout.
package printing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// Ticket statuses, as print_jobs.status holds them.
const (
	StatusQueued  = "queued"
	StatusSent    = "sent"
	StatusPrinted = "printed"
	StatusFailed  = "failed"
	// StatusLate is the list filter of tickets not printed by their
	// print_by.
	StatusLate = "late"
)

// JobInserter inserts jobs in a transaction (a River client).
type JobInserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Options configure a Service.
type Options struct {
	Pool   *pgxpool.Pool
	Jobs   JobInserter
	Logger *slog.Logger
	// Providers by name; a printer of a provider not here fails its
	// tickets with a message saying so.
	Providers  []Provider
	Registerer prometheus.Registerer
	Now        func() time.Time
	// PrintWithin is how long after the accept a ticket should be out:
	// later, it is late on the board and in GET /admin/v1/prints.
	PrintWithin time.Duration
	// ConfirmAfter is how long a sent ticket waits for its callback
	// before the provider is asked.
	ConfirmAfter time.Duration
	// RetryMax caps the wait between tries.
	RetryMax time.Duration
	// GiveUpAfter is how long after its first send a ticket is still
	// tried or asked about; then it fails, for an operator to reprint.
	GiveUpAfter time.Duration
	// Lease is how long a swept ticket is left to the job queued for it.
	Lease time.Duration
}

// Service prints tickets.
type Service struct {
	opts      Options
	q         *dbsqlc.Queries
	providers map[string]Provider
	tickets   *prometheus.CounterVec
	callbacks *prometheus.CounterVec
}

// NewService returns a Service with defaults for what opts leaves zero.
func NewService(opts Options) (*Service, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	defaults := []struct {
		d *time.Duration
		v time.Duration
	}{
		{&opts.PrintWithin, 2 * time.Minute}, {&opts.ConfirmAfter, 15 * time.Second}, {&opts.RetryMax, time.Minute},
		{&opts.GiveUpAfter, time.Hour}, {&opts.Lease, time.Minute},
	}
	for _, d := range defaults {
		if *d.d <= 0 {
			*d.d = d.v
		}
	}
	s := &Service{opts: opts, q: dbsqlc.New(), providers: map[string]Provider{},
		tickets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_print_tickets_total",
			Help: "Print tickets' steps by provider: sent (the provider took it), printed, retried (a send that did not go through), unknown (a send whose outcome is unknown), failed (given up).",
		}, []string{"provider", "outcome"}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_print_callbacks_total",
			Help: "Printer providers' callbacks: printed, repeated (already printed), not_printed, unknown (no such ticket yet), rejected (bad signature or fields).",
		}, []string{"provider", "outcome"}),
	}
	for _, p := range opts.Providers {
		s.providers[p.Name()] = p
	}
	// Every series exists from the start, at 0, configured or not: an
	// alert's increase() sees the first failure.
	for _, name := range []string{"yilianyun", "feie"} {
		for _, o := range []string{"sent", "printed", "retried", "unknown", "failed"} {
			s.tickets.WithLabelValues(name, o)
		}
		for _, o := range []string{"printed", "repeated", "not_printed", "unknown", "rejected"} {
			s.callbacks.WithLabelValues(name, o)
		}
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{s.tickets, s.callbacks} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register print metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Provider returns the named provider, if configured.
func (s *Service) Provider(name string) (Provider, bool) {
	p, ok := s.providers[name]
	return p, ok
}

// QueueTx inserts the tickets an order accepted in tx owes its
// merchant's printers (none without printers). A scheduled order's wait
// until its merchant's time before its slot.
func (s *Service) QueueTx(ctx context.Context, tx pgx.Tx, orderID, merchantID int64) error {
	now := s.opts.Now()
	if _, err := s.q.PrintJobsQueueForOrder(ctx, tx, dbsqlc.PrintJobsQueueForOrderParams{
		OrderID: orderID, MerchantID: merchantID, PrintWithinSeconds: s.opts.PrintWithin.Seconds(), Now: now,
	}); err != nil {
		return fmt.Errorf("queue print tickets: %w", err)
	}
	return nil
}

// SweepArgs is the periodic job that queues a DeliverArgs job for each
// ticket due to be sent or asked about.
type SweepArgs struct{}

// Kind names the job.
func (SweepArgs) Kind() string { return "print.sweep" }

// DeliverArgs is the job that sends one ticket or asks about it.
type DeliverArgs struct {
	PrintJobID int64 `json:"print_job_id,string"`
}

// Kind names the job.
func (DeliverArgs) Kind() string { return "print.deliver" }

// deliverUnique keeps one job per ticket waiting or running; a completed
// one does not count, so a ticket can be queued again for its next try.
var deliverUnique = river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{ //nolint:gochecknoglobals // a constant of River's type
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}}

// sweepBatch is how many tickets one transaction of the sweep leases.
const sweepBatch = 200

// Sweep leases the tickets due and queues their jobs, a batch per
// transaction; it returns how many it queued.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	queued := 0
	for {
		now := s.opts.Now()
		n, err := db.WithTxV(ctx, s.opts.Pool, func(tx pgx.Tx) (int, error) {
			ids, err := s.q.PrintJobsLeaseDue(ctx, tx, dbsqlc.PrintJobsLeaseDueParams{Now: now, MaxRows: sweepBatch, LeaseUntil: now.Add(s.opts.Lease)})
			if err != nil {
				return 0, fmt.Errorf("lease print tickets: %w", err)
			}
			for _, id := range ids {
				if _, err := s.opts.Jobs.InsertTx(ctx, tx, DeliverArgs{PrintJobID: id}, &river.InsertOpts{UniqueOpts: deliverUnique}); err != nil {
					return 0, fmt.Errorf("queue print ticket: %w", err)
				}
			}
			return len(ids), nil
		})
		queued += n
		if err != nil || n < sweepBatch {
			return queued, err
		}
	}
}

// Deliver sends one ticket, or asks the provider about a sent one, and
// records what it learned. It returns an error only when it could not
// record it (River tries again); a provider's failure is the ticket's,
// tried again at its next_try_at.
func (s *Service) Deliver(ctx context.Context, id int64) error {
	row, err := s.q.PrintJobGet(ctx, s.opts.Pool, id)
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read print ticket: %w", err)
	}
	j, p := row.PrintJob, row.Printer
	prov, ok := s.providers[p.Provider]
	switch {
	case j.Status == StatusPrinted || j.Status == StatusFailed:
		return nil
	case !ok:
		return s.fail(ctx, j, p.Provider, "provider "+p.Provider+" is not configured")
	case j.Status == StatusSent:
		return s.confirm(ctx, prov, j, p)
	default:
		return s.send(ctx, prov, j, p)
	}
}

// send sends a queued ticket as its attempt.
func (s *Service) send(ctx context.Context, prov Provider, j dbsqlc.PrintJob, p dbsqlc.Printer) error {
	now := s.opts.Now()
	if j.FirstSentAt != nil && now.Sub(*j.FirstSentAt) > s.opts.GiveUpAfter {
		return s.fail(ctx, j, p.Provider, "not printed within "+s.opts.GiveUpAfter.String()+": "+j.LastError)
	}
	// Write the attempt before the call: should this process die before
	// it records the outcome, the next try knows a paper may be out.
	attempt := j.Attempt
	if j.AttemptOut >= j.Attempt && !s.sameIDSafe(prov, j, now) {
		attempt = min(j.Attempt+1, 99)
	}
	n, err := s.q.PrintJobSending(ctx, s.opts.Pool, dbsqlc.PrintJobSendingParams{ID: j.ID, Attempt: j.Attempt, NextAttempt: attempt, Now: now})
	if err != nil || n == 0 {
		return wrap("record the ticket going out", err)
	}
	if j.FirstSentAt == nil {
		j.FirstSentAt = &now
	}
	j.Attempt, j.AttemptOut = attempt, attempt
	content, err := s.render(ctx, j, p)
	if err != nil {
		return err
	}
	ref, err := prov.Print(ctx, p.Device, TicketID(j.OrderID, j.PrinterID, j.Seq, j.Attempt), content)
	now = s.opts.Now()
	if err == nil {
		s.tickets.WithLabelValues(p.Provider, "sent").Inc()
		_, err := s.q.PrintJobSent(ctx, s.opts.Pool, dbsqlc.PrintJobSentParams{
			ID: j.ID, Attempt: j.Attempt, ProviderRef: &ref, Now: now, NextTryAt: now.Add(s.opts.ConfirmAfter),
		})
		return wrap("record the ticket sent", err)
	}
	next, maybeSent, outcome := j.Attempt, false, "retried"
	if !notPrinted(err) {
		// The paper may have come out. The same id is safe again while
		// the provider remembers it; otherwise the next paper says it
		// may be a second one.
		outcome, maybeSent = "unknown", true
		if !s.sameIDSafe(prov, j, now) {
			next = min(j.Attempt+1, 99)
		}
	}
	s.tickets.WithLabelValues(p.Provider, outcome).Inc()
	s.opts.Logger.WarnContext(ctx, "print ticket not sent", "ticket", j.ID, "order", j.OrderID, "provider", p.Provider, "outcome", outcome, "err", err)
	_, err = s.q.PrintJobRetry(ctx, s.opts.Pool, dbsqlc.PrintJobRetryParams{
		ID: j.ID, Attempt: j.Attempt, NextAttempt: next, NextTryAt: now.Add(s.backoff(j.Tries)),
		LastError: truncate(err.Error()), MaybeSent: maybeSent, Now: now,
	})
	return wrap("record the ticket's retry", err)
}

// sameIDSafe reports whether the ticket's id, sent before, can go again
// without a second paper: its provider answers a repeat within its
// idempotency window with the earlier result (kept 5 minutes clear of
// the window's end, for the clocks and the request in flight).
func (s *Service) sameIDSafe(prov Provider, j dbsqlc.PrintJob, now time.Time) bool {
	w := prov.IdempotencyWindow()
	return w > 0 && (j.FirstSentAt == nil || now.Sub(*j.FirstSentAt) <= w-5*time.Minute)
}

// confirm asks the provider whether a sent ticket came out.
func (s *Service) confirm(ctx context.Context, prov Provider, j dbsqlc.PrintJob, p dbsqlc.Printer) error {
	if j.ProviderRef == nil {
		return s.fail(ctx, j, p.Provider, "sent without the provider's id")
	}
	printed, err := prov.Query(ctx, p.Device, *j.ProviderRef)
	now := s.opts.Now()
	if err == nil && printed {
		n, err := s.q.PrintJobPrinted(ctx, s.opts.Pool, dbsqlc.PrintJobPrintedParams{ID: j.ID, PrintedAt: &now})
		if n == 1 {
			s.tickets.WithLabelValues(p.Provider, "printed").Inc()
		}
		return wrap("record the ticket printed", err)
	}
	if j.FirstSentAt != nil && now.Sub(*j.FirstSentAt) > s.opts.GiveUpAfter {
		return s.fail(ctx, j, p.Provider, "not printed within "+s.opts.GiveUpAfter.String())
	}
	msg := "sent, not printed yet"
	if err != nil {
		msg = truncate(err.Error())
	}
	_, err = s.q.PrintJobConfirmLater(ctx, s.opts.Pool, dbsqlc.PrintJobConfirmLaterParams{
		ID: j.ID, NextTryAt: now.Add(max(s.backoff(j.Tries), s.opts.ConfirmAfter/3)), LastError: msg, Now: now,
	})
	return wrap("record the ticket's query", err)
}

func (s *Service) fail(ctx context.Context, j dbsqlc.PrintJob, provider, why string) error {
	s.tickets.WithLabelValues(provider, "failed").Inc()
	s.opts.Logger.ErrorContext(ctx, "print ticket failed", "ticket", j.ID, "order", j.OrderID, "provider", provider, "why", why)
	_, err := s.q.PrintJobFailed(ctx, s.opts.Pool, dbsqlc.PrintJobFailedParams{ID: j.ID, LastError: truncate(why), Now: s.opts.Now()})
	return wrap("record the ticket failed", err)
}

// backoff is the wait before try n+1: doubling from a second, capped,
// with jitter.
func (s *Service) backoff(tries int32) time.Duration {
	d := time.Second << min(tries, 10)
	d = min(d, s.opts.RetryMax)
	return d/2 + rand.N(d/2+1) //nolint:gosec // G404: jitter
}

func (s *Service) render(ctx context.Context, j dbsqlc.PrintJob, p dbsqlc.Printer) (string, error) {
	o, err := s.q.PrintTicketOrder(ctx, s.opts.Pool, j.OrderID)
	if err != nil {
		return "", fmt.Errorf("read the ticket's order: %w", err)
	}
	lines, err := s.q.PrintTicketLines(ctx, s.opts.Pool, j.OrderID)
	if err != nil {
		return "", fmt.Errorf("read the ticket's lines: %w", err)
	}
	return ticket{job: j, printer: p, order: o, lines: lines}.render(), nil
}

// HandleCallback records what a provider's verified callback says. ok
// false asks the provider to send it again (the ticket is not known
// yet: the write of its send has not committed).
func (s *Service) HandleCallback(ctx context.Context, prov Provider, cb Callback) (ok bool, err error) {
	var id int64
	if ref, found := ParseTicketID(cb.TicketID); found {
		id, err = s.q.PrintJobFind(ctx, s.opts.Pool, dbsqlc.PrintJobFindParams{
			OrderID: ref.OrderID, PrinterID: ref.PrinterID, Seq: ref.Seq, Provider: prov.Name(), Device: cb.Device,
		})
	} else {
		id, err = s.q.PrintJobByRef(ctx, s.opts.Pool, dbsqlc.PrintJobByRefParams{Provider: prov.Name(), Device: cb.Device, ProviderRef: &cb.Ref})
	}
	if errors.Is(err, db.ErrNotFound) {
		s.callbacks.WithLabelValues(prov.Name(), "unknown").Inc()
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find the ticket: %w", err)
	}
	if !cb.Printed {
		s.callbacks.WithLabelValues(prov.Name(), "not_printed").Inc()
		return true, nil
	}
	at := s.opts.Now()
	n, err := s.q.PrintJobPrinted(ctx, s.opts.Pool, dbsqlc.PrintJobPrintedParams{ID: id, PrintedAt: &at, ProviderRef: &cb.Ref})
	if err != nil {
		return false, fmt.Errorf("record the ticket printed: %w", err)
	}
	if n == 0 {
		s.callbacks.WithLabelValues(prov.Name(), "repeated").Inc()
		return true, nil
	}
	s.callbacks.WithLabelValues(prov.Name(), "printed").Inc()
	s.tickets.WithLabelValues(prov.Name(), "printed").Inc()
	return true, nil
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 500 {
		return s[:500]
	}
	return s
}

// sweepWorker runs the sweep.
type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	s *Service
}

func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	_, err := w.s.Sweep(ctx)
	return err
}

// deliverWorker runs Deliver.
type deliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	s *Service
}

func (w *deliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	return w.s.Deliver(ctx, job.Args.PrintJobID)
}

// Timeout bounds one delivery: a provider's call and the writes.
func (w *deliverWorker) Timeout(*river.Job[DeliverArgs]) time.Duration { return 30 * time.Second }

// AddWorkers registers the sweep's and the deliveries' workers.
func (s *Service) AddWorkers(w *river.Workers) {
	river.AddWorker(w, &sweepWorker{s: s})
	river.AddWorker(w, &deliverWorker{s: s})
}

// Begin starts a transaction on the service's pool (db.Beginner).
func (s *Service) Begin(ctx context.Context) (pgx.Tx, error) { return s.opts.Pool.Begin(ctx) }
