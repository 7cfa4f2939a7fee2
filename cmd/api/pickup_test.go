package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/order"
)

// setFulfilment replaces the shop's merchant's ways of fulfilment.
func (sh *shop) setFulfilment(t *testing.T, rules fulfilment.Rules) catalog.Merchant {
	t.Helper()
	var version int64
	if err := sh.pool.QueryRow(t.Context(), "SELECT version FROM merchants WHERE id = $1", sh.merchantID).Scan(&version); err != nil {
		t.Fatal(err)
	}
	r := sh.do(t, sh.apis[0], "PATCH", "/admin/v1/merchants/"+sh.merchantID, sh.admin, map[string]any{"version": version, "fulfilment": rules})
	if r.status != 200 {
		t.Fatalf("set fulfilment: %d %s", r.status, r.body)
	}
	var m catalog.Merchant
	r.json(t, &m)
	return m
}

// pickupCart is a cart of qty of the first dish, collected at the
// counter: a name and a phone, no address.
func (sh *shop) pickupCart(qty int32) map[string]any {
	c := sh.cart(qty)
	c["fulfilment"] = "pickup"
	c["address"] = map[string]string{"name": "Li Lei", "phone": "13800138000"}
	return c
}

// staffAction posts a staff action on an order and returns the answer.
func (sh *shop) staffAction(t *testing.T, id, action string) response {
	t.Helper()
	return sh.do(t, sh.apis[0], "POST", "/admin/v1/orders/"+id+"/"+action, sh.admin, nil)
}

