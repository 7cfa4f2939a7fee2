package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// backlogSample is the work the system still had to do at one moment of
// a run: what the settle waits for, and the jobs queued for it, so that a
// report shows whether the jobs kept up with the load or fell behind
// (and from when), rather than only what was left at the check.
type backlogSample struct {
	AtS   float64 `json:"at_s"`
	Phase string  `json:"phase"` // load or settle
	// Open is openWork's parts: orders, refunds, shares, tickets and
	// deliveries not yet where they end.
	Open map[string]int `json:"open"`
	// JobsDue are jobs that could run now (available, or a retry or snooze
	// whose time has come), by kind; JobsLater wait for a later time;
	// JobsRunning are being worked.
	JobsDue     map[string]int `json:"jobs_due"`
	JobsLater   int            `json:"jobs_later"`
	JobsRunning int            `json:"jobs_running"`
}

// openWorkParts counts what the system still has to finish on its own,
// by part. It counts what the checks hold the run to: a ticket queued for
// later is open work (a retry waits out its backoff) unless it is a
// scheduled order's first, not due before its slot (checkPrints owes
// none), and a shipping upload is open until it is settled.
func openWorkParts(ctx context.Context, db querier) (map[string]int, error) {
	var pending, refunding, delivering, awaitingAccept, refunds, shares, tickets, deliveries, uploads int
	err := db.QueryRow(ctx, `SELECT
	    (SELECT count(*) FROM orders WHERE status = 'PENDING_PAYMENT'),
	    (SELECT count(*) FROM orders WHERE status = 'REFUNDING'),
	    (SELECT count(*) FROM orders WHERE status = 'DELIVERING'),
	    (SELECT count(*) FROM orders WHERE status = 'PAID' AND accept_by IS NOT NULL),
	    (SELECT count(*) FROM refunds WHERE status IN ('PENDING', 'PROCESSING')),
	    (SELECT count(*) FROM profit_sharings WHERE status IN ('PENDING', 'PROCESSING')),
	    (SELECT count(*) FROM print_jobs j JOIN orders o ON o.id = j.order_id
	      WHERE j.status IN ('queued', 'sent') AND NOT `+ticketNotOwedYet+`),
	    (SELECT count(*) FROM deliveries WHERE status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED')),
	    (SELECT count(*) FROM shipping_uploads WHERE status = 'pending')`).
		Scan(&pending, &refunding, &delivering, &awaitingAccept, &refunds, &shares, &tickets, &deliveries, &uploads)
	return map[string]int{
		"pending_payment": pending, "refunding": refunding, "delivering": delivering, "awaiting_accept": awaitingAccept,
		"refunds": refunds, "shares": shares, "tickets": tickets, "deliveries": deliveries, "uploads": uploads,
	}, err
}

// openWork counts what the system still has to finish on its own.
func openWork(ctx context.Context, db querier) (int, error) {
	parts, err := openWorkParts(ctx, db)
	n := 0
	for _, v := range parts {
		n += v
	}
	return n, err
}

// sampleBacklog reads the backlog now; at is the time into the run.
func sampleBacklog(ctx context.Context, db querier, at time.Duration, phase string) (backlogSample, error) {
	s := backlogSample{AtS: at.Round(time.Second).Seconds(), Phase: phase, JobsDue: map[string]int{}}
	var err error
	if s.Open, err = openWorkParts(ctx, db); err != nil {
		return s, fmt.Errorf("open work: %w", err)
	}
	rows, err := db.Query(ctx, `SELECT kind,
	    count(*) FILTER (WHERE state = 'available' OR (state IN ('scheduled', 'retryable') AND scheduled_at <= now())),
	    count(*) FILTER (WHERE state IN ('scheduled', 'retryable') AND scheduled_at > now()),
	    count(*) FILTER (WHERE state = 'running')
	  FROM river_job WHERE state IN ('available', 'scheduled', 'retryable', 'running') GROUP BY kind`)
	if err != nil {
		return s, fmt.Errorf("jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var due, later, running int
		if err := rows.Scan(&kind, &due, &later, &running); err != nil {
			return s, err
		}
		if due > 0 {
			s.JobsDue[kind] = due
		}
		s.JobsLater += later
		s.JobsRunning += running
	}
	return s, rows.Err()
}

// backlogMarkdown writes the backlog section: one row a sample.
func backlogMarkdown(b *strings.Builder, samples []backlogSample) {
	if len(samples) == 0 {
		return
	}
	b.WriteString("\n## Backlog\n\nWhat was still to do, sampled during the load and the settle: orders refunding, refunds and profit shares open, tickets not printed; jobs due now (the kinds with most), waiting for a later time, and running.\n\n")
	b.WriteString("| at s | phase | refunding | refunds | shares | tickets | deliveries | awaiting accept | jobs due | most due | later | running |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
	for _, s := range samples {
		due := 0
		kinds := make([]string, 0, len(s.JobsDue))
		for k, n := range s.JobsDue {
			due += n
			kinds = append(kinds, k)
		}
		sort.Slice(kinds, func(i, j int) bool { return s.JobsDue[kinds[i]] > s.JobsDue[kinds[j]] })
		var top []string
		for _, k := range kinds[:min(3, len(kinds))] {
			top = append(top, fmt.Sprintf("%s %d", k, s.JobsDue[k]))
		}
		fmt.Fprintf(b, "| %.0f | %s | %d | %d | %d | %d | %d | %d | %d | %s | %d | %d |\n", s.AtS, s.Phase,
			s.Open["refunding"], s.Open["refunds"], s.Open["shares"], s.Open["tickets"], s.Open["deliveries"], s.Open["awaiting_accept"],
			due, strings.Join(top, ", "), s.JobsLater, s.JobsRunning)
	}
}
