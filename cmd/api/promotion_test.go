package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/promotion"
)

// promotionOf adds a promotion to the shop's merchant as token (the
// fields over a spend-and-save of 5 yuan off 30, 12 off 60, funded by the
// merchant; a nil field is left out).
func (sh *shop) promotionOf(t testing.TB, token string, fields map[string]any) promotion.Promotion {
	t.Helper()
	body := map[string]any{
		"kind": "spend_save", "name": "5 off 30, 12 off 60", "funded_by": "merchant",
		"tiers": []map[string]int64{{"threshold_fen": 3000, "off_fen": 500}, {"threshold_fen": 6000, "off_fen": 1200}},
	}
	for k, v := range fields {
		if v == nil {
			delete(body, k)
		} else {
			body[k] = v
		}
	}
	r := sh.do(t, sh.apis[0], "POST", "/admin/v1/merchants/"+sh.merchantID+"/promotions", token, body)
	if r.status != 201 {
		t.Fatalf("create promotion: %d %s", r.status, r.body)
	}
	var p promotion.Promotion
	r.json(t, &p)
	return p
}

// The merchant's promotions on the menu, and what confirm makes of them:
// the best spend-and-save tier with free delivery above a total, each
// skipped promotion with its reason, the order recording what it got and
// who pays, and its total to the fen.
func TestPromotionsOnConfirmAndOrder(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 1000)
	api := sh.apis[0]
	spend := sh.promotionOf(t, sh.admin, nil)
	free := sh.promotionOf(t, sh.admin, map[string]any{"kind": "free_delivery", "name": "free delivery over 50",
		"tiers": []map[string]int64{{"threshold_fen": 5000, "off_fen": 0}}})
	shanghai, err := time.LoadLocation("Asia/Shanghai") // the merchant's time zone
	if err != nil {
		t.Fatal(err)
	}
	yesterday := time.Now().In(shanghai).AddDate(0, 0, -1).Format(time.DateOnly)
	ended := sh.promotionOf(t, sh.admin, map[string]any{"name": "ended yesterday", "starts_on": "2020-01-01", "ends_on": yesterday})
	later := sh.promotionOf(t, sh.admin, map[string]any{"name": "next year", "starts_on": "2099-01-01"})
	alone := sh.promotionOf(t, sh.admin, map[string]any{"kind": "new_customer", "name": "first order 8 off", "new_customer_scope": "platform",
		"tiers": []map[string]int64{{"threshold_fen": 0, "off_fen": 800}}, "stackable": false, "funded_by": "platform"})

	var menu catalog.Menu
	if r := sh.do(t, api, "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil); r.status != 200 {
		t.Fatalf("menu: %d %s", r.status, r.body)
	} else {
		r.json(t, &menu)
	}
	var onMenu []string
	for _, p := range menu.Promotions {
		onMenu = append(onMenu, p.Name)
	}
	if diff := cmp.Diff([]string{spend.Name, free.Name, later.Name, alone.Name}, onMenu); diff != "" {
		t.Errorf("the menu's promotions (-want +got):\n%s", diff)
	}

	// 7 units of a 1000-fen dish: 12 off 60 and free delivery (together
	// 12 + the fee) beat the first-order 8 off, which does not stack.
	user := sh.login(t, "promoted")
	c := sh.confirm(t, api, user, sh.cart(7))
	fee := int64(menu.Merchant.DeliveryFeeFen)
	wantDiscounts := []order.Discount{
		{Kind: "spend_save", PromotionID: spend.ID, Name: spend.Name, AmountFen: 1200, FundedBy: "merchant"},
		{Kind: "free_delivery", PromotionID: free.ID, Name: free.Name, AmountFen: fee, FundedBy: "merchant"},
	}
	if diff := cmp.Diff(wantDiscounts, c.Discounts); diff != "" {
		t.Errorf("discounts (-want +got):\n%s", diff)
	}
	reasons := map[string]string{}
	for _, s := range c.Skipped {
		reasons[s.PromotionID] = s.Reason
	}
	if diff := cmp.Diff(map[string]string{ended.ID: "expired", later.ID: "not_started", alone.ID: "not_stackable"}, reasons); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if c.DiscountFen != 1200 || c.DeliveryFeeFen != 0 || c.TotalFen != 7000+c.PackagingFeeFen-1200 {
		t.Errorf("confirm: discount %d, delivery %d, total %d", c.DiscountFen, c.DeliveryFeeFen, c.TotalFen)
	}

	r := sh.submit(t, api, user, "promoted-1", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	o := placedOrder(t, r)
	wantPromos := []order.OrderPromotion{
		{PromotionID: spend.ID, Version: spend.Version, Kind: "spend_save", Name: spend.Name, AmountFen: 1200, FundedBy: "merchant"},
		{PromotionID: free.ID, Version: free.Version, Kind: "free_delivery", Name: free.Name, AmountFen: fee, FundedBy: "merchant"},
	}
	if diff := cmp.Diff(wantPromos, o.Promotions); diff != "" {
		t.Errorf("the order's promotions (-want +got):\n%s", diff)
	}
	if o.DiscountFen != 1200 || o.MerchantDiscountFen != 1200 || o.PlatformDiscountFen != 0 || o.TotalFen != c.TotalFen || o.DeliveryFeeFen != 0 {
		t.Errorf("order: discount %d (merchant %d, platform %d), delivery %d, total %d; confirmed %d",
			o.DiscountFen, o.MerchantDiscountFen, o.PlatformDiscountFen, o.DeliveryFeeFen, o.TotalFen, c.TotalFen)
	}
	// What the database holds: the same, and the total adds up.
	if n := sh.count(t, `SELECT count(*) FROM orders WHERE id = $1 AND discount_fen = 1200 AND delivery_fee_fen = 0
		AND total_fen = items_total_fen + packaging_fee_fen - 1200 AND jsonb_array_length(promotions) = 2
		AND (SELECT sum(discount_fen) FROM order_items WHERE order_id = orders.id) = 1200`, o.ID); n != 1 {
		t.Errorf("the order's row does not add up")
	}
	var read order.Order
	if r := sh.do(t, api, "GET", "/v1/orders/"+o.ID, user, nil); r.status != 200 {
		t.Fatalf("read order: %d %s", r.status, r.body)
	} else {
		r.json(t, &read)
	}
	if diff := cmp.Diff(wantPromos, read.Promotions); diff != "" {
		t.Errorf("the order as read (-want +got):\n%s", diff)
	}

	// A cancel of an order whose promotions have no budget gives nothing
	// back, and fails nothing.
	if r := sh.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", user, nil); r.status != 200 {
		t.Errorf("cancel: %d %s", r.status, r.body)
	}
	// The metrics count what the order got and what its cancel gave back.
	metrics := sh.metrics(t, api)
	for _, line := range []string{
		`takeout_promotion_redemptions_total{event="applied",kind="spend_save"} 1`,
		`takeout_promotion_redemptions_total{event="applied",kind="free_delivery"} 1`,
		`takeout_promotion_redemptions_total{event="released",kind="spend_save"} 1`,
		`takeout_promotion_redemptions_total{event="released",kind="free_delivery"} 1`,
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("no %s in the metrics", line)
		}
	}

	// Below every threshold: nothing applies, each says why; the
	// first-order discount alone (it does not stack) beats nothing.
	small := sh.confirm(t, api, sh.login(t, "small"), sh.cart(1))
	if len(small.Discounts) != 1 || small.Discounts[0].PromotionID != alone.ID || small.DiscountFen != 800 {
		t.Errorf("a 10-yuan cart: discounts %+v", small.Discounts)
	}
	for _, s := range small.Skipped {
		if s.PromotionID == spend.ID && (s.Reason != "below_threshold" || s.ShortfallFen != 2000) {
			t.Errorf("spend and save on a 10-yuan cart: %+v", s)
		}
	}
}