// A pickup order costs no delivery and needs no address; a merchant that
// does not offer pickup refuses it; a delivery cart still needs its
// address. Pickup orders placed at once, each submitted three times
// with different keys, get the numbers 1 to n of the merchant's day,
// each once; the customer is told READY, the kitchen cannot dispatch a
// pickup order nor collect a delivery order, and pick_up completes it
// and consumes its stock.
func TestPickupOrders(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 100)
	user := sh.login(t, "pickup-0")

	r := sh.do(t, sh.apis[0], "POST", "/v1/orders/confirm", user, sh.pickupCart(1))
	if r.status != 409 || r.problemType() != "fulfilment-unavailable" || !strings.Contains(string(r.body), `"offered":["delivery"]`) {
		t.Fatalf("pickup at a delivery-only merchant: %d %s", r.status, r.body)
	}
	if m := sh.setFulfilment(t, fulfilment.Rules{Delivery: true, Pickup: true}); !m.Fulfilment.Pickup {
		t.Fatalf("merchant after the change: %+v", m.Fulfilment)
	}
	noDetail := sh.cart(1)
	noDetail["address"] = map[string]string{"name": "Li Lei", "phone": "13800138000"}
	if r := sh.do(t, sh.apis[0], "POST", "/v1/orders/confirm", user, noDetail); r.status != 400 || !strings.Contains(string(r.body), `"field":"address.detail"`) {
		t.Errorf("a delivery cart without an address: %d %s", r.status, r.body)
	}
	c := sh.confirm(t, sh.apis[0], user, sh.pickupCart(1))
	if c.Fulfilment != "pickup" || c.DeliveryFeeFen != 0 || c.Slot != nil {
		t.Errorf("pickup quote: fulfilment %q, delivery fee %d, slot %v", c.Fulfilment, c.DeliveryFeeFen, c.Slot)
	}

	const n = 12
	placed := make([]order.Placed, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := sh.login(t, fmt.Sprintf("pickup-%d", i+1))
			c := sh.confirm(t, sh.apis[i%2], u, sh.pickupCart(1))
			var inner sync.WaitGroup
			for k := range 3 {
				inner.Add(1)
				go func() {
					defer inner.Done()
					r := sh.submitUntilAnswered(t, sh.apis[k%2], u, fmt.Sprintf("pk-%d-%d", i, k), c.ConfirmToken)
					if r.status != 201 && r.status != 200 {
						t.Errorf("submit %d/%d: %d %s", i, k, r.status, r.body)
						return
					}
					if p := placedOrder(t, r); p.Pickup == nil {
						t.Errorf("submit %d/%d: no pickup number in %s", i, k, r.body)
					} else if k == 0 {
						placed[i] = p
					}
				}()
			}
			inner.Wait()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var numbers []int
	for _, p := range placed {
		numbers = append(numbers, int(p.Pickup.Number))
		if p.Fulfilment != "pickup" || p.DeliveryFeeFen != 0 || p.Pickup.Day != time.Now().In(shanghai(t)).Format(time.DateOnly) {
			t.Errorf("order %s: %s, fee %d, pickup %+v", p.ID, p.Fulfilment, p.DeliveryFeeFen, p.Pickup)
		}
	}
	slices.Sort(numbers)
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(numbers, want) {
		t.Errorf("pickup numbers %v, want each of 1..%d once", numbers, n)
	}
	if got := sh.count(t, "SELECT count(*) FROM orders WHERE merchant_id = $1 AND fulfilment = 'pickup'", sh.merchantID); got != n {
		t.Errorf("%d pickup orders in the database, want %d", got, n)
	}
	if got := sh.count(t, "SELECT last FROM pickup_counters WHERE merchant_id = $1", sh.merchantID); got != n {
		t.Errorf("the counter says %d, want %d", got, n)
	}

	// Ordered again, it is collected again.
	r = sh.do(t, sh.apis[0], "POST", "/v1/orders/"+placed[1].ID+"/reorder", sh.login(t, "pickup-2"), nil)
	var again order.ConfirmResponse
	if r.status != 200 {
		t.Errorf("reorder of a pickup order: %d %s", r.status, r.body)
	} else if r.json(t, &again); again.Fulfilment != "pickup" || again.DeliveryFeeFen != 0 {
		t.Errorf("reorder of a pickup order quotes %q with a delivery fee of %d", again.Fulfilment, again.DeliveryFeeFen)
	}

	// The kitchen's side.
	id := placed[0].ID
	sh.markPaid(t, id)
	for _, step := range []struct {
		action, status string
		code           int
	}{
		{"accept", "ACCEPTED", 200},
		{"dispatch", "ACCEPTED", 409},
		{"pick-up", "ACCEPTED", 409}, // not before it is ready
		{"ready", "READY", 200},
		{"dispatch", "READY", 409},
		{"pick-up", "COMPLETED", 200},
		{"pick-up", "COMPLETED", 200}, // a second tap is a replay
	} {
		r := sh.staffAction(t, id, step.action)
		if r.status != step.code {
			t.Fatalf("%s: %d %s, want %d", step.action, r.status, r.body, step.code)
		}
		var o order.Order
		if r.status == 200 {
			r.json(t, &o)
		} else if !strings.Contains(string(r.body), `"current_status":"`+step.status+`"`) {
			t.Errorf("%s refused without the status: %s", step.action, r.body)
		}
		if r.status == 200 && string(o.Status) != step.status {
			t.Errorf("%s: order %s, want %s", step.action, o.Status, step.status)
		}
	}
	if got := sh.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND from_status = 'READY' AND to_status = 'COMPLETED'", id); got != 1 {
		t.Errorf("%d pick-up transitions, want 1", got)
	}
	if got := sh.count(t, "SELECT count(*) FROM stock_reservations WHERE order_id = $1 AND consumed_at IS NOT NULL", id); got != 1 {
		t.Errorf("the collected order's stock consumed %d times, want once", got)
	}
	// A delivery order is not collected.
	d := sh.place(t, user, "delivery-1", 1)
	sh.markPaid(t, d.ID)
	sh.staffAction(t, d.ID, "accept")
	sh.staffAction(t, d.ID, "ready")
	if r := sh.staffAction(t, d.ID, "pick-up"); r.status != 409 || !strings.Contains(string(r.body), "delivery order") {
		t.Errorf("pick-up of a delivery order: %d %s", r.status, r.body)
	}
	if d.Pickup != nil || d.Fulfilment != "delivery" {
		t.Errorf("a delivery order: %s, pickup %+v", d.Fulfilment, d.Pickup)
	}
}

