package db_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/takeout/takeout/internal/db"
)

// The grouping itself, without a database: every caller gets the result
// of its own change, groups never exceed Max, no more than Slots run at
// once, and the changes of a group that fails run again alone, once each
// (in their callers, outside the slots).
func TestGroupAnswersEachChangeItsOwn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		max, slot int
		failEvery int // together fails every n-th group (0: never)
	}{
		{"one slot", 8, 1, 0},
		{"two slots", 16, 2, 0},
		{"failing groups", 8, 1, 3},
		{"each alone", 1, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				running, most, groups atomic.Int64
				held                  atomic.Int64 // changes in a running statement
				mu                    sync.Mutex
				aloneRuns             = map[int]int{}
				togetherRuns          = map[int]int{}
				block                 = make(chan struct{})
			)
			enter := func(changes int) func() {
				held.Add(int64(changes))
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-block // the first group holds its slot until all callers wait
				return func() { running.Add(-1); held.Add(-int64(changes)) }
			}
			alone := func(_ context.Context, p int) (int, error) {
				defer enter(1)()
				mu.Lock()
				aloneRuns[p]++
				mu.Unlock()
				return p * 10, nil
			}
			together := func(_ context.Context, ps []int) ([]int, error) {
				defer enter(len(ps))()
				if len(ps) > tc.max {
					t.Errorf("a group of %d, want at most %d", len(ps), tc.max)
				}
				if n := groups.Add(1); tc.failEvery > 0 && n%int64(tc.failEvery) == 0 {
					return nil, errors.New("the group's commit failed")
				}
				out := make([]int, len(ps))
				mu.Lock()
				for i, p := range ps {
					togetherRuns[p]++
					out[i] = p * 10
				}
				mu.Unlock()
				return out, nil
			}
			g := db.NewGroup(db.GroupOptions{Statement: "test", Max: tc.max, Slots: tc.slot}, alone, together)
			const callers = 200
			got := make([]int, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					r, err := g.Do(context.Background(), i)
					if err != nil {
						t.Error(err)
					}
					got[i] = r
				})
			}
			// Every caller is in a slot or waiting for one before the first
			// slot is let go, however slowly the goroutines start.
			waiting := waitingGauge(t, g)
			for deadline := time.Now().Add(10 * time.Second); held.Load()+int64(testutil.ToFloat64(waiting)) < callers; {
				if time.Now().After(deadline) {
					t.Fatalf("only %d changes running and %v waiting after 10 s", held.Load(), testutil.ToFloat64(waiting))
				}
				time.Sleep(time.Millisecond)
			}
			close(block)
			wg.Wait()
			for i, r := range got {
				if r != i*10 {
					t.Fatalf("caller %d got %d, want %d", i, r, i*10)
				}
				if n := aloneRuns[i] + togetherRuns[i]; n != 1 {
					t.Errorf("change %d committed %d times (alone %d, together %d), want once", i, n, aloneRuns[i], togetherRuns[i])
				}
			}
			// (A failed group's changes run again in their callers, at once.)
			if m := most.Load(); tc.max > 1 && tc.failEvery == 0 && m > int64(tc.slot) {
				t.Errorf("%d statements at once, want at most %d slots", m, tc.slot)
			}
			if tc.max > 1 && groups.Load() == 0 {
				t.Error("no change was committed in a group")
			}
		})
	}
}

// waitingGauge is g's gauge of the changes waiting for a slot.
func waitingGauge[P, R any](t *testing.T, g *db.Group[P, R]) prometheus.Gauge {
	t.Helper()
	for _, c := range g.Collectors() {
		if gauge, ok := c.(prometheus.Gauge); ok {
			return gauge
		}
	}
	t.Fatal("the group has no waiting gauge")
	return nil
}