// A change of a promotion after confirm: the cart's token places nothing
// (409 quote-changed) and the cart confirmed again gets the new terms.
func TestPromotionChangeRefusesOldQuotes(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 100)
	api := sh.apis[0]
	p := sh.promotionOf(t, sh.admin, nil)
	user := sh.login(t, "changed")
	c := sh.confirm(t, api, user, sh.cart(4))
	if c.DiscountFen != 500 {
		t.Fatalf("confirm: discount %d, want 500", c.DiscountFen)
	}
	r := sh.do(t, api, "PATCH", "/admin/v1/promotions/"+p.ID, sh.admin, map[string]any{"version": p.Version,
		"tiers": []map[string]int64{{"threshold_fen": 3000, "off_fen": 300}}})
	if r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	if r := sh.submit(t, api, user, "changed-1", c.ConfirmToken); r.status != 409 || r.problemType() != "quote-changed" {
		t.Errorf("submit of a cart quoted before the change: %d %s", r.status, r.body)
	}
	if n := sh.count(t, "SELECT count(*) FROM orders WHERE merchant_id = $1", sh.merchantID); n != 0 || sh.stock(t, 0) != 100 {
		t.Errorf("the refused submit wrote %d orders, stock %d", n, sh.stock(t, 0))
	}
	again := sh.confirm(t, api, user, sh.cart(4))
	if again.DiscountFen != 300 {
		t.Errorf("confirmed again: discount %d, want 300", again.DiscountFen)
	}
	if r := sh.submit(t, api, user, "changed-2", again.ConfirmToken); r.status != 201 {
		t.Errorf("submit under the new terms: %d %s", r.status, r.body)
	}
	// A stale version is a conflict, and changes nothing.
	r = sh.do(t, api, "PATCH", "/admin/v1/promotions/"+p.ID, sh.admin, map[string]any{"version": p.Version, "name": "stale"})
	if r.status != 409 || r.problemType() != "version-conflict" {
		t.Errorf("a stale update: %d %s", r.status, r.body)
	}
}

