package jobs

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/testenv"
)

type slowSweepArgs struct{}

func (slowSweepArgs) Kind() string { return "test.slow_sweep" }

// slowSweep takes ten of its intervals to run, as a sweep does when its
// provider is slow.
type slowSweep struct {
	river.WorkerDefaults[slowSweepArgs]
	runs *atomic.Int32
}

func (w slowSweep) Work(ctx context.Context, _ *river.Job[slowSweepArgs]) error {
	w.runs.Add(1)
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
	}
	return nil
}

// A sweep slower than its interval runs again and again, but never has a
// second copy queued behind the running one.
func TestSweepNeverPilesUp(t *testing.T) {
	t.Parallel()
	pool := testenv.NewDB(t)
	workers := river.NewWorkers()
	var runs atomic.Int32
	river.AddWorker(workers, slowSweep{runs: &runs})
	c, _, err := New(Options{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Workers: workers, MaxWorkers: 4, MaxAttempts: 3,
		PollInterval: 20 * time.Millisecond,
		Periodic:     []*river.PeriodicJob{Sweep(50*time.Millisecond, func() river.JobArgs { return slowSweepArgs{} }, true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		stopCtx, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = c.Stop(stopCtx)
	})
	most := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end) || runs.Load() < 2; {
		var open int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'test.slow_sweep'
		    AND state NOT IN ('completed', 'discarded', 'cancelled')`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		most = max(most, open)
		if time.Now().After(end.Add(20 * time.Second)) {
			t.Fatalf("the sweep ran %d times in 23 s", runs.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if most != 1 {
		t.Errorf("at most %d sweeps open at once, want 1", most)
	}
}
