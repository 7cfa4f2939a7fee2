package order_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/takeout/takeout/internal/order"
)

// The payment-timeout job, written to River's table by the placement's
// own SQL, is a job River lists and decodes like one it inserted: one per
// order, scheduled at the pay deadline, with River's defaults.
func TestPaymentTimeoutJobIsRiverJob(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	var seq atomic.Int64
	placed := map[int64]bool{e.place(t, &seq, e.dishes[0]): true, e.place(t, &seq, e.dishes[1]): true}

	client, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.JobList(ctx, river.NewJobListParams().Kinds(order.PaymentTimeoutArgs{}.Kind()).States(rivertype.JobStateScheduled))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != len(placed) {
		t.Fatalf("%d scheduled payment-timeout jobs, want %d (one per order)", len(res.Jobs), len(placed))
	}
	for _, j := range res.Jobs {
		var args order.PaymentTimeoutArgs
		if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
			t.Fatalf("args %s do not decode as PaymentTimeoutArgs: %v", j.EncodedArgs, err)
		}
		if !placed[args.OrderID] {
			t.Errorf("job for order %d, which was not placed", args.OrderID)
		}
		delete(placed, args.OrderID)
		var deadline time.Time
		if err := e.pool.QueryRow(ctx, "SELECT pay_deadline FROM orders WHERE id = $1", args.OrderID).Scan(&deadline); err != nil {
			t.Fatal(err)
		}
		if !j.ScheduledAt.Equal(deadline) || j.MaxAttempts != 25 || j.Queue != river.QueueDefault || j.Priority != 1 || j.Attempt != 0 {
			t.Errorf("job %+v: want scheduled at %v, 25 attempts, the default queue, priority 1", j, deadline)
		}
	}
}