// A budget that covers five orders, spent by twenty customers' orders
// submitted at once over two instances: five get the promotion, the
// others are told its budget is spent and take nothing; the budget is
// exactly spent, never beyond, and a cancel gives its part back.
func TestPromotionBudgetStorm(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 1000)
	p := sh.promotionOf(t, sh.admin, map[string]any{"budget_fen": 5 * 500,
		"tiers": []map[string]int64{{"threshold_fen": 3000, "off_fen": 500}}})
	users := make([]string, 20)
	confirms := make([]order.ConfirmResponse, 20)
	for i := range confirms {
		users[i] = sh.login(t, fmt.Sprintf("budget-%d", i))
		confirms[i] = sh.confirm(t, sh.apis[i%2], users[i], sh.cart(3))
		if confirms[i].DiscountFen != 500 {
			t.Fatalf("confirm %d: discount %d", i, confirms[i].DiscountFen)
		}
	}
	answers := make([]response, len(confirms))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range confirms {
		wg.Go(func() {
			<-start
			answers[i] = sh.submitUntilAnswered(t, sh.apis[i%2], users[i], "budget", confirms[i].ConfirmToken)
		})
	}
	close(start)
	wg.Wait()
	var placed []order.Placed
	for i, r := range answers {
		switch {
		case r.status == 201:
			placed = append(placed, placedOrder(t, r))
		case r.status == 409 && r.problemType() == "promotion-unavailable" && r.problemMember(t, "reason") == "budget_spent":
		default:
			t.Errorf("order %d: %d %s", i, r.status, r.body)
		}
	}
	if len(placed) != 5 {
		t.Errorf("%d orders placed with a budget for 5", len(placed))
	}
	if n := sh.count(t, "SELECT count(*) FROM orders WHERE merchant_id = $1", sh.merchantID); n != len(placed) {
		t.Errorf("%d orders in the database, %d placed", n, len(placed))
	}
	if left := sh.count(t, "SELECT sum(remaining) FROM promotion_budget WHERE promotion_id = $1", p.ID); left != 0 {
		t.Errorf("budget left %d, want 0", left)
	}
	if got, want := sh.stock(t, 0), 1000-3*len(placed); got != want {
		t.Errorf("stock %d, want %d: refused orders take none", got, want)
	}
	// Confirmed now, the promotion is skipped as spent; that order placed
	// without it stays itself when its cart is confirmed again after the
	// budget came back (below).
	latecomer := sh.login(t, "budget-late")
	late := sh.confirm(t, sh.apis[0], latecomer, sh.cart(4))
	if late.DiscountFen != 0 || len(late.Skipped) != 1 || late.Skipped[0].Reason != "budget_spent" {
		t.Errorf("a confirm after the budget ran out: discount %d, skipped %+v", late.DiscountFen, late.Skipped)
	}
	lateOrder := sh.submit(t, sh.apis[0], latecomer, "budget-late", late.ConfirmToken)
	if lateOrder.status != 201 {
		t.Fatalf("the late order: %d %s", lateOrder.status, lateOrder.body)
	}
	// A cancel gives its part back. Before it, the placed cart confirmed
	// again by its customer (a second tap) is that order, with what it
	// got, though the budget is spent now.
	if len(placed) > 0 {
		o := placed[0]
		owner := users[0]
		for i, r := range answers {
			if r.status == 201 && placedOrder(t, r).ID == o.ID {
				owner = users[i]
			}
		}
		if re := sh.confirm(t, sh.apis[1], owner, sh.cart(3)); !re.Duplicate || re.OrderID != o.ID || re.DiscountFen != 500 {
			t.Errorf("the placed cart confirmed again: duplicate %v, order %s (placed %s), discount %d", re.Duplicate, re.OrderID, o.ID, re.DiscountFen)
		}
		if r := sh.do(t, sh.apis[0], "POST", "/v1/orders/"+o.ID+"/cancel", owner, nil); r.status != 200 {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		if left := sh.count(t, "SELECT sum(remaining) FROM promotion_budget WHERE promotion_id = $1", p.ID); left != 500 {
			t.Errorf("budget left after a cancel: %d, want 500", left)
		}
		again := sh.confirm(t, sh.apis[1], latecomer, sh.cart(4))
		if id := placedOrder(t, lateOrder).ID; !again.Duplicate || again.OrderID != id || again.DiscountFen != 0 {
			t.Errorf("the late cart confirmed again once the budget came back: duplicate %v, order %s (placed %s), discount %d",
				again.Duplicate, again.OrderID, id, again.DiscountFen)
		}
		if fresh := sh.confirm(t, sh.apis[1], latecomer, sh.cart(5)); fresh.DiscountFen != 500 {
			t.Errorf("another cart once the budget came back: discount %d, want 500", fresh.DiscountFen)
		}
	}
}

