package main

import (
	"context"
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
