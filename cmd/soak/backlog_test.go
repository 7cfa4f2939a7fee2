package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/testenv"
)

// The backlog sample tells jobs that could run now from jobs waiting for
// their time, and counts the open orders the settle waits for.
func TestSampleBacklog(t *testing.T) {
	t.Parallel()
	pool := testenv.NewDB(t)
	consistentShop(t, pool) // one order PENDING_PAYMENT
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO river_job (kind, args, max_attempts, state) VALUES
		   ('payment.refund', '{}', 5, 'available'), ('payment.refund', '{}', 5, 'available'),
		   ('sharing.share', '{}', 5, 'available')`,
		`INSERT INTO river_job (kind, args, max_attempts, state, scheduled_at) VALUES
		   ('payment.refund', '{}', 5, 'retryable', now() - interval '1 second'),
		   ('payment.refund', '{}', 5, 'scheduled', now() + interval '1 hour'),
		   ('print.deliver', '{}', 5, 'retryable', now() + interval '1 minute')`,
		`INSERT INTO river_job (kind, args, max_attempts, state, attempt, attempted_at) VALUES ('print.deliver', '{}', 5, 'running', 1, now())`,
		`INSERT INTO river_job (kind, args, max_attempts, state, finalized_at) VALUES ('print.deliver', '{}', 5, 'completed', now())`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := sampleBacklog(ctx, pool, 0, "load")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"payment.refund": 3, "sharing.share": 1}, s.JobsDue); diff != "" {
		t.Errorf("jobs due (-want +got):\n%s", diff)
	}
	if s.JobsLater != 2 || s.JobsRunning != 1 {
		t.Errorf("later %d, running %d; want 2, 1", s.JobsLater, s.JobsRunning)
	}
	if s.Open["pending_payment"] != 1 {
		t.Errorf("open %v, want the pending order", s.Open)
	}
	var b strings.Builder
	backlogMarkdown(&b, []backlogSample{s})
	if !strings.Contains(b.String(), "| 0 | load | 0 | 0 | 0 | 0 | 0 | 0 | 4 | payment.refund 3, sharing.share 1 | 2 | 1 |") {
		t.Errorf("backlog table:\n%s", b.String())
	}
}

// The settle waits for what the checks hold the run to: a ticket waiting
// out a retry's backoff and a pending shipping upload are open work; a
// scheduled order's first ticket, not due before its slot, is not.
func TestOpenWorkCountsWhatTheChecksOwe(t *testing.T) {
	t.Parallel()
	printer := `INSERT INTO printers (merchant_id, name, provider, device, role) SELECT id, 'K', 'feie', 'DEV1', 'kitchen' FROM merchants`
	ticket := func(tries int, nextTry string) string {
		return fmt.Sprintf(`INSERT INTO print_jobs (order_id, merchant_id, printer_id, trigger, status, tries, next_try_at, print_by)
		  SELECT 1001, merchant_id, id, 'accept', 'queued', %d, now() + interval '%s', now() + interval '1 hour' FROM printers`, tries, nextTry)
	}
	scheduled := `UPDATE orders SET slot_start = now() + interval '1 hour', slot_end = now() + interval '90 minutes'`
	for _, tc := range []struct {
		name          string
		plant         []string
		tickets, upls int
	}{
		{name: "a ticket due", plant: []string{printer, ticket(0, "0 seconds")}, tickets: 1},
		{name: "a ticket waiting out its backoff", plant: []string{printer, ticket(2, "1 minute")}, tickets: 1},
		{name: "a scheduled order's ticket before its slot", plant: []string{scheduled, printer, ticket(0, "50 minutes")}},
		{name: "a scheduled order's ticket retrying", plant: []string{scheduled, printer, ticket(1, "1 minute")}, tickets: 1},
		{name: "a pending upload", plant: []string{`INSERT INTO shipping_uploads (order_id, logistics_type) VALUES (1001, 2)`}, upls: 1},
		{name: "an upload settled", plant: []string{`INSERT INTO shipping_uploads (order_id, logistics_type, status) VALUES (1001, 2, 'uploaded')`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := plantedShop(t, tc.plant)
			ctx := context.Background()
			parts, err := openWorkParts(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			if parts["tickets"] != tc.tickets || parts["uploads"] != tc.upls {
				t.Errorf("tickets %d, uploads %d; want %d, %d", parts["tickets"], parts["uploads"], tc.tickets, tc.upls)
			}
		})
	}
}
