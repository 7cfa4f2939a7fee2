package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/courier"
	"github.com/takeout/takeout/internal/couriersim"
	"github.com/takeout/takeout/internal/testenv"
)

// The delivery checks find nothing in a run that kept its promises and
// find each breakage planted: they can fail.
func TestCheckCouriersFindsPlantedViolations(t *testing.T) {
	t.Parallel()
	// Order 1001 accepted by a merchant that dispatches on accept, placed
	// with Dada, and what happened next.
	accepted := []string{
		`UPDATE merchants SET courier_dispatch = 'accept'`,
		`UPDATE orders SET status = 'ACCEPTED', version = 3`,
		`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'PAID', 'ACCEPTED', 3, 'merchant:1')`,
	}
	placed := append(accepted,
		`INSERT INTO deliveries (order_id, merchant_id, attempt, provider, out_no, status, fee_fen, seq) SELECT 1001, id, 1, 'dada', 'TK1001-1', 'PLACED', 600, 1 FROM merchants`,
		`INSERT INTO delivery_events (delivery_id, seq, order_id, kind, status, source) SELECT id, 1, 1001, 'status', 'PLACED', 'system' FROM deliveries`)
	step := func(seq int, status string) []string {
		return []string{
			`UPDATE deliveries SET status = '` + status + `', seq = ` + strconv.Itoa(seq),
			`INSERT INTO delivery_events (delivery_id, seq, order_id, kind, status, source) SELECT id, ` + strconv.Itoa(seq) + `, 1001, 'status', '` + status + `', 'query' FROM deliveries`,
		}
	}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	delivered := cat(placed, step(2, "ASSIGNED"), step(3, "DELIVERED"), []string{
		`UPDATE orders SET status = 'COMPLETED', version = 5`,
		`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'DELIVERING', 'COMPLETED', 5, 'system:courier')`,
	})
	atDada := func(st courier.Status, fee, tip int64) []couriersim.Order {
		return []couriersim.Order{{Provider: "dada", OutNo: "TK1001-1", Status: st, FeeFen: fee, TipFen: tip}}
	}
	for _, tc := range []struct {
		name   string
		plant  []string
		orders []couriersim.Order
		inv    string
		want   int
	}{
		{"delivered", delivered, atDada(courier.Delivered, 600, 0), invCourierFeesLedger, 0},
		{"delivered, truthfully", delivered, atDada(courier.Delivered, 600, 0), invCourierTruth, 0},
		{"accepted with no delivery", accepted, nil, invOneActiveDelivery, 1},
		{"two active deliveries", cat(placed, []string{`DROP INDEX deliveries_one_active`,
			`INSERT INTO deliveries (order_id, merchant_id, attempt, provider, out_no, status) SELECT 1001, id, 2, 'meituan', 'TK1001-2', 'PLACED' FROM merchants`}),
			nil, invOneActiveDelivery, 1},
		{"active for a refunded order", cat(placed, []string{`UPDATE orders SET status = 'REFUNDING'`}), nil, invOneActiveDelivery, 1},
		{"a status back", cat(placed, step(2, "PICKED_UP"), step(3, "ASSIGNED")), nil, invDeliveryForward, 1},
		{"an event after the end", cat(placed, step(2, "CANCELLED"), step(3, "ASSIGNED")), nil, invDeliveryForward, 1},
		{"fee not posted", cat(accepted, []string{
			`INSERT INTO deliveries (order_id, merchant_id, attempt, provider, out_no, status, fee_fen, seq) SELECT 1001, id, 1, 'dada', 'TK1001-1', 'DELIVERED', 600, 0 FROM merchants`}),
			nil, invCourierFeesLedger, 1},
		{"completed by the courier undelivered", cat(placed, step(2, "CANCELLED"), []string{
			`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'DELIVERING', 'COMPLETED', 5, 'system:courier')`}),
			nil, invCompletedDelivered, 1},
		{"delivered, the order left behind", cat(placed, step(2, "DELIVERED")), nil, invCompletedDelivered, 1},
		{"a tip the provider holds and we do not", delivered, atDada(courier.Delivered, 600, 300), invCourierTruth, 1},
		{"still riding at the provider", delivered, atDada(courier.PickedUp, 600, 0), invCourierTruth, 1},
		{"unknown here", nil, atDada(courier.Delivered, 600, 0), invCourierTruth, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := testenv.NewDB(t)
			consistentShop(t, pool)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, q := range tc.plant {
				if _, err := pool.Exec(ctx, q); err != nil {
					t.Fatalf("plant %q: %v", q, err)
				}
			}
			f := findings{violations: map[string]int{}, examples: map[string][]string{}}
			if err := checkDeliveries(ctx, pool, &f); err != nil {
				t.Fatal(err)
			}
			if err := checkCourierTruth(ctx, pool, tc.orders, &f); err != nil {
				t.Fatal(err)
			}
			if got := f.violations[tc.inv]; got != tc.want {
				t.Errorf("%s: %d violations, want %d: %v", tc.inv, got, tc.want, f.examples)
			}
		})
	}
}
