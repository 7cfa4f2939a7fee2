package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/ledger"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/wxsim"
)

// ledgerHolds checks an order's ledger against its payments and refunds:
// its cash entries come to what was paid less what was refunded, and all
// its entries sum to zero.
func (sh *shop) ledgerHolds(t *testing.T, orderID string) {
	t.Helper()
	var expected, cash, sum int64
	err := sh.stack.pool.QueryRow(t.Context(), `SELECT expected_fen, cash_fen, sum_fen FROM (
		SELECT (SELECT coalesce(sum(amount_fen), 0) FROM payments WHERE order_id = $1 AND status IN ('SUCCESS', 'REFUNDED'))
		     - (SELECT coalesce(sum(amount_fen), 0) FROM refunds WHERE order_id = $1 AND transaction_id IS NULL AND status IN ('SUCCESS', 'SETTLED')) AS expected_fen,
		       (SELECT coalesce(sum(amount_fen), 0) FROM ledger_entries WHERE order_id = $1 AND account IN ('wechat_clearing', 'refunds_outside', 'platform_shared', 'merchant_settled')) AS cash_fen,
		       (SELECT coalesce(sum(amount_fen), 0) FROM ledger_entries WHERE order_id = $1) AS sum_fen) x`, orderID).Scan(&expected, &cash, &sum)
	if err != nil {
		t.Fatal(err)
	}
	if expected != cash || sum != 0 {
		t.Errorf("order %s: paid less refunded %d, the ledger's cash %d, all entries sum to %d (want 0)", orderID, expected, cash, sum)
	}
}

// balances reads an order's ledger through the API, as token.
func (sh *shop) balances(t *testing.T, token, orderID string) ledger.OrderLedger {
	t.Helper()
	r := sh.do(t, sh.apis[0], "GET", "/admin/v1/orders/"+orderID+"/ledger", token, nil)
	if r.status != 200 {
		t.Fatalf("ledger of %s: %d %s", orderID, r.status, r.body)
	}
	var l ledger.OrderLedger
	r.json(t, &l)
	return l
}

