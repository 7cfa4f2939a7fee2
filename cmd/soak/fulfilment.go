package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"
)

// The soak's pickup and scheduled orders: the first and the third
// merchant offer pickup and short slots of small capacity, so that the
// hot dish's rush fills slots and races for pickup numbers.
const (
	soakSlotMinutes    = 15
	soakSlotCapacity   = 4
	soakPrintBeforeMin = 10
)

// fulfilmentOf is merchant i's ways of fulfilment (nil: delivery only).
func fulfilmentOf(i int) map[string]any {
	if i == 1 {
		return nil
	}
	return map[string]any{"delivery": true, "pickup": true, "scheduled": map[string]any{
		"slot_minutes": soakSlotMinutes, "lead_minutes": 0, "days_ahead": 0, "capacity": soakSlotCapacity,
		"print_before_minutes": soakPrintBeforeMin}}
}

// The invariants of pickup numbers and slots.
const (
	invPickupOnce     = "no_pickup_number_given_twice"
	invSlotsConserved = "slot_capacity_conserved"
)

// chooseFulfilment makes a purchase at a merchant with pickup and slots
// a pickup order a quarter of the time, and one for a slot a fifth (one
// of the next few, so that they fill).
func (d *driver) chooseFulfilment(ctx context.Context, m merchant, token string, req *confirmRequest) {
	if !m.Pickup {
		return
	}
	if rand.IntN(4) == 0 {
		req.Fulfilment = "pickup"
		req.Address = map[string]any{"name": req.Address["name"], "phone": req.Address["phone"]}
	}
	if rand.IntN(5) != 0 {
		return
	}
	r := d.call(ctx, entry{Op: "slots", Method: "GET", Path: "/v1/merchants/" + m.ID + "/slots", Inst: d.randInst()}, token, nil, nil)
	var list struct {
		Slots []struct {
			Start string `json:"start"`
		} `json:"slots"`
	}
	if !r.ok() || json.Unmarshal(r.body, &list) != nil || len(list.Slots) == 0 {
		return
	}
	req.SlotStart = list.Slots[rand.IntN(min(len(list.Slots), 3))].Start
}

// staffAction adapts a staff fate to how the order goes out: a pickup
// order is made ready, then collected, never dispatched.
func staffAction(action, status, fulfilment string) string {
	if fulfilment != "pickup" || action != "dispatch" {
		return action
	}
	if status == "READY" {
		return "pick-up"
	}
	return "ready"
}

// checkPickupNumbers holds each merchant's day to its numbers: given
// once each, from 1 without a gap (a placement that failed gave its
// number back), the counter at the last one.
func checkPickupNumbers(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `
		SELECT o.merchant_id, o.pickup_day::text, count(*), count(DISTINCT o.pickup_no), max(o.pickup_no), coalesce(min(c.last), 0)
		FROM orders o LEFT JOIN pickup_counters c ON c.merchant_id = o.merchant_id AND c.day = o.pickup_day
		WHERE o.pickup_no IS NOT NULL
		GROUP BY 1, 2`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var merchant int64
		var day string
		var n, distinct, top, last int
		if err := rows.Scan(&merchant, &day, &n, &distinct, &top, &last); err != nil {
			return err
		}
		if n != distinct || top != n || last != n {
			f.add(invPickupOnce, n-distinct+1, fmt.Sprintf("merchant %d on %s: %d pickup orders, %d numbers, the highest %d, the counter at %d",
				merchant, day, n, distinct, top, last))
		}
	}
	return rows.Err()
}

// checkSlots holds each slot to its orders: its count is its holds, never
// above the capacity; every scheduled order still meant to be cooked
// holds its slot, and none that gave it back does.
func checkSlots(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `
		SELECT b.merchant_id, b.slot_start, b.taken, (SELECT count(*) FROM slot_holds h WHERE h.merchant_id = b.merchant_id AND h.slot_start = b.slot_start)
		FROM slot_bookings b`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var merchant int64
		var start time.Time
		var taken, holds int
		if err := rows.Scan(&merchant, &start, &taken, &holds); err != nil {
			return err
		}
		if taken != holds || taken > soakSlotCapacity {
			f.add(invSlotsConserved, 1, fmt.Sprintf("merchant %d, slot %s: %d taken, %d holds, capacity %d", merchant, start.Format(time.RFC3339), taken, holds, soakSlotCapacity))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// An order gives its slot back with its stock: the two go together.
	var wrong int
	var example string
	if err := db.QueryRow(ctx, `
		SELECT count(*), coalesce(min(o.id::text || ' ' || o.status || CASE WHEN h.order_id IS NULL THEN ' without' ELSE ' with' END || ' a hold'), '')
		FROM orders o LEFT JOIN slot_holds h ON h.order_id = o.id
		WHERE o.slot_start IS NOT NULL
		  AND (h.order_id IS NOT NULL) <> EXISTS (
		      SELECT 1 FROM stock_reservations r WHERE r.order_id = o.id AND r.released_at IS NULL)`).Scan(&wrong, &example); err != nil {
		return err
	}
	if wrong > 0 {
		f.add(invSlotsConserved, wrong, "order "+example+", its stock the other way")
	}
	return nil
}

// fulfilmentCounts are, for the report, the run's pickup and scheduled
// orders: a run without them proves nothing about them.
func fulfilmentCounts(ctx context.Context, db querier) (map[string]int, error) {
	var pickup, collected, scheduled, fullSlots, holds int
	if err := db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE fulfilment = 'pickup'),
		       count(*) FILTER (WHERE fulfilment = 'pickup' AND status = 'COMPLETED'),
		       count(*) FILTER (WHERE slot_start IS NOT NULL),
		       (SELECT count(*) FROM slot_bookings WHERE taken >= $1),
		       (SELECT count(*) FROM slot_holds)
		FROM orders`, soakSlotCapacity).Scan(&pickup, &collected, &scheduled, &fullSlots, &holds); err != nil {
		return nil, err
	}
	return map[string]int{"pickup_orders": pickup, "pickup_orders_collected": collected, "scheduled_orders": scheduled,
		"slots_full": fullSlots, "slot_holds": holds}, nil
}
