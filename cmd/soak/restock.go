package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// restocks is what the restocker sent and what it was told: the checker
// holds the stock ledger to it (an adjustment retried under faults lands
// once).
type restocks struct {
	mu       sync.Mutex
	dish     int64
	sent     map[string]int32 // adjustment key -> delta
	acked    map[string]bool  // keys answered 201
	sets     int              // sets answered 200
	refusals map[string]int   // problem type -> count (stock-changed, stock-held: expected)
}

func newRestocks(dish int64) *restocks {
	return &restocks{dish: dish, sent: map[string]int32{}, acked: map[string]bool{}, refusals: map[string]int{}}
}

// restocker plays the hot dish's merchant restocking during the storms
// until stop: it sets what is on hand on the figure it read (a count), or
// adds units (a delivery, sometimes a small removal) with an
// Idempotency-Key, retried with it through every fault.
func (d *driver) restocker(ctx context.Context, stop <-chan struct{}, staff string, log *restocks) {
	path := "/admin/v1/dishes/" + d.hot.ID
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(500+rand.IntN(1500)) * time.Millisecond):
		}
		if rand.IntN(2) == 0 {
			r := d.call(ctx, entry{Op: "restock_read", Method: "GET", Path: path, Inst: d.randInst()}, staff, nil, nil)
			if !r.ok() {
				continue
			}
			var cur struct {
				Held   int32 `json:"held"`
				OnHand int32 `json:"on_hand"`
			}
			if json.Unmarshal(r.body, &cur) != nil {
				continue
			}
			want := cur.Held + int32(rand.IntN(int(d.o.hotStock)/2+1)) //nolint:gosec // G115: small
			r = d.retry(ctx, entry{Op: "restock_set", Method: "PUT", Path: path + "/stock"}, staff,
				map[string]int32{"on_hand": want, "if_on_hand": cur.OnHand}, nil)
			log.mu.Lock()
			if r.ok() {
				log.sets++
			} else if p := r.problemType(); p != "" {
				log.refusals[p]++
			}
			log.mu.Unlock()
			continue
		}
		delta := int32(1 + rand.IntN(10)) //nolint:gosec // G115: small
		if rand.IntN(5) == 0 {
			delta = -int32(1 + rand.IntN(3)) //nolint:gosec // G115: small
		}
		key := newKey()
		log.mu.Lock()
		log.sent[key] = delta
		log.mu.Unlock()
		r := d.retry(ctx, entry{Op: "restock_adjust", Method: "POST", Path: path + "/stock/adjustments"}, staff,
			map[string]int32{"delta": delta}, map[string]string{"Idempotency-Key": key})
		log.mu.Lock()
		if r.ok() {
			log.acked[key] = true
		} else if p := r.problemType(); p != "" {
			log.refusals[p]++
			if p == "stock-held" {
				delete(log.sent, key) // refused: nothing recorded
			}
		}
		log.mu.Unlock()
	}
}

// hotDishID is the hot dish's id.
func (d *driver) hotDishID() int64 {
	id, _ := strconv.ParseInt(d.hot.ID, 10, 64)
	return id
}
