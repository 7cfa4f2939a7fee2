package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/shipping"
	"github.com/takeout/takeout/internal/wxsim"
)

// shippingConfig sets wxsim's shipping knobs.
func (ps *payShop) shippingConfig(t *testing.T, c wxsim.ShippingConfig) {
	t.Helper()
	b, _ := json.Marshal(c)
	resp, err := http.Post(ps.sim.URL+"/sim/shipping/config", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("shipping config: %d", resp.StatusCode)
	}
}

// shippingUploads are the uploads wxsim received for an order's payment.
func (ps *payShop) shippingUploads(t *testing.T, orderID string) []wxsim.ShippingUpload {
	t.Helper()
	resp, err := http.Get(ps.sim.URL + "/sim/shipping")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var log wxsim.ShippingLog
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil {
		t.Fatal(err)
	}
	return log.Uploads[payment.OutTradeNo(mustID(t, orderID), 1)]
}

// uploadOf reads an order's shipping upload as operators see it.
func (ps *payShop) uploadOf(t *testing.T, orderID, status string) (shipping.Upload, bool) {
	t.Helper()
	r := ps.do(t, ps.apis[0], "GET", "/admin/v1/shipping?status="+status, ps.admin, nil)
	if r.status != 200 {
		t.Fatalf("list shipping: %d %s", r.status, r.body)
	}
	var list shipping.Uploads
	r.json(t, &list)
	for _, u := range list.Uploads {
		if u.OrderID == orderID {
			return u, true
		}
	}
	return shipping.Upload{}, false
}