// A new customer's ten first orders at once (ten different carts, each
// quoted with the first-order discount): one gets it, the others are told
// and take nothing; after that order is cancelled the customer is new
// again, and once an order is paid they are not.
func TestNewCustomerDiscountOnce(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 1000)
	p := sh.promotionOf(t, sh.admin, map[string]any{"kind": "new_customer", "name": "first order 8 off", "new_customer_scope": "merchant",
		"tiers": []map[string]int64{{"threshold_fen": 0, "off_fen": 800}}})
	user := sh.login(t, "newcomer")
	confirms := make([]order.ConfirmResponse, 10)
	for i := range confirms {
		confirms[i] = sh.confirm(t, sh.apis[i%2], user, sh.cart(int32(1+i))) //nolint:gosec // G115: small
		if len(confirms[i].Discounts) != 1 || confirms[i].Discounts[0].PromotionID != p.ID {
			t.Fatalf("confirm %d: %+v", i, confirms[i].Discounts)
		}
	}
	answers := make([]response, len(confirms))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range confirms {
		wg.Go(func() {
			<-start
			answers[i] = sh.submitUntilAnswered(t, sh.apis[i%2], user, fmt.Sprintf("first-%d", i), confirms[i].ConfirmToken)
		})
	}
	close(start)
	wg.Wait()
	var first []order.Placed
	for i, r := range answers {
		switch {
		case r.status == 201:
			first = append(first, placedOrder(t, r))
		case r.status == 409 && r.problemType() == "promotion-unavailable" && r.problemMember(t, "reason") == "not_new_customer":
		default:
			t.Errorf("order %d: %d %s", i, r.status, r.body)
		}
	}
	if len(first) != 1 {
		t.Fatalf("%d first orders placed", len(first))
	}
	if n := sh.count(t, "SELECT count(*) FROM new_customer_claims WHERE order_id = $1", first[0].ID); n != 1 ||
		sh.count(t, "SELECT count(*) FROM orders WHERE merchant_id = $1", sh.merchantID) != 1 {
		t.Errorf("claims of the first order %d; orders %d", n, sh.count(t, "SELECT count(*) FROM orders WHERE merchant_id = $1", sh.merchantID))
	}
	if c := sh.confirm(t, sh.apis[0], user, sh.cart(20)); len(c.Skipped) != 1 || c.Skipped[0].Reason != "not_new_customer" {
		t.Errorf("a confirm of another cart while the first order stands: skipped %+v", c.Skipped)
	}
	// The first order's own cart confirmed again (a second tap) is that
	// order, with its discount.
	for i, r := range answers {
		if r.status != 201 {
			continue
		}
		re := sh.confirm(t, sh.apis[1], user, sh.cart(int32(1+i))) //nolint:gosec // G115: small
		if !re.Duplicate || re.OrderID != first[0].ID || re.DiscountFen != 800 {
			t.Errorf("the first order's cart confirmed again: duplicate %v, order %s (first %s), discount %d", re.Duplicate, re.OrderID, first[0].ID, re.DiscountFen)
		}
	}
	if r := sh.do(t, sh.apis[0], "POST", "/v1/orders/"+first[0].ID+"/cancel", user, nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	again := sh.confirm(t, sh.apis[0], user, sh.cart(2))
	if again.DiscountFen != 800 {
		t.Fatalf("after the cancel: discount %d, want 800", again.DiscountFen)
	}
	r := sh.submit(t, sh.apis[0], user, "first-again", again.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("the first order again: %d %s", r.status, r.body)
	}
	sh.markPaid(t, placedOrder(t, r).ID)
	if c := sh.confirm(t, sh.apis[0], user, sh.cart(3)); c.DiscountFen != 0 {
		t.Errorf("after a paid first order: discount %d", c.DiscountFen)
	}
}