// A pickup placement that waits for its stock does not hold the
// merchant's pickup numbers: while one customer's placement waits for a
// dish whose every stock shard another transaction holds, another
// customer's pickup order of another dish is placed and numbered 1; the
// first is numbered 2 once its stock is free. (The number used to be
// taken first and held through the waits, so that under load a
// merchant's pickup orders were placed one at a time.)
func TestPickupNumberIsNotHeldWhileAPlacementWaits(t *testing.T) {
	t.Parallel()
	// Lock waits outlast the test: the placement waits for its
	// stock until the test frees it, not until the lock timeout ends it.
	sh := newShop(t, 1, map[string]string{"TAKEOUT_DATABASE_LOCK_TIMEOUT": "1m"}, 100, 100)
	sh.setFulfilment(t, fulfilment.Rules{Delivery: true, Pickup: true})
	pickupOf := func(dish int) map[string]any {
		qty := make([]int32, dish+1)
		qty[dish] = 1
		c := sh.cart(qty...)
		c["fulfilment"] = "pickup"
		c["address"] = map[string]string{"name": "Li Lei", "phone": "13800138000"}
		return c
	}
	waiter, other := sh.login(t, "pickup-waits"), sh.login(t, "pickup-other")
	waiterToken := sh.confirm(t, sh.apis[0], waiter, pickupOf(0)).ConfirmToken
	otherToken := sh.confirm(t, sh.apis[0], other, pickupOf(1)).ConfirmToken

	hold, err := sh.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(context.Background()) }()
	if _, err := hold.Exec(t.Context(), "SELECT 1 FROM dish_stock WHERE dish_id = $1 FOR UPDATE", sh.dishes[0].ID); err != nil {
		t.Fatal(err)
	}
	waited := make(chan response, 1)
	go func() { waited <- sh.submitUntilAnswered(t, sh.apis[0], waiter, "pk-waits", waiterToken) }()
	waitingForStock := func() int {
		return sh.count(t, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%StockTakeShard%'`)
	}
	deadline := time.Now().Add(15 * time.Second)
	for waitingForStock() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first placement never waited for its stock")
		}
		time.Sleep(10 * time.Millisecond)
	}

	r := sh.submit(t, sh.apis[0], other, "pk-other", otherToken)
	if r.status != 201 {
		t.Fatalf("a pickup order placed while another waits for its stock: %d %s", r.status, r.body)
	}
	if p := placedOrder(t, r); p.Pickup == nil || p.Pickup.Number != 1 {
		t.Errorf("the order placed first has pickup %+v, want number 1", p.Pickup)
	}
	if waitingForStock() != 1 {
		t.Errorf("the first placement stopped waiting before its stock was free")
	}
	if err := hold.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	r = <-waited
	if r.status != 201 {
		t.Fatalf("the placement that waited: %d %s", r.status, r.body)
	}
	if p := placedOrder(t, r); p.Pickup == nil || p.Pickup.Number != 2 {
		t.Errorf("the order placed second has pickup %+v, want number 2", p.Pickup)
	}
	if got := sh.count(t, "SELECT count(*) FROM orders WHERE merchant_id = $1 AND pickup_no IS NOT NULL", sh.merchantID); got != 2 {
		t.Errorf("%d numbered pickup orders, want 2", got)
	}
}

// A pickup order is never committed without its number: the database
// refuses one at the commit (the number is given after the insert).
func TestAPickupOrderIsNotCommittedWithoutItsNumber(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 100)
	_, err := sh.pool.Exec(t.Context(), `INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
		items_total_fen, packaging_fee_fen, delivery_fee_fen, total_fen, address, remark, pay_deadline, created_at, updated_at, fulfilment, pickup_day)
		VALUES (42, 1, $1, $2, $2, 1, 'sm3', 'PENDING_PAYMENT', 100, 0, 0, 100, '{}', '', now(), now(), now(), 'pickup', current_date)`,
		sh.merchantID, bytes.Repeat([]byte{7}, 32))
	if err == nil || !strings.Contains(err.Error(), "has no pickup number") {
		t.Fatalf("a pickup order without a number: %v, want it refused", err)
	}
	if got := sh.count(t, "SELECT count(*) FROM orders WHERE id = 42"); got != 0 {
		t.Errorf("%d orders 42 committed", got)
	}
}

