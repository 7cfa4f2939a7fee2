package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/takeout/takeout/internal/aftersales"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/wxsim"
)

// afterSale sends a request for an order with an Idempotency-Key.
func (ps *payShop) afterSale(t *testing.T, token, orderID, key, body string) response {
	t.Helper()
	return ps.doKey(t, ps.apis[0], "POST", "/v1/orders/"+orderID+"/after-sales", token, key, body)
}

// decodeAfterSale reads an answer that must be status.
func decodeAfterSale(t *testing.T, r response, status int) aftersales.AfterSale {
	t.Helper()
	if r.status != status {
		t.Fatalf("after-sale: %d %s, want %d", r.status, r.body, status)
	}
	var a aftersales.AfterSale
	r.json(t, &a)
	return a
}

// storm sends n copies of one call at once and returns the answers.
func storm(n int, call func() response) []response {
	out := make([]response, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i] = call() })
	}
	wg.Wait()
	return out
}

// paidAccepted places, pays and accepts an order of 3 x dish 0 (1000
// each) and 1 x dish 1 (2000), 500 delivery: 5500 paid.
func (ps *payShop) paidAccepted(t *testing.T, user, key, staff string) string {
	t.Helper()
	c := ps.confirm(t, ps.apis[0], user, ps.cart(3, 1))
	r := ps.submit(t, ps.apis[0], user, key, c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	o := placedOrder(t, r)
	ps.pay(t, user, o.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1)})
	waitUntil(t, "the order to be paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", o.ID) == 1
	})
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+o.ID+"/accept", staff, nil); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	return o.ID
}