// Bad promotions are refused with a problem and write nothing; a
// merchant's staff may not make one the platform funds, nor one for
// another merchant.
func TestPromotionValidation(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10)
	api := sh.apis[0]
	path := "/admin/v1/merchants/" + sh.merchantID + "/promotions"
	tier := func(th, off int64) []map[string]int64 {
		return []map[string]int64{{"threshold_fen": th, "off_fen": off}}
	}
	for name, body := range map[string]map[string]any{
		"no kind":                 {"name": "x", "funded_by": "merchant", "tiers": tier(3000, 500)},
		"unknown kind":            {"kind": "bogo", "name": "x", "funded_by": "merchant", "tiers": tier(3000, 500)},
		"off not below":           {"kind": "spend_save", "name": "x", "funded_by": "merchant", "tiers": tier(3000, 3000)},
		"falling tiers":           {"kind": "spend_save", "name": "x", "funded_by": "merchant", "tiers": []map[string]int64{{"threshold_fen": 6000, "off_fen": 1000}, {"threshold_fen": 3000, "off_fen": 500}}},
		"free delivery off":       {"kind": "free_delivery", "name": "x", "funded_by": "merchant", "tiers": tier(3000, 100)},
		"no scope":                {"kind": "new_customer", "name": "x", "funded_by": "merchant", "tiers": tier(0, 500)},
		"bad date":                {"kind": "spend_save", "name": "x", "funded_by": "merchant", "tiers": tier(3000, 500), "starts_on": "2026-13-01"},
		"ends before starts":      {"kind": "spend_save", "name": "x", "funded_by": "merchant", "tiers": tier(3000, 500), "starts_on": "2026-12-10", "ends_on": "2026-12-01"},
		"hours one sided":         {"kind": "spend_save", "name": "x", "funded_by": "merchant", "tiers": tier(3000, 500), "daily_from": "11:00"},
		"hours backwards":         {"kind": "spend_save", "name": "x", "funded_by": "merchant", "tiers": tier(3000, 500), "daily_from": "14:00", "daily_until": "11:00"},
		"zero budget":             {"kind": "spend_save", "name": "x", "funded_by": "merchant", "tiers": tier(3000, 500), "budget_fen": 0},
		"unknown field":           {"kind": "spend_save", "name": "x", "funded_by": "merchant", "tiers": tier(3000, 500), "bogus": 1},
		"no funder":               {"kind": "spend_save", "name": "x", "tiers": tier(3000, 500)},
		"six tiers":               {"kind": "spend_save", "name": "x", "funded_by": "merchant", "tiers": []map[string]int64{{"threshold_fen": 100, "off_fen": 1}, {"threshold_fen": 200, "off_fen": 2}, {"threshold_fen": 300, "off_fen": 3}, {"threshold_fen": 400, "off_fen": 4}, {"threshold_fen": 500, "off_fen": 5}, {"threshold_fen": 600, "off_fen": 6}}},
		"two free delivery tiers": {"kind": "free_delivery", "name": "x", "funded_by": "merchant", "tiers": []map[string]int64{{"threshold_fen": 100, "off_fen": 0}, {"threshold_fen": 200, "off_fen": 0}}},
	} {
		if r := sh.do(t, api, "POST", path, sh.admin, body); r.status != 400 || r.problemType() != "invalid-request" {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	// A merchant's staff: their own, funded by them; not the platform's
	// money, not another merchant.
	sh.createStaff(t, "promo-staff", "a long enough password")
	st := sh.staffLogin(t, api, "promo-staff", "a long enough password").Token
	sh.promotionOf(t, st, map[string]any{"name": "staff made"})
	if r := sh.do(t, api, "POST", path, st, map[string]any{"kind": "spend_save", "name": "platform money", "funded_by": "platform",
		"tiers": tier(3000, 500)}); r.status != 403 {
		t.Errorf("staff making a platform-funded promotion: %d %s", r.status, r.body)
	}
	other := createMerchant(t, sh.stack, api, "Another Kitchen")
	if r := sh.do(t, api, "POST", "/admin/v1/merchants/"+other+"/promotions", st, map[string]any{"kind": "spend_save", "name": "theirs",
		"funded_by": "merchant", "tiers": tier(3000, 500)}); r.status != 403 {
		t.Errorf("staff making another merchant's promotion: %d %s", r.status, r.body)
	}
	if r := sh.do(t, api, "POST", path, sh.admin, map[string]any{"kind": "spend_save", "name": "staff made", "funded_by": "merchant",
		"tiers": tier(3000, 500)}); r.status != 409 || r.problemType() != "already-exists" {
		t.Errorf("a second promotion of one name: %d %s", r.status, r.body)
	}
	var list promotion.List
	if r := sh.do(t, api, "GET", path, sh.admin, nil); r.status != 200 {
		t.Fatalf("list: %d %s", r.status, r.body)
	} else {
		r.json(t, &list)
	}
	var names []string
	for _, p := range list.Promotions {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"staff made"}, names); diff != "" {
		t.Errorf("what was created (-want +got):\n%s", diff)
	}
}
