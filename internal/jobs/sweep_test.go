package jobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/testenv"
)

type slowSweepArgs struct{}

func (slowSweepArgs) Kind() string { return "test.slow_sweep" }

// slowSweep takes ten of its intervals to run, as a sweep does when its
// provider is slow.
type slowSweep struct {
	river.WorkerDefaults[slowSweepArgs]
	runs, atWork, mostAtWork *atomic.Int32
}

func (w slowSweep) Work(ctx context.Context, _ *river.Job[slowSweepArgs]) error {
	w.runs.Add(1)
	n := w.atWork.Add(1)
	defer w.atWork.Add(-1)
	for m := w.mostAtWork.Load(); n > m && !w.mostAtWork.CompareAndSwap(m, n); m = w.mostAtWork.Load() {
	}
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
	}
	return nil
}

type failingSweepArgs struct{}

func (failingSweepArgs) Kind() string { return "test.failing_sweep" }

// failingSweep fails its first run and waits an hour to retry it, as a
// sweep does that met a database outage under a long backoff.
type failingSweep struct {
	river.WorkerDefaults[failingSweepArgs]
	runs *atomic.Int32
}

func (w failingSweep) Work(context.Context, *river.Job[failingSweepArgs]) error {
	if w.runs.Add(1) == 1 {
		return errors.New("the database went away")
	}
	return nil
}

func (failingSweep) NextRetry(*river.Job[failingSweepArgs]) time.Time {
	return time.Now().Add(time.Hour)
}

// startSweeps runs a jobs client with workers and periodic jobs on pool
// until the test ends.
func startSweeps(t *testing.T, pool *pgxpool.Pool, workers *river.Workers, periodic ...*river.PeriodicJob) {
	t.Helper()
	c, _, err := New(Options{
		Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Workers: workers, MaxWorkers: 4, MaxAttempts: 3,
		PollInterval: 20 * time.Millisecond, Periodic: periodic,
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
}

// A sweep slower than its interval works again and again, one copy at a
// time, and the copies queued while it works do not pile up behind it:
// each finds it at work and ends.
func TestSweepNeverPilesUp(t *testing.T) {
	t.Parallel()
	pool := testenv.NewDB(t)
	workers := river.NewWorkers()
	var runs, atWork, mostAtWork atomic.Int32
	river.AddWorker(workers, slowSweep{runs: &runs, atWork: &atWork, mostAtWork: &mostAtWork})
	startSweeps(t, pool, workers, Sweep(50*time.Millisecond, func() river.JobArgs { return slowSweepArgs{} }, true))
	ctx := context.Background()
	mostOpen := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end) || runs.Load() < 2; {
		var open int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'test.slow_sweep'
		    AND state NOT IN ('completed', 'discarded', 'cancelled')`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		mostOpen = max(mostOpen, open)
		if time.Now().After(end.Add(20 * time.Second)) {
			t.Fatalf("the sweep ran %d times in 23 s", runs.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Copies that found the sweep at work end without working; on a
	// loaded machine the first may end some time after the window.
	skipped := 0
	for end := time.Now().Add(20 * time.Second); skipped < 1 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var completed int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'test.slow_sweep' AND state = 'completed'`).Scan(&completed); err != nil {
			t.Fatal(err)
		}
		skipped = completed - int(runs.Load())
	}
	if n := mostAtWork.Load(); n != 1 {
		t.Errorf("%d copies of the sweep at work at once, want 1", n)
	}
	// Ticks every 50 ms against a sweep of 500 ms: copies come faster
	// than the sweep works; they end at once rather than wait. Piled up,
	// every tick of the window (60 and more) would be open at its end;
	// a second's ticks (20) is what a slow fetch on a busy machine holds.
	if mostOpen > 20 || skipped < 1 {
		t.Errorf("at most %d copies open at once, %d ended without working; want a few open, and copies that ended", mostOpen, skipped)
	}
}

// A sweep that failed and waits to retry does not hold the next tick
// back: a fresh one is queued and runs while the failed one waits.
func TestFailedSweepDoesNotBlockTheNext(t *testing.T) {
	t.Parallel()
	pool := testenv.NewDB(t)
	workers := river.NewWorkers()
	var runs atomic.Int32
	river.AddWorker(workers, failingSweep{runs: &runs})
	startSweeps(t, pool, workers, Sweep(50*time.Millisecond, func() river.JobArgs { return failingSweepArgs{} }, true))
	for deadline := time.Now().Add(20 * time.Second); runs.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sweep ran %d times in 20 s: the failed one, waiting an hour to retry, blocked the ticks", runs.Load())
		}
	}
	// The failed one is set aside for its retry (River records a job's
	// end a moment after it).
	var state string
	var attempt int
	for deadline := time.Now().Add(10 * time.Second); state == "" || state == "running" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := pool.QueryRow(context.Background(), `SELECT state, attempt FROM river_job
		    WHERE kind = 'test.failing_sweep' ORDER BY id LIMIT 1`).Scan(&state, &attempt); err != nil {
			t.Fatal(err)
		}
	}
	if state != "retryable" || attempt != 1 {
		t.Errorf("the failed sweep: %s after attempt %d; want retryable after 1", state, attempt)
	}
}

// A sweep's lock dies with its connection: while another session holds
// it the sweep's copies end without working, and once that session is
// gone (its instance killed mid-sweep) the next copy works.
func TestSweepLockDiesWithItsConnection(t *testing.T) {
	t.Parallel()
	pool := testenv.NewDB(t)
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext($2))`, sweepLockClass, slowSweepArgs{}.Kind()); err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	var runs, atWork, mostAtWork atomic.Int32
	river.AddWorker(workers, slowSweep{runs: &runs, atWork: &atWork, mostAtWork: &mostAtWork})
	startSweeps(t, pool, workers, Sweep(50*time.Millisecond, func() river.JobArgs { return slowSweepArgs{} }, true))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var ended int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'test.slow_sweep' AND state = 'completed'`).Scan(&ended); err != nil {
			t.Fatal(err)
		}
		if ended >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d copies ended in 20 s while the lock was held elsewhere", ended)
		}
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("the sweep worked %d times while another session held its lock", n)
	}
	if err := holder.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); runs.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sweep never worked after the lock's session was gone")
		}
	}
}
