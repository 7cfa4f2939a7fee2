package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/order"
)

// Confirm quotes a cart from one read of the merchant and its dishes:
// each way a cart can be refused gets its own problem, naming what is
// wrong, and a good cart gets the merchant's fee and the dishes' prices.
func TestConfirmAnswers(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10, 10, 10)
	api := sh.apis[0]
	user := sh.login(t, "confirmer")
	offSale := sh.dishes[2]
	if r := sh.do(t, api, "PATCH", "/admin/v1/dishes/"+offSale.ID, sh.admin, map[string]any{"version": offSale.Version, "on_sale": false}); r.status != 200 {
		t.Fatalf("take dish off sale: %d %s", r.status, r.body)
	}
	closed := createMerchant(t, sh.stack, api, "Closed Kitchen")
	closedDish := createDish(t, sh.stack, api, sh.admin, closed, "Cold Tea", 300, 5)
	if r := sh.do(t, api, "PATCH", "/admin/v1/merchants/"+closed, sh.admin, map[string]any{"version": 1, "status": "closed"}); r.status != 200 {
		t.Fatalf("close merchant: %d %s", r.status, r.body)
	}
	other := createMerchant(t, sh.stack, api, "Other Kitchen")
	otherDish := createDish(t, sh.stack, api, sh.admin, other, "Noodles", 800, 5)

	cart := func(merchant string, items ...any) map[string]any {
		var lines []map[string]any
		for i := 0; i < len(items); i += 2 {
			lines = append(lines, map[string]any{"dish_id": items[i], "qty": items[i+1]})
		}
		return map[string]any{"merchant_id": merchant, "items": lines,
			"address": map[string]string{"name": "Li Lei", "phone": "13800138000", "detail": "Room 1"}}
	}
	d0, d1 := sh.dishes[0], sh.dishes[1]
	tests := []struct {
		name       string
		cart       map[string]any
		wantStatus int
		wantType   string
		wantInBody string // a field or dish the problem names
	}{
		{"no such merchant", cart("999999", d0.ID, 1), 404, "not-found", "merchant"},
		{"closed merchant", cart(closed, closedDish.ID, 1), 409, "merchant-closed", "closed"},
		{"dish of another merchant", cart(sh.merchantID, d0.ID, 1, otherDish.ID, 1), 400, "invalid-request", "items[1].dish_id"},
		{"only dishes of another merchant", cart(other, d0.ID, 1), 400, "invalid-request", "items[0].dish_id"},
		{"no such dish", cart(sh.merchantID, "999999", 1), 400, "invalid-request", "items[0].dish_id"},
		{"dish off sale", cart(sh.merchantID, d0.ID, 1, offSale.ID, 1), 409, "dish-unavailable", offSale.Name},
		{"more than the stock", cart(sh.merchantID, d1.ID, 11), 409, "out-of-stock", d1.ID},
	}
	before := snapshot(t, sh.stack)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sh.do(t, api, "POST", "/v1/orders/confirm", user, tt.cart)
			if r.status != tt.wantStatus || r.problemType() != tt.wantType {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, tt.wantStatus, tt.wantType)
			}
			if !strings.Contains(string(r.body), tt.wantInBody) {
				t.Errorf("problem %s does not name %q", r.body, tt.wantInBody)
			}
		})
	}
	if after := snapshot(t, sh.stack); after != before {
		t.Errorf("a refused confirm changed the catalog:\nbefore %s\nafter  %s", before, after)
	}

	t.Run("a good cart", func(t *testing.T) {
		c := sh.confirm(t, api, user, cart(sh.merchantID, d1.ID, 2, d0.ID, 1))
		want := []order.Item{
			{DishID: d0.ID, Name: d0.Name, Options: []order.ItemOption{}, Qty: 1, UnitPriceFen: 1000, LineTotalFen: 1000},
			{Line: 1, DishID: d1.ID, Name: d1.Name, Options: []order.ItemOption{}, Qty: 2, UnitPriceFen: 2000, LineTotalFen: 4000},
		}
		if diff := cmp.Diff(want, c.Items); diff != "" {
			t.Errorf("items (-want +got):\n%s", diff)
		}
		if c.ItemsTotalFen != 5000 || c.DeliveryFeeFen != 500 || c.TotalFen != 5500 {
			t.Errorf("totals %d + %d = %d, want 5000 + 500 = 5500", c.ItemsTotalFen, c.DeliveryFeeFen, c.TotalFen)
		}
		if c.ConfirmToken == "" || c.OrderID == "" {
			t.Errorf("no token or order id: %+v", c)
		}
	})
}
