package main

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/takeout/takeout/internal/order"
)

// A confirm prices carts from a cache of the merchant's menu, and yet
// quotes the menu as it is now, whoever changed it: a price or a dish put
// off sale straight in the database (a writer no instance heard of), a
// price changed through another instance, the stock, a promotion's
// budget spent, the merchant closed or its fee raised. Each confirm after
// a change sees it; one after none is served from the cache.
func TestConfirmQuotesTheMenuAsItIsNow(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 100)
	api, other := sh.apis[0], sh.apis[1]
	promo := sh.promotionOf(t, sh.admin, map[string]any{"budget_fen": 5000,
		"tiers": []map[string]int64{{"threshold_fen": 3000, "off_fen": 500}}})
	user := sh.login(t, "quote-cache")
	dishID := sh.dishes[0].ID
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := sh.db(t).Exec(context.Background(), q, args...); err != nil {
			t.Fatal(err)
		}
	}
	patchDish := func(fields map[string]any) {
		t.Helper()
		fields["version"] = sh.dish(t, 0).Version
		if r := sh.do(t, other, "PATCH", "/admin/v1/dishes/"+dishID, sh.admin, fields); r.status != 200 {
			t.Fatalf("patch dish on the other instance: %d %s", r.status, r.body)
		}
	}
	setStock := func(n int32) {
		t.Helper()
		if r := sh.do(t, other, "PUT", "/admin/v1/dishes/"+dishID+"/stock", sh.admin, map[string]any{"on_hand": n}); r.status != 200 {
			t.Fatalf("set stock on the other instance: %d %s", r.status, r.body)
		}
	}
	type want struct {
		items, discount, fee int64
		problem              string // the confirm's problem type; "" for 200
	}
	steps := []struct {
		name   string
		change func()
		want   want
	}{
		{"as created", func() {}, want{items: 4000, discount: 500, fee: 500}},
		{"nothing changed", func() {}, want{items: 4000, discount: 500, fee: 500}},
		{"price written straight into the database", func() {
			exec("UPDATE dishes SET price_fen = 1100, version = version + 1 WHERE id = $1", dishID)
		}, want{items: 4400, discount: 500, fee: 500}},
		{"price changed through the other instance", func() { patchDish(map[string]any{"price_fen": 1200}) }, want{items: 4800, discount: 500, fee: 500}},
		{"off sale in the database", func() {
			exec("UPDATE dishes SET on_sale = false, version = version + 1 WHERE id = $1", dishID)
		}, want{problem: "dish-unavailable"}},
		{"on sale again", func() { patchDish(map[string]any{"on_sale": true}) }, want{items: 4800, discount: 500, fee: 500}},
		{"stock down to three", func() { setStock(3) }, want{problem: "out-of-stock"}},
		{"stock back", func() { setStock(100) }, want{items: 4800, discount: 500, fee: 500}},
		{"the promotion's budget spent by other orders", func() {
			exec("UPDATE promotion_budget SET remaining = 0 WHERE promotion_id = $1", promo.ID)
		}, want{items: 4800, discount: 0, fee: 500}},
		{"the merchant closed in the database", func() {
			exec("UPDATE merchants SET status = 'closed', version = version + 1 WHERE id = $1", sh.merchantID)
		}, want{problem: "merchant-closed"}},
		{"open again, the fee raised", func() {
			exec("UPDATE merchants SET status = 'open', delivery_fee_fen = 800, version = version + 1, quote_version = quote_version + 1 WHERE id = $1", sh.merchantID)
		}, want{items: 4800, discount: 0, fee: 800}},
	}
	cachedBefore := quoteReads(t, sh, api, "cached")
	for _, st := range steps {
		st.change()
		r := sh.do(t, api, "POST", "/v1/orders/confirm", user, sh.cart(4))
		if st.want.problem != "" {
			if r.status == 200 || r.problemType() != st.want.problem {
				t.Errorf("%s: confirm %d %s, want %s", st.name, r.status, r.body, st.want.problem)
			}
			continue
		}
		if r.status != 200 {
			t.Errorf("%s: confirm %d %s", st.name, r.status, r.body)
			continue
		}
		var c order.ConfirmResponse
		r.json(t, &c)
		got := want{items: c.ItemsTotalFen, discount: c.DiscountFen, fee: c.DeliveryFeeFen}
		if got != st.want {
			t.Errorf("%s: confirm quoted items %d, discount %d, fee %d; want %d, %d, %d", st.name,
				got.items, got.discount, got.fee, st.want.items, st.want.discount, st.want.fee)
		}
		if st.name == "nothing changed" {
			if n := quoteReads(t, sh, api, "cached"); n <= cachedBefore {
				t.Errorf("a confirm of a menu unchanged since the last: not from the cache (cached reads %v, before %v)", n, cachedBefore)
			}
		}
	}
}

// quoteReads is the instance's count of confirms by where their menu came
// from (takeout_order_quote_reads_total).
func quoteReads(t *testing.T, sh *shop, inst *instance, source string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^takeout_order_quote_reads_total\{source="` + source + `"\} (\S+)$`).FindStringSubmatch(sh.metrics(t, inst))
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
