package main

import (
	"context"
	"testing"

	"github.com/takeout/takeout/internal/printing"
	"github.com/takeout/takeout/internal/printsim"
)

// The print check finds nothing when each accepted order's ticket is
// printed with one unmarked paper (and any more marked), and finds each
// breakage planted: it can fail.
func TestCheckPrintsFindsPlantedViolations(t *testing.T) {
	t.Parallel()
	// Order 1001 accepted, its merchant with one printer.
	accepted := []string{
		`UPDATE orders SET status = 'ACCEPTED', version = 3`,
		`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'PAID', 'ACCEPTED', 3, 'merchant:1')`,
		`INSERT INTO printers (merchant_id, name, provider, device, role) SELECT id, 'K', 'feie', 'DEV1', 'kitchen' FROM merchants`,
	}
	ticket := func(status string) string {
		return `INSERT INTO print_jobs (order_id, merchant_id, printer_id, trigger, status, print_by) SELECT 1001, merchant_id, id, 'accept', '` + status + `', now() FROM printers`
	}
	paper := func(order, mark string) printsim.Paper {
		return printsim.Paper{Provider: "feie", Device: "DEV1", Content: "Checker\n" + mark + "订单 " + order + "\n" + printing.TicketLineID + "x\n"}
	}
	plain, second := paper("1001", ""), paper("1001", printing.TicketMarkAttempt+"2\n")
	for _, tc := range []struct {
		name   string
		plant  []string
		papers []printsim.Paper
		want   int
	}{
		{name: "printed once", plant: append(accepted, ticket("printed")), papers: []printsim.Paper{plain}, want: 0},
		{name: "a marked second paper", plant: append(accepted, ticket("printed")), papers: []printsim.Paper{plain, second}, want: 0},
		{name: "one paper, marked", plant: append(accepted, ticket("printed")), papers: []printsim.Paper{second}, want: 0},
		{name: "two unmarked papers", plant: append(accepted, ticket("printed")), papers: []printsim.Paper{plain, plain}, want: 1},
		{name: "printed without paper", plant: append(accepted, ticket("printed")), want: 1},
		{name: "not printed", plant: append(accepted, ticket("sent")), papers: []printsim.Paper{plain}, want: 1},
		{name: "accepted without a ticket", plant: accepted, want: 1},
		{name: "paper of an order never accepted", papers: []printsim.Paper{paper("1001", "")}, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := plantedShop(t, tc.plant)
			ctx := context.Background()
			f := findings{violations: map[string]int{}, examples: map[string][]string{}}
			if err := checkPrints(ctx, pool, tc.papers, &f); err != nil {
				t.Fatal(err)
			}
			if got := f.violations[invPrintedOnce]; got != tc.want {
				t.Errorf("%d violations, want %d: %v", got, tc.want, f.examples)
			}
		})
	}
}
