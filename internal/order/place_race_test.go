package order_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/takeout/takeout/internal/order"
)

// One token submitted under several keys at the same instant (the app
// lost the answer and retried from scratch, several times, on several
// instances): every submit answers with the one order, none fails. Each
// copy carries the same order id, so the insert races on the primary key
// as well as on the intent; found by the soak as a 500 on orders_pkey.
func TestSameTokenConcurrentKeysNeverFail(t *testing.T) {
	t.Parallel()
	e := newBenchEnv(t)
	ctx := context.Background()
	const rounds, copies = 40, 6
	for round := range rounds {
		tok := e.token(t, 1_000+round, e.dishes[round%len(e.dishes)])
		statuses := make([]int, copies)
		errs := make([]error, copies)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range copies {
			wg.Go(func() {
				start.Wait()
				out, err := e.svc.Submit(ctx, e.user, fmt.Sprintf("race-%d-%d", round, i), tok, order.PlacedReply)
				statuses[i], errs[i] = out.Response.Status, err
			})
		}
		start.Done()
		wg.Wait()
		created := 0
		for i := range copies {
			if errs[i] != nil {
				t.Fatalf("round %d copy %d: %v", round, i, errs[i])
			}
			switch statuses[i] {
			case 201:
				created++
			case 200:
			default:
				t.Fatalf("round %d copy %d: status %d", round, i, statuses[i])
			}
		}
		if created != 1 {
			t.Fatalf("round %d: %d copies created the order, want 1", round, created)
		}
	}
	var orders int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if orders != rounds {
		t.Errorf("%d orders, want %d", orders, rounds)
	}
}