// A customer's requests for money back, each step once however often it
// is tapped: refused shapes change nothing; one open request per order;
// the merchant's agree and reject racing leave one outcome and at most
// one refund; a rejection escalated and decided by the platform; a
// request nobody answered agreed at its deadline; one whose refund can no
// longer be made goes to the platform instead.
func TestAfterSales(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_AFTER_SALES_RESPOND_WITHIN": "1h"}, 100, 100)
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	other := ps.staffToken(t, "merchant:"+createMerchant(t, ps.stack, ps.apis[0], "Other Kitchen"))
	admin := ps.staffToken(t, "admin")
	user := ps.login(t, "after")
	stranger := ps.login(t, "stranger")

	// Before the merchant accepts, there is nothing to ask after.
	c := ps.confirm(t, ps.apis[0], user, ps.cart(1))
	early := placedOrder(t, ps.submit(t, ps.apis[0], user, "early", c.ConfirmToken))
	ps.pay(t, user, early.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, early.ID), 1)})
	waitUntil(t, "the order to be paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", early.ID) == 1
	})
	if r := ps.afterSale(t, user, early.ID, "early", `{"amount_fen":100,"reason":"cold"}`); r.status != 409 || r.problemType() != "order-status-conflict" {
		t.Errorf("a request before acceptance: %d %s", r.status, r.body)
	}

	id := ps.paidAccepted(t, user, "after-1", staff)
	line0 := ps.count(t, "SELECT line FROM order_items WHERE order_id = $1 AND qty = 3", id)
	for name, tt := range map[string]struct {
		token, key, body string
		status           int
		problem          string
	}{
		"no key":           {user, "", `{"amount_fen":100,"reason":"cold"}`, 400, "idempotency-key-missing"},
		"another customer": {stranger, "k-stranger", `{"amount_fen":100,"reason":"cold"}`, 404, "not-found"},
		"lines and money":  {user, "k-both", fmt.Sprintf(`{"amount_fen":100,"lines":[{"line":%d,"qty":1}],"reason":"r"}`, line0), 400, "invalid-request"},
		"no reason":        {user, "k-reason", `{"amount_fen":100}`, 400, "invalid-request"},
		"a photo over http": {user, "k-http", `{"amount_fen":100,"reason":"cold","photos":["http://cdn.example.com/a.jpg"]}`,
			400, "invalid-request"},
		"ten photos": {user, "k-ten", `{"amount_fen":100,"reason":"cold","photos":["https://a.cn/1","https://a.cn/2","https://a.cn/3","https://a.cn/4",` +
			`"https://a.cn/5","https://a.cn/6","https://a.cn/7","https://a.cn/8","https://a.cn/9","https://a.cn/10"]}`, 400, "invalid-request"},
		"more units than the line": {user, "k-units", fmt.Sprintf(`{"lines":[{"line":%d,"qty":4}],"reason":"r"}`, line0), 400, "invalid-request"},
		"more than was paid":       {user, "k-more", `{"amount_fen":5501,"reason":"r"}`, 409, "refund-exceeds-paid"},
	} {
		if r := ps.afterSale(t, tt.token, id, tt.key, tt.body); r.status != tt.status || r.problemType() != tt.problem {
			t.Errorf("%s: %d %s, want %d %s", name, r.status, r.body, tt.status, tt.problem)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM after_sales"); n != 0 {
		t.Fatalf("refused requests wrote %d", n)
	}

	// Ten copies of one request: one request, one answer. Another while
	// it is open is refused.
	body := fmt.Sprintf(`{"lines":[{"line":%d,"qty":1}],"reason":"one bowl spilt","photos":["https://cdn.example.com/spilt.jpg"]}`, line0)
	copies := storm(10, func() response { return ps.afterSale(t, user, id, "spilt", body) })
	first := decodeAfterSale(t, copies[0], 201)
	for _, r := range copies {
		if r.status != 201 || string(r.body) != string(copies[0].body) {
			t.Errorf("a copy of the request: %d %s, want %s", r.status, r.body, copies[0].body)
		}
	}
	if first.Status != aftersales.Requested || len(first.Photos) != 1 {
		t.Errorf("the request: %+v", first)
	}
	if r := ps.afterSale(t, user, id, "second", `{"amount_fen":100,"reason":"and cold"}`); r.status != 409 || r.problemType() != "after-sale-status-conflict" {
		t.Errorf("a second open request: %d %s", r.status, r.body)
	}
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/after-sales/"+first.ID+"/agree", other, nil); r.status != 404 {
		t.Errorf("another merchant's staff agreed: %d", r.status)
	}
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/after-sales/"+first.ID+"/reject", staff, map[string]any{}); r.status != 400 {
		t.Errorf("a rejection without a note: %d %s", r.status, r.body)
	}

	// The merchant's taps race: five agree, five reject. One outcome: the
	// winning taps answered alike, the losing ones refused.
	var n sync.Mutex
	kinds := map[string][]int{}
	var i int
	storm(10, func() response {
		n.Lock()
		action := []string{"agree", "reject"}[i%2]
		i++
		n.Unlock()
		r := ps.do(t, ps.apis[0], "POST", "/admin/v1/after-sales/"+first.ID+"/"+action, staff, map[string]any{"note": "it was fine"})
		n.Lock()
		kinds[action] = append(kinds[action], r.status)
		n.Unlock()
		return r
	})
	agrees, rejects := kinds["agree"], kinds["reject"]
	switch {
	case len(agrees) != 5 || len(rejects) != 5:
		t.Fatalf("taps: %v", kinds)
	case agrees[0] == 200 && !slices.Equal(agrees, []int{200, 200, 200, 200, 200}) || agrees[0] == 200 && !slices.Equal(rejects, []int{409, 409, 409, 409, 409}):
		t.Errorf("agree won, yet the taps were answered %v", kinds)
	case agrees[0] != 200 && (!slices.Equal(rejects, []int{200, 200, 200, 200, 200}) || !slices.Equal(agrees, []int{409, 409, 409, 409, 409})):
		t.Errorf("reject won, yet the taps were answered %v", kinds)
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", id); (agrees[0] == 200) != (n == 1) || n > 1 {
		t.Errorf("agree answered %v: %d refunds", agrees, n)
	}
	if agrees[0] != 200 {
		// Rejected: the customer escalates, and the merchant concedes.
		decodeAfterSale(t, ps.do(t, ps.apis[0], "POST", "/v1/after-sales/"+first.ID+"/escalate", user, map[string]any{"note": "it did spill"}), 200)
	}
	agreed := decodeAfterSale(t, ps.do(t, ps.apis[0], "POST", "/admin/v1/after-sales/"+first.ID+"/agree", staff, nil), 200)
	if agreed.Status != aftersales.Agreed || agreed.Refund == nil || agreed.Refund.AmountFen != 1000 {
		t.Fatalf("agreed: %+v", agreed)
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", id); n != 1 {
		t.Errorf("eleven taps made %d refunds, want 1", n)
	}

	// Rejected, escalated (five taps, one escalation), decided by the
	// platform (five taps, one refund).
	second := decodeAfterSale(t, ps.afterSale(t, user, id, "cold", `{"amount_fen":500,"reason":"the soup was cold"}`), 201)
	decodeAfterSale(t, ps.do(t, ps.apis[0], "POST", "/admin/v1/after-sales/"+second.ID+"/reject", staff, map[string]any{"note": "sent hot"}), 200)
	if r := ps.do(t, ps.apis[0], "POST", "/v1/after-sales/"+second.ID+"/escalate", stranger, map[string]any{"note": "x"}); r.status != 404 {
		t.Errorf("a stranger escalated: %d", r.status)
	}
	for name, tt := range map[string]struct {
		token, action string
		body          map[string]any
	}{
		"an escalation without a note":    {user, "/v1/after-sales/%s/escalate", map[string]any{}},
		"an escalation of 201 characters": {user, "/v1/after-sales/%s/escalate", map[string]any{"note": strings.Repeat("冷", 201)}},
		"a decision without agree":        {admin, "/admin/v1/after-sales/%s/decide", map[string]any{"note": "n"}},
		"a decision without a note":       {admin, "/admin/v1/after-sales/%s/decide", map[string]any{"agree": true}},
	} {
		if r := ps.do(t, ps.apis[0], "POST", fmt.Sprintf(tt.action, second.ID), tt.token, tt.body); r.status != 400 || r.problemType() != "invalid-request" {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM after_sales WHERE id = $1 AND status = 'rejected' AND escalation = ''", second.ID); n != 1 {
		t.Error("refused escalations and decisions changed the request")
	}
	for _, r := range storm(5, func() response {
		return ps.do(t, ps.apis[0], "POST", "/v1/after-sales/"+second.ID+"/escalate", user, map[string]any{"note": "it was cold, see the photo"})
	}) {
		if a := decodeAfterSale(t, r, 200); a.Status != aftersales.Escalated {
			t.Errorf("escalated: %+v", a)
		}
	}
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/after-sales/"+second.ID+"/decide", staff, map[string]any{"agree": true, "note": "n"}); r.status != 403 {
		t.Errorf("a merchant decided for the platform: %d", r.status)
	}
	for _, r := range storm(5, func() response {
		return ps.do(t, ps.apis[0], "POST", "/admin/v1/after-sales/"+second.ID+"/decide", admin, map[string]any{"agree": true, "note": "the customer is right"})
	}) {
		if a := decodeAfterSale(t, r, 200); a.Status != aftersales.Agreed || a.Refund == nil || a.Refund.AmountFen != 500 {
			t.Errorf("decided: %+v", a)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", id); n != 2 {
		t.Errorf("after the platform agreed: %d refunds, want 2", n)
	}

	// Nobody answers: at the deadline it is agreed, once.
	third := decodeAfterSale(t, ps.afterSale(t, user, id, "late", `{"amount_fen":300,"reason":"forty minutes late"}`), 201)
	ps.count(t, "UPDATE after_sales SET respond_by = now() WHERE id = $1 RETURNING 1", third.ID)
	ps.count(t, "UPDATE river_job SET scheduled_at = now() WHERE kind = 'aftersales.deadline' AND args->>'id' = $1 RETURNING 1", third.ID)
	waitUntil(t, "the deadline to agree", func() bool {
		return ps.count(t, "SELECT count(*) FROM after_sales WHERE id = $1 AND status = 'agreed' AND decided_by LIKE 'system%'", third.ID) == 1
	})

	// Staff refund the rest before the deadline: agreeing can no longer
	// be done, and the platform gets the request.
	fourth := decodeAfterSale(t, ps.afterSale(t, user, id, "rest", `{"amount_fen":3000,"reason":"all wrong"}`), 201)
	if r := ps.refundPart(t, staff, id, "goodwill", `{"amount_fen":3500,"reason":"goodwill"}`); r.status != 201 {
		t.Fatalf("staff refund: %d %s", r.status, r.body)
	}
	ps.count(t, "UPDATE after_sales SET respond_by = now() WHERE id = $1 RETURNING 1", fourth.ID)
	ps.count(t, "UPDATE river_job SET scheduled_at = now() WHERE kind = 'aftersales.deadline' AND args->>'id' = $1 RETURNING 1", fourth.ID)
	waitUntil(t, "the deadline to escalate", func() bool {
		return ps.count(t, "SELECT count(*) FROM after_sales WHERE id = $1 AND status = 'escalated' AND escalation LIKE 'agreeing at the deadline failed%'", fourth.ID) == 1
	})
	refused := decodeAfterSale(t, ps.do(t, ps.apis[0], "POST", "/admin/v1/after-sales/"+fourth.ID+"/decide", admin, map[string]any{"agree": false, "note": "already refunded"}), 200)
	if refused.Status != aftersales.Refused || refused.Refund != nil {
		t.Errorf("refused: %+v", refused)
	}

	// What the customer and the merchant see, and the money.
	r := ps.do(t, ps.apis[0], "GET", "/v1/orders/"+id+"/after-sales", user, nil)
	var mine aftersales.List
	r.json(t, &mine)
	if r.status != 200 || len(mine.AfterSales) != 4 {
		t.Errorf("the customer's list: %d %s", r.status, r.body)
	}
	r = ps.do(t, ps.apis[0], "GET", "/admin/v1/after-sales?status=agreed", staff, nil)
	var theirs aftersales.List
	r.json(t, &theirs)
	if r.status != 200 || len(theirs.AfterSales) != 3 {
		t.Errorf("the merchant's agreed list: %d %s", r.status, r.body)
	}
	if r := ps.do(t, ps.apis[0], "GET", "/admin/v1/after-sales?merchant_id=999", staff, nil); r.status != 403 {
		t.Errorf("staff listing another merchant's: %d", r.status)
	}
	if n := ps.count(t, "SELECT sum(amount_fen) FROM refunds WHERE order_id = $1", id); n != 5300 {
		t.Errorf("refunds come to %d, want 1000 + 500 + 300 + 3500", n)
	}
	waitUntil(t, "the refunds to succeed", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", id) == 4
	})
	ps.ledgerHolds(t, id)
}