// A sale with a discount the platform funds and the merchant's
// commission, posted once however many copies of its callback race;
// refunds taking back their share of each, the last one to the fen; and
// the ledger as staff read it.
func TestLedgerFollowsTheMoney(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10, 10)
	admin := ps.staffToken(t, "admin")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	other := ps.staffToken(t, "merchant:"+createMerchant(t, ps.stack, ps.apis[0], "Other Kitchen"))

	commission := "/admin/v1/merchants/" + ps.merchantID + "/commission"
	for name, tt := range map[string]struct {
		token  string
		body   any
		status int
	}{
		"over half":        {admin, map[string]any{"commission_bps": 5001}, 400},
		"negative":         {admin, map[string]any{"commission_bps": -1}, 400},
		"missing":          {admin, map[string]any{}, 400},
		"the merchant own": {staff, map[string]any{"commission_bps": 0}, 403},
	} {
		if r := ps.do(t, ps.apis[0], "PUT", commission, tt.token, tt.body); r.status != tt.status {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, tt.status)
		}
	}
	if n := ps.count(t, "SELECT commission_bps FROM merchants WHERE id = $1", ps.merchantID); n != 0 {
		t.Fatalf("refused requests set the commission to %d", n)
	}
	if r := ps.do(t, ps.apis[0], "PUT", commission, admin, map[string]any{"commission_bps": 800}); r.status != 200 {
		t.Fatalf("set commission: %d %s", r.status, r.body)
	}
	ps.promotionOf(t, admin, map[string]any{"name": "platform 5 off 30", "funded_by": "platform",
		"tiers": []map[string]int64{{"threshold_fen": 3000, "off_fen": 500}}})

	user := ps.login(t, "ledger")
	c := ps.confirm(t, ps.apis[0], user, ps.cart(3, 1)) // 3 x 1000 + 1 x 2000 + 500 delivery, 500 off
	r := ps.submit(t, ps.apis[0], user, "ledger", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	o := placedOrder(t, r)
	if o.TotalFen != 5000 || o.PlatformDiscountFen != 500 {
		t.Fatalf("order total %d, platform discount %d; want 5000 and 500", o.TotalFen, o.PlatformDiscountFen)
	}
	ps.pay(t, user, o.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1), Copies: 5, Concurrent: true, Retries: 10, RetryMS: 20})
	waitUntil(t, "the order to be paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", o.ID) == 1
	})
	sale := map[string]int64{
		"wechat_clearing": 5000, "platform_promotions": 500, "merchant_sales": -5500,
		"merchant_commission": 440, "platform_commission": -440, // 8% of the 5500 the merchant sells at
	}
	l := ps.balances(t, staff, o.ID)
	if diff := cmp.Diff(sale, l.Balances); diff != "" || len(l.Entries) != 5 || l.NetReceivedFen != 5000 {
		t.Errorf("after five copies of the payment's callback (-want +got):\n%s%d entries, net %d", diff, len(l.Entries), l.NetReceivedFen)
	}
	ps.ledgerHolds(t, o.ID)
	if r := ps.do(t, ps.apis[0], "GET", "/admin/v1/orders/"+o.ID+"/ledger", other, nil); r.status != 404 {
		t.Errorf("another merchant's staff read the ledger: %d", r.status)
	}

	// A fifth of what was paid back: a fifth of the platform's discount
	// and of the commission go back with it.
	if r := ps.refundPart(t, staff, o.ID, "fifth", `{"amount_fen":1000,"reason":"late"}`); r.status != 201 {
		t.Fatalf("refund: %d %s", r.status, r.body)
	}
	waitUntil(t, "the refund to succeed", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", o.ID) == 1
	})
	want := map[string]int64{
		"wechat_clearing": 4000, "platform_promotions": 400, "merchant_sales": -5500, "merchant_refunds": 1100,
		"merchant_commission": 352, "platform_commission": -352,
	}
	if diff := cmp.Diff(want, ps.balances(t, admin, o.ID).Balances); diff != "" {
		t.Errorf("after refunding 1000 of 5000 (-want +got):\n%s", diff)
	}
	ps.ledgerHolds(t, o.ID)

	// The rest: every account of the order back to zero but the sale and
	// its refunds.
	if r := ps.refundPart(t, staff, o.ID, "rest", `{"amount_fen":4000,"reason":"sorry"}`); r.status != 201 {
		t.Fatalf("refund: %d %s", r.status, r.body)
	}
	waitUntil(t, "the order to be refunded", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDED'", o.ID) == 1
	})
	want = map[string]int64{"wechat_clearing": 0, "platform_promotions": 0, "merchant_sales": -5500, "merchant_refunds": 5500,
		"merchant_commission": 0, "platform_commission": 0}
	l = ps.balances(t, admin, o.ID)
	if diff := cmp.Diff(want, l.Balances); diff != "" || l.NetReceivedFen != 0 {
		t.Errorf("refunded in full (-want +got):\n%snet %d", diff, l.NetReceivedFen)
	}
	ps.ledgerHolds(t, o.ID)
}