// A dispatched order's payment is shipped at WeChat exactly once, as
// same-city delivery, however many taps dispatch it at once; a collected
// pickup order's as collected. An upload whose answer was lost (WeChat
// recorded it and answered after our timeout) is found by asking, not
// uploaded again; WeChat down is retried until it is back. WeChat's
// refusal (the payment past its time limit) is final and listed for
// operators, whose retry ships it once the limit allows; an upload out of
// tries is listed as failed. WeChat refuses a second upload of one
// payment.
func TestShippingUploadedOnce(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{
		"TAKEOUT_WECHAT_SHIPPING_UPLOAD": "true", "TAKEOUT_WECHAT_TIMEOUT": "1s", "TAKEOUT_JOB_RETRY_MAX_DELAY": "1s",
		"TAKEOUT_JOB_MAX_ATTEMPTS": "4",
	}, 100)
	ps.setFulfilment(t, fulfilment.Rules{Delivery: true, Pickup: true})
	dispatched := func(name string) string {
		t.Helper()
		_, id, _ := ps.paidOrder(t, name)
		if r := ps.staffAction(t, id, "accept"); r.status != 200 {
			t.Fatalf("accept: %d %s", r.status, r.body)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if r := ps.staffAction(t, id, "dispatch"); r.status != 200 {
					t.Errorf("dispatch: %d %s", r.status, r.body)
				}
			})
		}
		wg.Wait()
		return id
	}
	uploaded := func(id string, logistics int) {
		t.Helper()
		waitUntil(t, "the upload of "+id, func() bool {
			return ps.count(t, "SELECT count(*) FROM shipping_uploads WHERE order_id = $1 AND status = 'uploaded'", id) == 1
		})
		var ok int
		for _, u := range ps.shippingUploads(t, id) {
			if u.Errcode == 0 {
				ok++
				if u.LogisticsType != logistics || !strings.Contains(u.ItemDesc, "Dish 0×1") {
					t.Errorf("order %s shipped as %d (%q), want %d with its dishes", id, u.LogisticsType, u.ItemDesc, logistics)
				}
			}
		}
		if ok != 1 {
			t.Errorf("order %s: WeChat took %d uploads of its payment, want 1 (%+v)", id, ok, ps.shippingUploads(t, id))
		}
	}

	id := dispatched("ship-1")
	uploaded(id, shipping.LogisticsSameCity)
	if n := ps.count(t, "SELECT count(*) FROM shipping_uploads WHERE order_id = $1", id); n != 1 {
		t.Errorf("%d upload rows for one order dispatched three times at once", n)
	}
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/shipping/"+id+"/retry", ps.admin, nil); r.status != 409 {
		t.Errorf("retry of an uploaded one: %d %s", r.status, r.body)
	}

	// Refunded in part before it went out: still shipped, for the rest.
	_, part, _ := ps.paidOrder(t, "ship-part")
	ps.staffAction(t, part, "accept")
	req, _ := http.NewRequest("POST", ps.apis[0].url+"/admin/v1/orders/"+part+"/refunds", strings.NewReader(`{"amount_fen":100,"reason":"a drink short"}`))
	req.Header.Set("Authorization", "Bearer "+ps.admin)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "ship-part-refund")
	if r := ps.send(t, req); r.status != 201 {
		t.Fatalf("partial refund: %d %s", r.status, r.body)
	}
	ps.staffAction(t, part, "dispatch")
	uploaded(part, shipping.LogisticsSameCity)

	// Collected at the counter.
	user := ps.login(t, "ship-pickup")
	c := ps.confirm(t, ps.apis[0], user, ps.pickupCart(1))
	r := ps.submit(t, ps.apis[0], user, "ship-pickup", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("pickup order: %d %s", r.status, r.body)
	}
	pickupID := placedOrder(t, r).ID
	ps.pay(t, user, pickupID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, pickupID), 1)})
	waitUntil(t, "the pickup order paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", pickupID) == 1
	})
	for _, action := range []string{"accept", "ready", "pick-up"} {
		if r := ps.staffAction(t, pickupID, action); r.status != 200 {
			t.Fatalf("%s: %d %s", action, r.status, r.body)
		}
	}
	uploaded(pickupID, shipping.LogisticsPickup)

	// WeChat records the upload and answers after our timeout: the next
	// try asks and finds it shipped.
	ps.shippingConfig(t, wxsim.ShippingConfig{HangAfterRecord: 2500})
	lost := dispatched("ship-lost")
	waitUntil(t, "a try timed out", func() bool {
		return ps.count(t, "SELECT count(*) FROM shipping_uploads WHERE order_id = $1 AND tries >= 1", lost) == 1 ||
			ps.count(t, "SELECT count(*) FROM shipping_uploads WHERE order_id = $1 AND status = 'uploaded'", lost) == 1
	})
	ps.shippingConfig(t, wxsim.ShippingConfig{})
	uploaded(lost, shipping.LogisticsSameCity)
	if n := len(ps.shippingUploads(t, lost)); n != 1 {
		t.Errorf("the lost answer's payment got %d uploads, want the one (found by asking)", n)
	}

	// WeChat down, then back.
	ps.shippingConfig(t, wxsim.ShippingConfig{Down: true})
	down := dispatched("ship-down")
	waitUntil(t, "a try failed while WeChat was down", func() bool {
		return ps.count(t, "SELECT count(*) FROM shipping_uploads WHERE order_id = $1 AND tries >= 1 AND status = 'pending'", down) == 1
	})
	ps.shippingConfig(t, wxsim.ShippingConfig{})
	uploaded(down, shipping.LogisticsSameCity)

	// Past the time limit: refused, listed, and shipped by an
	// operator's retry once allowed.
	ps.shippingConfig(t, wxsim.ShippingConfig{LimitS: 1})
	_, late, _ := ps.paidOrder(t, "ship-late")
	time.Sleep(1100 * time.Millisecond)
	ps.staffAction(t, late, "accept")
	ps.staffAction(t, late, "dispatch")
	waitUntil(t, "the late upload refused", func() bool {
		_, ok := ps.uploadOf(t, late, "refused")
		return ok
	})
	u, _ := ps.uploadOf(t, late, "refused")
	if u.Errcode == nil || *u.Errcode != 10060004 || !strings.Contains(u.LastError, "时限") {
		t.Errorf("the refused upload says %v %q", u.Errcode, u.LastError)
	}
	ps.shippingConfig(t, wxsim.ShippingConfig{})
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/shipping/"+late+"/retry", ps.admin, nil); r.status != 200 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	uploaded(late, shipping.LogisticsSameCity)

	// Out of tries: failed, listed.
	ps.shippingConfig(t, wxsim.ShippingConfig{Busy: true})
	busy := dispatched("ship-busy")
	waitUntil(t, "the upload out of tries", func() bool {
		_, ok := ps.uploadOf(t, busy, "failed")
		return ok
	})
	ps.shippingConfig(t, wxsim.ShippingConfig{})
	if m := ps.metrics(t, ps.apis[0]); !strings.Contains(m, `takeout_shipping_uploads_total{outcome="gave_up"} 1`+"\n") ||
		!strings.Contains(m, `takeout_shipping_uploads_total{outcome="refused"} 1`+"\n") {
		t.Errorf("metrics:\n%s", grepLines(m, "takeout_shipping_uploads_total"))
	}

	// WeChat's rule: a payment is shipped once.
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	resp, err := http.Post(ps.sim.URL+"/cgi-bin/stable_token", "application/json",
		strings.NewReader(fmt.Sprintf(`{"grant_type":"client_credential","appid":%q,"secret":%q}`, testAppID, testAppSecret)))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	_ = resp.Body.Close()
	var openid string
	if err := ps.pool.QueryRow(t.Context(), "SELECT u.openid FROM users u JOIN orders o ON o.user_id = u.id WHERE o.id = $1", id).Scan(&openid); err != nil {
		t.Fatal(err)
	}
	again := fmt.Sprintf(`{"order_key":{"order_number_type":1,"mchid":%q,"out_trade_no":%q},"logistics_type":2,"delivery_mode":1,
		"shipping_list":[{"item_desc":"again"}],"upload_time":%q,"payer":{"openid":%q}}`,
		testMchID, payment.OutTradeNo(mustID(t, id), 1), time.Now().Format(time.RFC3339), openid)
	resp, err = http.Post(ps.sim.URL+"/wxa/sec/order/upload_shipping_info?access_token="+tok.AccessToken, "application/json", strings.NewReader(again))
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Errcode int `json:"errcode"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	_ = resp.Body.Close()
	if answer.Errcode != 10060002 {
		t.Errorf("a second upload of a shipped payment: errcode %d, want 10060002", answer.Errcode)
	}
}