func shanghai(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// slots reads the merchant's slots as a customer does.
func (sh *shop) slots(t *testing.T) catalog.SlotList {
	t.Helper()
	r := sh.do(t, sh.apis[0], "GET", "/v1/merchants/"+sh.merchantID+"/slots", "", nil)
	if r.status != 200 {
		t.Fatalf("slots: %d %s", r.status, r.body)
	}
	var l catalog.SlotList
	r.json(t, &l)
	return l
}

// A slot takes orders like stock: of eight customers ordering for a slot
// of three at once, three are placed and five told it is full; the
// bookings and holds agree, and the slot shows none left. A cancel gives
// its place back once, however often it is sent, and the place goes to
// the next customer. A slot that is not one of the merchant's is
// refused, and so is any slot at a merchant that takes no orders for
// later. Tickets of an accepted scheduled order wait until the
// merchant's time before the slot.
func TestScheduledOrders(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 100)
	user := sh.login(t, "slot-0")
	cart := func(start string) map[string]any {
		c := sh.cart(1)
		c["slot_start"] = start
		return c
	}
	if r := sh.do(t, sh.apis[0], "POST", "/v1/orders/confirm", user, cart(time.Now().Add(24*time.Hour).Truncate(time.Hour).Format(time.RFC3339))); r.status != 409 || r.problemType() != "slot-unavailable" {
		t.Errorf("a slot at a merchant without scheduling: %d %s", r.status, r.body)
	}
	if l := sh.slots(t); len(l.Slots) != 0 {
		t.Errorf("a merchant without scheduling lists %d slots", len(l.Slots))
	}
	sh.setFulfilment(t, fulfilment.Rules{Delivery: true, Pickup: true, Scheduled: &fulfilment.Scheduling{
		SlotMinutes: 30, LeadMinutes: 60, DaysAhead: 1, Capacity: 3, PrintBeforeMinutes: 20}})
	list := sh.slots(t)
	if list.TimeZone != "Asia/Shanghai" || len(list.Slots) < 48 {
		t.Fatalf("slots: %s, %d of them; want at least tomorrow's 48", list.TimeZone, len(list.Slots))
	}
	first := list.Slots[0]
	if !first.OrderBy.Equal(first.Start.Add(-time.Hour)) || first.OrderBy.Before(time.Now().Add(-time.Minute)) || first.Remaining != 3 {
		t.Errorf("first slot %+v: want order_by an hour before its start, not past, 3 left", first)
	}
	// A slot of tomorrow afternoon: far from its cut-off while the test runs.
	var slot catalog.SlotOffer
	for _, s := range list.Slots {
		if s.Start.After(time.Now().Add(20 * time.Hour)) {
			slot = s
			break
		}
	}
	if slot.Start.IsZero() {
		t.Fatalf("no slot 20 hours ahead in %+v", list.Slots)
	}
	at := slot.Start.Format(time.RFC3339)
	if r := sh.do(t, sh.apis[0], "POST", "/v1/orders/confirm", user, cart(slot.Start.Add(10*time.Minute).Format(time.RFC3339))); r.status != 409 || r.problemType() != "slot-unavailable" {
		t.Errorf("a time between slots: %d %s", r.status, r.body)
	}

	type outcome struct {
		status int
		kind   string
		order  order.Placed
	}
	const n = 8
	out := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := sh.login(t, fmt.Sprintf("slot-%d", i+1))
			c := sh.confirm(t, sh.apis[i%2], u, cart(at))
			if c.Slot == nil || !c.Slot.Start.Equal(slot.Start) || !c.Slot.End.Equal(slot.End) {
				t.Errorf("quote %d has slot %+v, want %s", i, c.Slot, at)
			}
			r := sh.submitUntilAnswered(t, sh.apis[(i+1)%2], u, fmt.Sprintf("slot-%d", i), c.ConfirmToken)
			out[i] = outcome{status: r.status, kind: r.problemType()}
			if r.status == 201 {
				out[i].order = placedOrder(t, r)
			}
		}()
	}
	wg.Wait()
	var ids []string
	for i, o := range out {
		switch {
		case o.status == 201:
			ids = append(ids, o.order.ID)
			if o.order.Slot == nil || !o.order.Slot.Start.Equal(slot.Start) {
				t.Errorf("order %s has slot %+v", o.order.ID, o.order.Slot)
			}
		case o.status == 409 && o.kind == "slot-full":
		default:
			t.Errorf("customer %d: %d %s", i, o.status, o.kind)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("%d orders placed for a slot of 3", len(ids))
	}
	conserved := func(want int) {
		t.Helper()
		taken := sh.count(t, "SELECT coalesce(sum(taken), 0) FROM slot_bookings WHERE merchant_id = $1", sh.merchantID)
		holds := sh.count(t, "SELECT count(*) FROM slot_holds WHERE merchant_id = $1", sh.merchantID)
		live := sh.count(t, "SELECT count(*) FROM orders WHERE merchant_id = $1 AND slot_start IS NOT NULL AND status NOT IN ('CANCELLED', 'REFUNDING', 'REFUNDED')", sh.merchantID)
		if taken != want || holds != want || live != want {
			t.Errorf("slot bookings %d, holds %d, live scheduled orders %d; want %d each", taken, holds, live, want)
		}
		for _, s := range sh.slots(t).Slots {
			if s.Start.Equal(slot.Start) && s.Remaining != 3-want {
				t.Errorf("the slot shows %d left, want %d", s.Remaining, 3-want)
			}
		}
	}
	conserved(3)
	if got := sh.count(t, "SELECT count(*) FROM orders WHERE merchant_id = $1 AND slot_start IS NOT NULL", sh.merchantID); got != 3 {
		t.Errorf("%d scheduled orders in the database, want 3: a full slot writes nothing", got)
	}

	// The owner of the first cancels it, three times at once.
	var owner string
	for i, o := range out {
		if o.status == 201 && o.order.ID == ids[0] {
			owner = sh.login(t, fmt.Sprintf("slot-%d", i+1))
		}
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := sh.do(t, sh.apis[0], "POST", "/v1/orders/"+ids[0]+"/cancel", owner, nil); r.status != 200 {
				t.Errorf("cancel: %d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	conserved(2)
	late := sh.login(t, "slot-late")
	c := sh.confirm(t, sh.apis[0], late, cart(at))
	if r := sh.submit(t, sh.apis[0], late, "slot-late", c.ConfirmToken); r.status != 201 {
		t.Fatalf("the place given back: %d %s", r.status, r.body)
	}
	conserved(3)

	// The merchant rejects one after payment: its place comes back too.
	sh.markPaid(t, ids[1])
	if r := sh.staffAction(t, ids[1], "reject"); r.status != 200 {
		t.Fatalf("reject: %d %s", r.status, r.body)
	}
	conserved(2)

	// Accepted, its tickets wait until 20 minutes before the slot.
	printer := sh.do(t, sh.apis[0], "POST", "/admin/v1/merchants/"+sh.merchantID+"/printers", sh.admin,
		map[string]any{"name": "Counter", "provider": "feie", "device": "SLOT1", "role": "receipt", "category_ids": []string{}})
	if printer.status != 201 {
		t.Fatalf("add printer: %d %s", printer.status, printer.body)
	}
	sh.markPaid(t, ids[2])
	if r := sh.staffAction(t, ids[2], "accept"); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	var due time.Time
	if err := sh.pool.QueryRow(t.Context(), "SELECT next_try_at FROM print_jobs WHERE order_id = $1", ids[2]).Scan(&due); err != nil {
		t.Fatal(err)
	}
	if want := slot.Start.Add(-20 * time.Minute); !due.Equal(want) {
		t.Errorf("the ticket is due at %s, want %s (20 minutes before the slot)", due, want)
	}
}
