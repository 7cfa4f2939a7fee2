package main

import (
	"sync"
	"testing"

	"github.com/takeout/takeout/internal/order"
)

// Urging an order: once per interval (429 with Retry-After sooner), only
// while the merchant works on it, only one's own; a storm of urges makes
// one urge and one order event, which reaches the merchant's webhook.
func TestUrge(t *testing.T) {
	t.Parallel()
	const secret = "webhook-secret-urge-0123456789"
	rc := newReceiver(t, secret, 0)
	sh := newShop(t, 2, map[string]string{
		"TAKEOUT_WEBHOOK_URL": rc.srv.URL, "TAKEOUT_WEBHOOK_SECRET": secret, "TAKEOUT_JOB_POLL_INTERVAL": "50ms",
		"TAKEOUT_ORDER_URGE_INTERVAL": "1h",
	}, 20)
	user := sh.login(t, "urger")
	pending := sh.place(t, user, "urge-pending", 1)
	if r := sh.do(t, sh.apis[0], "POST", "/v1/orders/"+pending.ID+"/urge", user, nil); r.status != 409 || r.problemType() != "order-status-conflict" {
		t.Errorf("urge an unpaid order: %d %s", r.status, r.body)
	}
	paid := sh.place(t, user, "urge-paid", 2)
	sh.markPaid(t, paid.ID)
	if r := sh.do(t, sh.apis[0], "POST", "/v1/orders/"+paid.ID+"/urge", sh.login(t, "stranger"), nil); r.status != 404 {
		t.Errorf("urge another's order: %d %s", r.status, r.body)
	}

	answers := make([]response, 30)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = sh.do(t, sh.apis[i%2], "POST", "/v1/orders/"+paid.ID+"/urge", user, nil) })
	}
	wg.Wait()
	urged, limited := 0, 0
	for _, r := range answers {
		switch {
		case r.status == 200:
			urged++
		case r.status == 429 && r.problemType() == "rate-limited" && r.header.Get("Retry-After") != "":
			limited++
		default:
			t.Errorf("urge: %d %s (Retry-After %q)", r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	if urged != 1 || limited != 29 {
		t.Errorf("%d urged, %d limited; want 1 and 29", urged, limited)
	}
	if n := sh.count(t, "SELECT urge_count FROM orders WHERE id = $1", paid.ID); n != 1 {
		t.Errorf("urge_count %d, want 1", n)
	}
	waitUntil(t, "the urge's webhook", func() bool {
		for _, d := range rc.deliveries() {
			if d.eventID == paid.ID+":order.urged:1" && d.answered == 200 {
				return true
			}
		}
		return false
	})
	if n := sh.count(t, "SELECT count(*) FROM river_job WHERE kind = 'webhook.deliver' AND args->'event'->>'type' = 'order.urged'"); n != 1 {
		t.Errorf("%d order.urged events, want 1", n)
	}
}

// Ordering again: the past order's lines at today's prices, a repriced
// line named, a line that cannot be had dropped and named, and the new
// token places a new order.
func TestReorder(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 20, 20)
	api := sh.apis[0]
	ids := sh.giveOptions(t, 0)
	user := sh.login(t, "again")
	cart := sh.cart(0, 2)
	cart["items"] = append(cart["items"].([]map[string]any),
		map[string]any{"dish_id": sh.dishes[0].ID, "qty": 1, "options": []string{ids["Large"], ids["Egg"]}},
		map[string]any{"dish_id": sh.dishes[0].ID, "qty": 1, "options": []string{ids["Regular"], ids["Tofu"]}})
	c := sh.confirm(t, api, user, cart)
	r := sh.submit(t, api, user, "first", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	first := placedOrder(t, r)
	soloQuote := sh.confirm(t, api, user, sh.cart(0, 1))
	if r := sh.submit(t, api, user, "solo", soloQuote.ConfirmToken); r.status != 201 {
		t.Fatalf("submit solo: %d %s", r.status, r.body)
	}

	// Dish 1 costs more now; Tofu is gone from dish 0's options.
	if r := sh.do(t, api, "PATCH", "/admin/v1/dishes/"+sh.dishes[1].ID, sh.admin, map[string]any{"version": sh.dishes[1].Version, "price_fen": 2500}); r.status != 200 {
		t.Fatalf("reprice: %d %s", r.status, r.body)
	}
	opts := testOptions(sh.dishes[0].Version)
	groups := opts["groups"].([]map[string]any)
	for g, names := range [][]string{{"Regular", "Large"}, {"Egg", "Tofu", "Chili oil"}} {
		for c, name := range names {
			groups[g]["choices"].([]map[string]any)[c]["id"] = ids[name]
		}
	}
	groups[1]["choices"] = []map[string]any{groups[1]["choices"].([]map[string]any)[0], groups[1]["choices"].([]map[string]any)[2]}
	if r := sh.do(t, api, "PUT", "/admin/v1/dishes/"+sh.dishes[0].ID+"/options", sh.admin, opts); r.status != 200 {
		t.Fatalf("drop Tofu: %d %s", r.status, r.body)
	}

	r = sh.do(t, api, "POST", "/v1/orders/"+first.ID+"/reorder", user, nil)
	if r.status != 200 {
		t.Fatalf("reorder: %d %s", r.status, r.body)
	}
	var again order.ReorderResponse
	r.json(t, &again)
	if len(again.Dropped) != 1 || again.Dropped[0].DishID != sh.dishes[0].ID || again.Dropped[0].WasUnitPriceFen != 1200 {
		t.Errorf("dropped %+v, want the regular dish 0 with tofu (1200 fen)", again.Dropped)
	}
	if len(again.Repriced) != 1 || again.Repriced[0].DishID != sh.dishes[1].ID || again.Repriced[0].WasUnitPriceFen != 2000 || again.Repriced[0].UnitPriceFen != 2500 {
		t.Errorf("repriced %+v, want dish 1 from 2000 to 2500", again.Repriced)
	}
	if len(again.Items) != 2 || again.ItemsTotalFen != 2*2500+1450 || again.OrderID == first.ID || again.Duplicate {
		t.Errorf("the new quote: %d lines, items %d (want %d), order %s (first %s), duplicate %v",
			len(again.Items), again.ItemsTotalFen, 2*2500+1450, again.OrderID, first.ID, again.Duplicate)
	}
	if r := sh.submit(t, api, user, "again", again.ConfirmToken); r.status != 201 {
		t.Errorf("submit the reorder: %d %s", r.status, r.body)
	}
	if n := sh.count(t, "SELECT count(*) FROM orders"); n != 3 {
		t.Errorf("%d orders, want 3", n)
	}
	if r := sh.do(t, api, "POST", "/v1/orders/"+first.ID+"/reorder", sh.login(t, "stranger"), nil); r.status != 404 {
		t.Errorf("reorder another's order: %d", r.status)
	}

	// Nothing left to order: 409 naming every line, and no quote.
	if r := sh.do(t, api, "PATCH", "/admin/v1/dishes/"+sh.dishes[1].ID, sh.admin, map[string]any{"version": sh.dishes[1].Version + 1, "on_sale": false}); r.status != 200 {
		t.Fatalf("off sale: %d %s", r.status, r.body)
	}
	r = sh.do(t, api, "POST", "/v1/orders/"+placedOrder(t, sh.submit(t, api, user, "solo", soloQuote.ConfirmToken)).ID+"/reorder", user, nil)
	if r.status != 409 || r.problemType() != "dish-unavailable" {
		t.Errorf("reorder of nothing available: %d %s", r.status, r.body)
	}
}
