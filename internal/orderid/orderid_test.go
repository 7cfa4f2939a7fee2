package orderid_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/orderid"
	"github.com/takeout/takeout/internal/testenv"
)

// Two instances lease worker ids from one database and generate 1M ids
// between them concurrently: no id repeats.
func TestTwoLeasedGeneratorsNeverRepeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	logger := slog.New(slog.DiscardHandler)
	var gens []*orderid.Generator
	for _, holder := range []string{"instance-a", "instance-b"} {
		lease, err := orderid.AcquireLease(ctx, pool, holder, time.Minute, time.Now, logger)
		if err != nil {
			t.Fatal(err)
		}
		g, err := orderid.New(orderid.Options{Worker: lease.Worker(), LeaseValidUntil: lease.ValidUntil})
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, g)
	}
	if gens[0].Worker() == gens[1].Worker() {
		t.Fatalf("both instances leased worker %d", gens[0].Worker())
	}

	const perGen = 500_000
	out := make([][]int64, len(gens))
	var wg sync.WaitGroup
	for i, g := range gens {
		wg.Go(func() {
			ids := make([]int64, 0, perGen)
			for range perGen {
				id, err := g.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				ids = append(ids, id)
			}
			out[i] = ids
		})
	}
	wg.Wait()
	seen := make(map[int64]struct{}, 2*perGen)
	for i, ids := range out {
		for j, id := range ids {
			if _, dup := seen[id]; dup {
				t.Fatalf("id %d repeated", id)
			}
			seen[id] = struct{}{}
			if j > 0 && id <= ids[j-1] {
				t.Fatalf("generator %d: id %d not above %d", i, id, ids[j-1])
			}
			if w := int(id >> 12 & 1023); w != gens[i].Worker() { // time | 10 worker bits | 12 sequence bits
				t.Fatalf("id %d carries worker %d, want %d", id, w, gens[i].Worker())
			}
		}
	}
	if len(seen) != 2*perGen {
		t.Fatalf("%d ids, want %d", len(seen), 2*perGen)
	}
}