// A merchant's statement is its ledger by day: each figure checked
// against the sale and refund it comes from (two orders with a platform
// discount, one partly refunded, 10% commission), against the ledger's
// own sums, and in its CSV; bad ranges and other merchants' staff are
// refused.
func TestMerchantStatement(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 100, 100)
	admin := ps.staffToken(t, "admin")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	other := ps.staffToken(t, "merchant:"+createMerchant(t, ps.stack, ps.apis[0], "Other Kitchen"))
	if r := ps.do(t, ps.apis[0], "PUT", "/admin/v1/merchants/"+ps.merchantID+"/commission", admin, map[string]any{"commission_bps": 1000}); r.status != 200 {
		t.Fatalf("commission: %d %s", r.status, r.body)
	}
	ps.promotionOf(t, admin, map[string]any{"name": "platform 5 off 30", "funded_by": "platform",
		"tiers": []map[string]int64{{"threshold_fen": 3000, "off_fen": 500}}})
	var orders []string
	for _, name := range []string{"statement-1", "statement-2"} { // 5500 worth, 5000 paid each
		orders = append(orders, ps.paidAccepted(t, ps.login(t, name), name, staff))
	}
	if r := ps.refundPart(t, staff, orders[1], "statement-refund", `{"amount_fen":1000,"reason":"late"}`); r.status != 201 {
		t.Fatalf("refund: %d %s", r.status, r.body)
	}
	waitUntil(t, "the refund to succeed", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", orders[1]) == 1
	})

	r := ps.do(t, ps.apis[0], "GET", "/admin/v1/merchants/"+ps.merchantID+"/statement", staff, nil)
	var st ledger.Statement
	r.json(t, &st)
	if r.status != 200 || len(st.Days) != 7 {
		t.Fatalf("statement: %d %s", r.status, r.body)
	}
	today := st.Days[6]
	// The refund of 1000 of 5000 paid takes back a fifth of the platform's
	// 500 and of the 550 commission: 1100 of the sales.
	want := ledger.Figures{Orders: 2, GrossFen: 11000, PlatformDiscountFen: 900, RefundsFen: 1100, CommissionFen: 990, NetFen: 8910}
	if diff := cmp.Diff(want, today.Figures); diff != "" || today.Date != time.Now().In(shanghai(t)).Format(time.DateOnly) {
		t.Errorf("today, %s (-want +got):\n%s", today.Date, diff)
	}
	if diff := cmp.Diff(want, st.Totals); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	var net, gross int64
	if err := ps.stack.pool.QueryRow(t.Context(), `SELECT -sum(amount_fen) FILTER (WHERE account LIKE 'merchant\_%'),
		-sum(amount_fen) FILTER (WHERE account = 'merchant_sales') FROM ledger_entries WHERE merchant_id = $1`, ps.merchantID).Scan(&net, &gross); err != nil {
		t.Fatal(err)
	}
	if net != st.Totals.NetFen || gross != st.Totals.GrossFen {
		t.Errorf("the ledger's sums: net %d, gross %d; the statement's %d, %d", net, gross, st.Totals.NetFen, st.Totals.GrossFen)
	}
	wantDishes := []ledger.TopDish{{DishID: ps.dishes[0].ID, Name: "Dish 0", Qty: 6, SalesFen: 6000}, {DishID: ps.dishes[1].ID, Name: "Dish 1", Qty: 2, SalesFen: 4000}}
	if diff := cmp.Diff(wantDishes, st.TopDishes); diff != "" {
		t.Errorf("top dishes (-want +got):\n%s", diff)
	}

	csvAnswer := ps.do(t, ps.apis[0], "GET", "/admin/v1/merchants/"+ps.merchantID+"/statement?format=csv", staff, nil)
	lines := strings.Split(strings.TrimSpace(string(csvAnswer.body)), "\n")
	if csvAnswer.status != 200 || !strings.HasPrefix(csvAnswer.header.Get("Content-Type"), "text/csv") || len(lines) != 9 ||
		lines[8] != "total,2,110.00,0.00,9.00,11.00,9.90,0.00,89.10" {
		t.Errorf("CSV: %d %q\n%s", csvAnswer.status, csvAnswer.header.Get("Content-Type"), csvAnswer.body)
	}

	for name, tt := range map[string]struct {
		token, query string
		status       int
	}{
		"another merchant's staff": {other, "", 403},
		"from after to":            {staff, "?from=2026-12-05&to=2026-12-01", 400},
		"a hundred days":           {staff, "?from=2026-01-01&to=2026-04-10", 400},
		"not a date":               {staff, "?from=yesterday", 400},
		"xml":                      {staff, "?format=xml", 400},
	} {
		if r := ps.do(t, ps.apis[0], "GET", "/admin/v1/merchants/"+ps.merchantID+"/statement"+tt.query, tt.token, nil); r.status != tt.status {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, tt.status)
		}
	}
}