// A live lease is never handed out twice; an expired one is.
func TestLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.NewDB(t)
	logger := slog.New(slog.DiscardHandler)
	a, err := orderid.AcquireLease(ctx, pool, "a", 3*time.Second, time.Now, logger)
	if err != nil {
		t.Fatal(err)
	}
	b, err := orderid.AcquireLease(ctx, pool, "b", time.Minute, time.Now, logger)
	if err != nil {
		t.Fatal(err)
	}
	if a.Worker() == b.Worker() {
		t.Fatal("two live leases share a worker id")
	}
	if _, err := pool.Exec(ctx, "UPDATE worker_leases SET expires_at = now() - interval '1s' WHERE holder = 'a'"); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx); err == nil {
		t.Error("renewed an expired lease")
	}
	c, err := orderid.AcquireLease(ctx, pool, "c", time.Minute, time.Now, logger)
	if err != nil {
		t.Fatal(err)
	}
	if c.Worker() != a.Worker() {
		t.Errorf("expired worker id %d not reused (got %d)", a.Worker(), c.Worker())
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func TestClockStepsBackwards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{t: start}
	g, err := orderid.New(orderid.Options{Worker: 7, Now: clock.now, MaxBackwardStep: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first, err := g.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A small step back: Next waits until the clock catches up (the fake
	// clock is moved forward while it waits), and the id still grows.
	clock.set(start.Add(-200 * time.Millisecond))
	go func() {
		time.Sleep(50 * time.Millisecond)
		clock.set(start.Add(time.Millisecond))
	}()
	second, err := g.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second <= first {
		t.Fatalf("after a small step back: %d not above %d", second, first)
	}

	// A big step back: refuse.
	clock.set(start.Add(-time.Hour))
	if _, err := g.Next(ctx); !errors.Is(err, orderid.ErrClockBackwards) {
		t.Fatalf("big step back: %v, want ErrClockBackwards", err)
	}
	clock.set(start.Add(2 * time.Millisecond))
	third, err := g.Next(ctx)
	if err != nil || third <= second {
		t.Fatalf("after recovery: %d, %v", third, err)
	}
}

func TestRefusesWithoutLease(t *testing.T) {
	t.Parallel()
	expired := time.Now().Add(-time.Second)
	g, err := orderid.New(orderid.Options{Worker: 1, LeaseValidUntil: func() time.Time { return expired }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, orderid.ErrLeaseLost) {
		t.Fatalf("Next = %v, want ErrLeaseLost", err)
	}
}

func TestSequenceExhaustionWaitsForNextMillisecond(t *testing.T) {
	t.Parallel()
	g, err := orderid.New(orderid.Options{Worker: 3})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for range 3 * 4096 {
		id, err := g.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("repeat %d", id)
		}
		seen[id] = true
	}
}

// A worker id handed over, after a graceful stop or after its holder died,
// to an instance whose clock is behind never reissues an id: the new
// holder starts past what the old one issued (or could have issued before
// its lease ran out, by its own clock), waiting a small step out and
// refusing a large one.
func TestHandoverOntoAClockSteppedBackNeverReissues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	clock := func(offset time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(offset) } }
	issue := func(t *testing.T, g *orderid.Generator, n int) []int64 {
		t.Helper()
		ids := make([]int64, n)
		for i := range ids {
			id, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = id
		}
		return ids
	}
	for _, tc := range []struct {
		name     string
		graceful bool
	}{{"graceful stop", true}, {"holder died", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := testenv.NewDB(t)
			// a's clock runs 30 s ahead of the database's and of b's.
			ahead := clock(30 * time.Second)
			a, err := orderid.AcquireLease(ctx, pool, "a", 3*time.Second, ahead, logger)
			if err != nil {
				t.Fatal(err)
			}
			ga, err := orderid.New(orderid.Options{Worker: a.Worker(), Floor: a.Floor(), Now: ahead, LeaseValidUntil: a.ValidUntil})
			if err != nil {
				t.Fatal(err)
			}
			issued := issue(t, ga, 5000) // more than one millisecond's sequence
			if tc.graceful {
				runCtx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { a.Run(runCtx, ga); close(done) }()
				stop()
				<-done
			} else if _, err := pool.Exec(ctx, "UPDATE worker_leases SET expires_at = now() - interval '1s'"); err != nil {
				t.Fatal(err)
			}
			b, err := orderid.AcquireLease(ctx, pool, "b", time.Minute, time.Now, logger)
			if err != nil {
				t.Fatal(err)
			}
			if b.Worker() != a.Worker() {
				t.Fatalf("worker %d not handed over (got %d)", a.Worker(), b.Worker())
			}
			// The true clock is 30 s behind a's: too far to wait.
			gb, err := orderid.New(orderid.Options{Worker: b.Worker(), Floor: b.Floor()})
			if err != nil {
				t.Fatal(err)
			}
			if id, err := gb.Next(ctx); !errors.Is(err, orderid.ErrClockBackwards) {
				t.Fatalf("next id on a clock 30s behind the last holder's: %d, %v; want ErrClockBackwards", id, err)
			}
			// A few seconds behind: waited out, then past every id a issued.
			gc, err := orderid.New(orderid.Options{Worker: b.Worker(), Floor: b.Floor(), Now: clock(29 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			last := issued[len(issued)-1]
			for _, id := range issue(t, gc, 100) {
				if id <= last {
					t.Fatalf("reissued: %d after the last holder's %d", id, last)
				}
			}
		})
	}
}

// An instance cut off from the database for longer than its lease finds
// the lease expired, and another holder on its worker id, when the
// database comes back: it leases another worker id and issues ids again,
// none of them on the worker id it lost.
func TestLostLeaseIsTakenAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testenv.NewDB(t)
	logger := slog.New(slog.DiscardHandler)
	const ttl = 3 * time.Second
	a, err := orderid.AcquireLease(ctx, pool, "a", ttl, time.Now, logger)
	if err != nil {
		t.Fatal(err)
	}
	lost := a.Worker()
	ga, err := orderid.New(orderid.Options{Worker: lost, Floor: a.Floor(), LeaseValidUntil: a.ValidUntil})
	if err != nil {
		t.Fatal(err)
	}
	before, err := ga.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// No renewals (the database is unreachable) until the lease expired
	// there and b took its worker id.
	time.Sleep(ttl + 500*time.Millisecond)
	if _, err := ga.Next(ctx); !errors.Is(err, orderid.ErrLeaseLost) {
		t.Fatalf("next id on an expired lease: %v, want ErrLeaseLost", err)
	}
	b, err := orderid.AcquireLease(ctx, pool, "b", time.Minute, time.Now, logger)
	if err != nil {
		t.Fatal(err)
	}
	if b.Worker() != lost {
		t.Fatalf("b leased worker %d, want the expired %d", b.Worker(), lost)
	}

	// The database is back: a's renewals resume.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.Run(runCtx, ga); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	var after int64
	for {
		if after, err = ga.Next(ctx); err == nil {
			break
		}
		if !errors.Is(err, orderid.ErrLeaseLost) || time.Now().After(deadline) {
			t.Fatalf("no id after the database came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a.Worker() == lost || ga.Worker() != a.Worker() {
		t.Fatalf("a holds worker %d and its generator %d; b holds %d", a.Worker(), ga.Worker(), lost)
	}
	if w := int(after >> 12 & 1023); w != a.Worker() {
		t.Fatalf("id %d carries worker %d, want %d", after, w, a.Worker())
	}
	if after <= before {
		t.Fatalf("id %d after the move is not above %d before it", after, before)
	}
	var holder string
	if err := pool.QueryRow(ctx, "SELECT holder FROM worker_leases WHERE worker_id = $1 AND expires_at > now()", a.Worker()).Scan(&holder); err != nil || holder != "a" {
		t.Fatalf("worker %d's live lease is held by %q (%v), want a", a.Worker(), holder, err)
	}
}
