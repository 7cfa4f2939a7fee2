package main

// End-to-end regressions of the defects a hostile tester found (issue
// "Hardening"), each as the user would see it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/wxsim"
)

// doKey is do with an Idempotency-Key header.
func (s *stack) doKey(t *testing.T, inst *instance, method, path, token, key, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, inst.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return response{}
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: buf.Bytes()}
}

func (sh *shop) dish(t *testing.T, i int) catalog.Dish {
	t.Helper()
	var d catalog.Dish
	r := sh.do(t, sh.apis[0], "GET", "/admin/v1/dishes/"+sh.dishes[i].ID, sh.admin, nil)
	if r.status != 200 {
		t.Fatalf("read dish: %d %s", r.status, r.body)
	}
	r.json(t, &d)
	return d
}

// The merchant reads 20, a customer buys 3, the merchant sets 20, the
// customer cancels: 20 are for sale, not 23.
func TestRestockDuringAnOpenOrderDoesNotCountItTwice(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 20)
	api := sh.apis[0]
	user := sh.login(t, "restock-buyer")
	o := sh.place(t, user, "restock-1", 3)
	if d := sh.dish(t, 0); d.Stock != 17 || *d.Held != 3 || *d.OnHand != 20 {
		t.Fatalf("after a sale of 3: stock %d held %d on hand %d, want 17 3 20", d.Stock, *d.Held, *d.OnHand)
	}
	if r := sh.do(t, api, "PUT", "/admin/v1/dishes/"+sh.dishes[0].ID+"/stock", sh.admin, map[string]any{"on_hand": 20}); r.status != 200 {
		t.Fatalf("restock: %d %s", r.status, r.body)
	}
	if r := sh.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", user, nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if got := sh.stock(t, 0); got != 20 {
		t.Errorf("stock %d after restocking to 20 and a cancel of 3, want 20", got)
	}
	// A count taken before a sale and sent with it is refused.
	sh.place(t, user, "restock-2", 2)
	r := sh.do(t, api, "PUT", "/admin/v1/dishes/"+sh.dishes[0].ID+"/stock", sh.admin, map[string]any{"on_hand": 30, "if_on_hand": 17})
	if r.status != 409 || r.problemType() != "stock-changed" || !strings.Contains(string(r.body), `"on_hand":20`) {
		t.Errorf("stale count: %d %s, want 409 stock-changed naming on hand 20", r.status, r.body)
	}
}

// A merchant that closes, or changes its delivery fee, minimum or hours,
// after a confirm does not get the order at the old terms.
func TestSubmitRechecksTheMerchant(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10)
	api := sh.apis[0]
	user := sh.login(t, "merchant-recheck")
	patch := func(body map[string]any) {
		t.Helper()
		var menu catalog.Menu
		sh.do(t, api, "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil).json(t, &menu)
		body["version"] = menu.Merchant.Version
		if r := sh.do(t, api, "PATCH", "/admin/v1/merchants/"+sh.merchantID, sh.admin, body); r.status != 200 {
			t.Fatalf("patch merchant: %d %s", r.status, r.body)
		}
	}
	tests := []struct {
		name     string
		change   map[string]any
		undo     map[string]any
		wantType string
		// restores: undoing the change makes the old quote good again (the
		// closed flag); a change of the money rules or hours moves the
		// merchant's quote version on for good.
		restores bool
	}{
		{"closed", map[string]any{"status": "closed"}, map[string]any{"status": "open"}, "merchant-closed", true},
		{"fee raised", map[string]any{"delivery_fee_fen": 5000}, map[string]any{"delivery_fee_fen": 500}, "quote-changed", false},
		{"minimum set", map[string]any{"min_order_fen": 100}, map[string]any{"min_order_fen": 0}, "quote-changed", false},
		{"hours set", map[string]any{"hours": []map[string]string{{"day": "mon", "open": "10:00", "close": "11:00"}}}, map[string]any{"hours": []any{}}, "quote-changed", false},
	}
	for i, tc := range tests {
		c := sh.confirm(t, api, user, sh.cart(1+int32(i))) //nolint:gosec // G115: small
		orders, stock := sh.count(t, "SELECT count(*) FROM orders"), sh.stock(t, 0)
		patch(tc.change)
		r := sh.submit(t, api, user, "recheck-"+tc.name, c.ConfirmToken)
		if r.status != 409 || r.problemType() != tc.wantType {
			t.Errorf("%s: submit %d %s, want 409 %s", tc.name, r.status, r.body, tc.wantType)
		}
		if n := sh.count(t, "SELECT count(*) FROM orders"); n != orders || sh.stock(t, 0) != stock {
			t.Errorf("%s: %d orders, stock %d; want none placed (%d) and %d", tc.name, n, sh.stock(t, 0), orders, stock)
		}
		patch(tc.undo)
		if !tc.restores {
			if r := sh.submit(t, api, user, "recheck-"+tc.name, c.ConfirmToken); r.status != 409 || r.problemType() != "quote-changed" {
				t.Errorf("%s: after undoing, the old quote: submit %d %s, want quote-changed", tc.name, r.status, r.body)
			}
			c = sh.confirm(t, api, user, sh.cart(1+int32(i))) //nolint:gosec // G115: small
		}
		// Terms back as quoted: the same key now places it.
		if r := sh.submit(t, api, user, "recheck-"+tc.name, c.ConfirmToken); r.status != 201 {
			t.Errorf("%s: after undoing, submit %d %s", tc.name, r.status, r.body)
		}
	}
}

// Retried admin creates, concurrent and sequential, create once and answer
// alike; a stock adjustment counts once however often it is retried.
func TestAdminCreatesAreExactlyOnce(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 5)
	const copies = 12
	storm := func(method, path, key, body string) []response {
		t.Helper()
		out := make([]response, copies)
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() { out[i] = sh.doKey(t, sh.apis[i%2], method, path, sh.admin, key, body) })
		}
		wg.Wait()
		return out
	}
	check := func(what string, rs []response, status int) {
		t.Helper()
		replayed := 0
		for _, r := range rs {
			if r.status != status || !bytes.Equal(r.body, rs[0].body) {
				t.Errorf("%s: %d %s, want %d and one body for all", what, r.status, r.body, status)
			}
			if r.header.Get("Idempotent-Replayed") == "true" {
				replayed++
			}
		}
		if replayed != len(rs)-1 {
			t.Errorf("%s: %d answers marked replayed, want %d", what, replayed, len(rs)-1)
		}
	}

	check("merchant create", storm("POST", "/admin/v1/merchants", "m-1", `{"name":"Retry Kitchen"}`), 201)
	if n := sh.count(t, "SELECT count(*) FROM merchants WHERE name = 'Retry Kitchen'"); n != 1 {
		t.Errorf("%d merchants created by one key", n)
	}
	if r := sh.doKey(t, sh.apis[0], "POST", "/admin/v1/merchants", sh.admin, "m-1", `{"name":"Other Kitchen"}`); r.status != 422 || r.problemType() != "idempotency-key-mismatch" {
		t.Errorf("same key, other body: %d %s", r.status, r.body)
	}
	dishes := "/admin/v1/merchants/" + sh.merchantID + "/dishes"
	check("dish create", storm("POST", dishes, "d-1", `{"name":"Retry Soup","price_fen":800,"stock":4}`), 201)
	if n := sh.count(t, "SELECT count(*) FROM dishes WHERE name = 'Retry Soup'"); n != 1 {
		t.Errorf("%d dishes created by one key", n)
	}

	adjust := "/admin/v1/dishes/" + sh.dishes[0].ID + "/stock/adjustments"
	check("stock adjustment", storm("POST", adjust, "a-1", `{"delta":7}`), 201)
	if got := sh.stock(t, 0); got != 12 {
		t.Errorf("stock %d after one delivery of 7 onto 5, retried %d times", got, copies)
	}
	if n := sh.count(t, "SELECT count(*) FROM stock_adjustments WHERE dish_id = $1 AND kind = 'delta'", sh.dishes[0].ID); n != 1 {
		t.Errorf("%d ledger rows for one adjustment", n)
	}
	if r := sh.doKey(t, sh.apis[0], "POST", adjust, sh.admin, "", `{"delta":1}`); r.status != 400 || r.problemType() != "idempotency-key-missing" {
		t.Errorf("adjustment without a key: %d %s", r.status, r.body)
	}
	// A refused change records nothing: the same key succeeds once it can.
	if r := sh.doKey(t, sh.apis[0], "POST", adjust, sh.admin, "a-2", `{"delta":-13}`); r.status != 409 || r.problemType() != "stock-held" {
		t.Errorf("removing more than on hand: %d %s", r.status, r.body)
	}
	if got := sh.stock(t, 0); got != 12 {
		t.Errorf("stock %d after a refusal, want 12", got)
	}
	if r := sh.doKey(t, sh.apis[0], "POST", adjust, sh.admin, "a-2", `{"delta":-12}`); r.status != 201 {
		t.Errorf("the refused request's key, corrected: %d %s, want 201", r.status, r.body)
	}
}

// While 30 pays wait on a WeChat that hangs, the API keeps serving: pays
// hold no database connection while WeChat answers (the pool here has 4).
// Every other request finishes before any pay does; afterwards each order
// has one attempt with its prepay.
func TestHangingWeChatPayStallsNothingElse(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_DATABASE_MAX_CONNS": "4"}, 1000)
	api := ps.apis[0]
	var orders []string
	var payers []string
	for i := range 3 {
		u := ps.login(t, fmt.Sprint("hang-payer-", i))
		payers = append(payers, u)
		orders = append(orders, ps.place(t, u, fmt.Sprint("hang-", i), 1).ID)
	}
	ps.simConfig(t, `{"prepay_delay_ms":3000}`)
	var returned atomic.Int32
	var pays sync.WaitGroup
	for i := range 30 {
		pays.Go(func() {
			r := ps.do(t, api, "POST", "/v1/orders/"+orders[i%3]+"/pay", payers[i%3], nil)
			returned.Add(1)
			if r.status != 200 {
				t.Errorf("pay: %d %s", r.status, r.body)
			}
		})
	}
	waitUntil(t, "the pays to reserve their attempts and call WeChat", func() bool {
		return ps.count(t, "SELECT count(*) FROM payments WHERE order_id = ANY($1::bigint[])", orders) == 3
	})
	other := ps.login(t, "hang-bystander")
	for i := range 5 {
		if r := ps.do(t, api, "GET", "/v1/merchants/"+ps.merchantID+"/menu", "", nil); r.status != 200 {
			t.Errorf("menu: %d", r.status)
		}
		c := ps.confirm(t, api, other, ps.cart(int32(i+1))) //nolint:gosec // G115: small
		if r := ps.submit(t, api, other, fmt.Sprint("bystander-", i), c.ConfirmToken); r.status != 201 {
			t.Errorf("submit: %d %s", r.status, r.body)
		}
	}
	if n := returned.Load(); n != 0 {
		t.Errorf("%d pays returned before the other users were served: the others waited for WeChat", n)
	}
	pays.Wait()
	for _, id := range orders {
		if n := ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND prepay_id IS NOT NULL", id); n != 1 {
			t.Errorf("order %s: %d attempts with a prepay, want 1", id, n)
		}
	}
}

// A cancel that lands while WeChat is answering a pay: the cancel is not
// held up, the pay answers 409 instead of a payable prepay, and the
// attempt's prepay is closed at the platform, so it can never be paid.
func TestCancelDuringPrepayClosesIt(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	api := ps.apis[0]
	user := ps.login(t, "cancel-racer")
	o := ps.place(t, user, "race-1", 1)
	ps.simConfig(t, `{"prepay_delay_ms":3000}`)
	payDone := make(chan response, 1)
	go func() { payDone <- ps.do(t, api, "POST", "/v1/orders/"+o.ID+"/pay", user, nil) }()
	waitUntil(t, "the pay to reserve its attempt and call WeChat", func() bool {
		return ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1", o.ID) == 1
	})
	if r := ps.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", user, nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	select {
	case r := <-payDone:
		t.Fatalf("the pay answered (%d) before WeChat did: the test did not race", r.status)
	default:
	}
	r := <-payDone
	if r.status != 409 || r.problemType() != "order-status-conflict" {
		t.Errorf("pay of an order cancelled meanwhile: %d %s, want 409 order-status-conflict", r.status, r.body)
	}
	var outTradeNo string
	if err := ps.pool.QueryRow(t.Context(), "SELECT out_trade_no FROM payments WHERE order_id = $1", o.ID).Scan(&outTradeNo); err != nil {
		t.Fatal(err)
	}
	// The cancel's close found nothing at the platform yet (the prepay was
	// being made); the close of the prepay recorded after it closes it there.
	waitUntil(t, "the cancelled order's prepay to be closed at the platform", func() bool {
		return ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'CLOSED'", o.ID) == 1 &&
			ps.count(t, "SELECT count(*) FROM river_job WHERE kind = 'payment.close' AND state = 'completed' AND args->>'attempt' = $1", outTradeNo) == 1
	})
	b, _ := json.Marshal(wxsim.PayRequest{OutTradeNo: outTradeNo})
	resp, err := http.Post(ps.sim.URL+"/sim/pay", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("paying the closed prepay at the platform: %d, want refused", resp.StatusCode)
	}
}

// NUL and other control characters are refused wherever text is taken,
// naming the field, and change nothing; a remark may hold newlines.
func TestControlCharactersAreRefused(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10)
	api := sh.apis[0]
	user := sh.login(t, "text-rule")
	cart := func(edit func(map[string]any)) map[string]any {
		c := sh.cart(1)
		edit(c)
		return c
	}
	tests := []struct {
		name, path, token string
		body              any
		field             string
	}{
		{"NUL in the remark", "/v1/orders/confirm", user, cart(func(c map[string]any) { c["remark"] = "no\x00onions" }), "remark"},
		{"NUL in the address", "/v1/orders/confirm", user, cart(func(c map[string]any) {
			c["address"] = map[string]string{"name": "Li", "phone": "13900000000", "detail": "Gate\x00 3"}
		}), "address.detail"},
		{"bell in the name", "/v1/orders/confirm", user, cart(func(c map[string]any) {
			c["address"] = map[string]string{"name": "Li\a", "phone": "13900000000", "detail": "Gate 3"}
		}), "address.name"},
		{"NUL in a login code", "/v1/auth/wx-login", "", map[string]string{"code": "x\x00y"}, "code"},
		{"NUL in a merchant name", "/admin/v1/merchants", sh.admin, map[string]string{"name": "Bad\x00Name"}, "name"},
	}
	users := sh.count(t, "SELECT count(*) FROM users")
	for _, tc := range tests {
		r := sh.do(t, api, "POST", tc.path, tc.token, tc.body)
		var p struct {
			Field string `json:"field"`
		}
		r.json(t, &p)
		if r.status != 400 || r.problemType() != "invalid-request" || p.Field != tc.field {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.name, r.status, r.body, tc.field)
		}
	}
	if n := sh.count(t, "SELECT count(*) FROM users"); n != users {
		t.Errorf("a refused login made a user")
	}
	if n := sh.count(t, "SELECT count(*) FROM merchants"); n != 1 {
		t.Errorf("a refused merchant was created")
	}
	// Multi-line text where it makes sense: the remark and the address
	// detail (stored as one line, as the digest normalises them).
	c := sh.confirm(t, api, user, cart(func(c map[string]any) { c["remark"] = "ring twice\n\tthen wait" }))
	if r := sh.submit(t, api, user, "multi-line", c.ConfirmToken); r.status != 201 {
		t.Errorf("a remark with a newline: %d %s", r.status, r.body)
	}
}

// A query string that does not parse, a parameter the route does not
// take, or one given twice is refused naming it, instead of being dropped
// (which turned a filtered search into every order).
func TestMalformedQueryStringsAreRefused(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10)
	api := sh.apis[0]
	user := sh.login(t, "query-strict")
	sh.place(t, user, "q-1", 1)
	tests := []struct {
		path, token, param string
	}{
		{"/admin/v1/orders?user_id=1;x", sh.admin, "user_id"},
		{"/admin/v1/orders?cursor=%%%", sh.admin, "cursor"},
		{"/admin/v1/orders?usr_id=1", sh.admin, "usr_id"},
		{"/admin/v1/orders?status=PAID&status=CANCELLED", sh.admin, "status"},
		{"/v1/orders?limit=5&limit=6", user, "limit"},
		{"/v1/orders?cursor=%00", user, "cursor"},
		{"/admin/v1/jobs/dead?limit=1;2", sh.admin, "limit"},
	}
	for _, tc := range tests {
		r := sh.do(t, api, "GET", tc.path, tc.token, nil)
		var p struct {
			Parameter string `json:"parameter"`
			Detail    string `json:"detail"`
		}
		r.json(t, &p)
		if r.status != 400 || r.problemType() != "invalid-request" || p.Parameter != tc.param {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.path, r.status, r.body, tc.param)
		}
	}
	var page struct {
		Orders []any `json:"orders"`
	}
	sh.do(t, api, "GET", "/admin/v1/orders?user_id=999999", sh.admin, nil).json(t, &page)
	if len(page.Orders) != 0 {
		t.Errorf("a well-formed filter for a user without orders found %d", len(page.Orders))
	}
}

// A body sent without Content-Type is read as JSON, as the README and the
// OpenAPI say; another type is 415.
func TestBodyWithoutContentTypeIsJSON(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil)
	api := sh.apis[0]
	for _, tc := range []struct {
		contentType string
		want        int
	}{{"", 201}, {"text/plain", 415}, {"application/x-www-form-urlencoded", 415}} {
		req, err := http.NewRequest("POST", api.url+"/admin/v1/merchants", strings.NewReader(`{"name":"Typed `+tc.contentType+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		req.Header.Set("Authorization", "Bearer "+sh.admin)
		if r := sh.send(t, req); r.status != tc.want {
			t.Errorf("Content-Type %q: %d %s, want %d", tc.contentType, r.status, r.body, tc.want)
		}
	}
}

// The callback routes answer every refusal in the platform's shape, an
// oversized body included (JSON FAIL for v3, XML for v2), and every 503
// carries Retry-After.
func TestCallbackRefusalsInThePlatformsShape(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_MAX_BODY_BYTES": "4096"}, 5)
	api := ps.apis[0]
	big := strings.Repeat("x", 5000)
	r := ps.doRaw(t, api, "POST", "/v1/payments/wechat/notify", "", `{"id":"`+big+`"}`, "application/json")
	var fail struct{ Code, Message string }
	if err := json.Unmarshal(r.body, &fail); r.status != 413 || err != nil || fail.Code != "FAIL" || r.problemType() != "" {
		t.Errorf("oversized v3 notification: %d %s, want 413 with WeChat's FAIL body", r.status, r.body)
	}
	r = ps.doRaw(t, api, "POST", "/v1/payments/wechat/notify/v2", "", "<xml><a>"+big+"</a></xml>", "text/xml")
	if !strings.Contains(string(r.body), "<return_code><![CDATA[FAIL]]></return_code>") {
		t.Errorf("oversized v2 notification: %d %s, want the XML FAIL reply", r.status, r.body)
	}

	plain := newShop(t, 1, nil) // payments not configured: 503s
	for _, path := range []string{"/v1/payments/wechat/notify", "/v1/orders/1/pay"} {
		user := plain.login(t, "retry-after")
		r := plain.do(t, plain.apis[0], "POST", path, user, map[string]any{})
		if r.status != 503 || r.header.Get("Retry-After") == "" {
			t.Errorf("%s: %d with Retry-After %q, want 503 with one", path, r.status, r.header.Get("Retry-After"))
		}
	}
}

// notify posts a notification the platform signed (event and resource
// type as given) and returns the answer.
func (ps *payShop) notify(t *testing.T, api *instance, id, event, resource string, plain any) response {
	t.Helper()
	raw, _ := json.Marshal(plain)
	ct, err := wxpay.EncryptAEAD(ps.apiKey, "0123456789ab", resource, raw)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	body, _ := json.Marshal(wxpay.Notification{ID: id, CreateTime: at.Format(time.RFC3339), EventType: event, ResourceType: "encrypt-resource",
		Resource: wxpay.Resource{OriginalType: resource, Algorithm: "AEAD_AES_256_GCM", Ciphertext: ct, AssociatedData: resource, Nonce: "0123456789ab"}})
	req, err := http.NewRequest("POST", api.url+"/v1/payments/wechat/notify", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = signedHeaders(ps.platform, "PUB_KEY_ID_SIM", at, body)
	return ps.send(t, req)
}

// paidOrder places an order for a new user and pays it at the simulator.
func (ps *payShop) paidOrder(t *testing.T, name string) (user, orderID, outTradeNo string) {
	t.Helper()
	user = ps.login(t, name)
	o := ps.place(t, user, name, 1)
	ps.pay(t, user, o.ID)
	outTradeNo = payment.OutTradeNo(mustID(t, o.ID), 1)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: outTradeNo, Retries: 10, RetryMS: 20})
	waitUntil(t, "the order to be paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", o.ID) == 1
	})
	return user, o.ID, outTradeNo
}

// Money the platform reports that we did not expect is not absorbed: a
// second successful transaction for a paid out_trade_no, delivered as
// concurrent duplicates, is recorded once as an anomaly and refunded once;
// a refund notification whose amount or out_trade_no is not our refund's
// is recorded and refused, and changes nothing.
func TestUnexpectedMoneyIsRecordedAndGivenBack(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_WXPAY_RECONCILE_INTERVAL": "1h"}, 10)
	api := ps.apis[0]
	_, orderID, outTradeNo := ps.paidOrder(t, "second-txn")
	var total int64
	if err := ps.pool.QueryRow(t.Context(), "SELECT amount_fen FROM payments WHERE order_id = $1", orderID).Scan(&total); err != nil {
		t.Fatal(err)
	}
	second := map[string]any{"appid": testAppID, "mchid": testMchID, "out_trade_no": outTradeNo, "transaction_id": "4200000000SECOND",
		"trade_state": "SUCCESS", "success_time": time.Now().Format(time.RFC3339), "amount": map[string]any{"total": total, "currency": "CNY"}}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			// The platform retries a 503 (a copy being applied): so do we.
			for range 20 {
				r := ps.notify(t, api, fmt.Sprint("EV-SECOND-", i%2), "TRANSACTION.SUCCESS", "transaction", second)
				if r.status != 503 {
					if r.status != 204 && r.status != 200 {
						t.Errorf("second transaction: %d %s", r.status, r.body)
					}
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	for q, want := range map[string]int{
		"SELECT count(*) FROM payment_anomalies WHERE out_trade_no = $1 AND kind = 'second_transaction'":                                            1,
		"SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.out_trade_no = $1 AND r.transaction_id = '4200000000SECOND'": 1,
		"SELECT count(*) FROM payments WHERE out_trade_no = $1 AND status = 'SUCCESS' AND transaction_id <> '4200000000SECOND'":                     1,
	} {
		if n := ps.count(t, q, outTradeNo); n != want {
			t.Errorf("%s: %d, want %d", q, n, want)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", orderID); n != 1 {
		t.Error("the order's own payment no longer stands")
	}

	// A refund whose notification does not match it.
	ps.simConfig(t, `{"drop_refund_notifications":true}`)
	user, refunded, refundedTrade := ps.paidOrder(t, "refund-mismatch")
	if r := ps.do(t, api, "POST", "/v1/orders/"+refunded+"/cancel", user, nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	waitUntil(t, "the refund to be asked for", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'PROCESSING'", refunded) == 1
	})
	var outRefundNo string
	var amount int64
	if err := ps.pool.QueryRow(t.Context(), "SELECT out_refund_no, amount_fen FROM refunds WHERE order_id = $1", refunded).Scan(&outRefundNo, &amount); err != nil {
		t.Fatal(err)
	}
	refund := func(trade string, fen int64) map[string]any {
		return map[string]any{"mchid": testMchID, "out_trade_no": trade, "out_refund_no": outRefundNo, "refund_id": "50300001", "refund_status": "SUCCESS",
			"amount": map[string]any{"refund": fen, "total": fen}}
	}
	for name, plain := range map[string]map[string]any{"amount": refund(refundedTrade, amount+1), "out_trade_no": refund(outTradeNo, amount)} {
		if r := ps.notify(t, api, "EV-REFUND-"+name, "REFUND.SUCCESS", "refund", plain); r.status < 400 {
			t.Errorf("refund notification with another %s: %d, want refused", name, r.status)
		}
	}
	if ps.count(t, "SELECT count(*) FROM payment_anomalies WHERE kind IN ('refund_amount', 'refund_trade')") != 2 ||
		ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDING'", refunded) != 1 {
		t.Error("a mismatched refund notification was applied, or not recorded")
	}
	if r := ps.notify(t, api, "EV-REFUND-ok", "REFUND.SUCCESS", "refund", refund(refundedTrade, amount)); r.status != 204 && r.status != 200 {
		t.Errorf("the matching refund notification: %d %s", r.status, r.body)
	}
	if ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDED'", refunded) != 1 {
		t.Error("the matching refund notification was not applied")
	}
}

// A refund that fails at the platform is listed for operators and counted
// in a gauge; an operator retries one (it goes through) and settles
// another outside WeChat: both orders leave REFUNDING, once each however
// often the operator clicks.
func TestFailedRefundsNeedAttention(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_WXPAY_RECONCILE_INTERVAL": "200ms", "TAKEOUT_WXPAY_QUERY_AFTER": "0s"}, 10)
	api := ps.apis[0]
	ps.simConfig(t, `{"refund_fails":true}`)
	var orders []string
	for i := range 2 {
		user, id, _ := ps.paidOrder(t, fmt.Sprint("failing-refund-", i))
		if r := ps.do(t, api, "POST", "/v1/orders/"+id+"/cancel", user, nil); r.status != 200 {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		orders = append(orders, id)
	}
	waitUntil(t, "both refunds to fail", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE status = 'FAILED'") == 2
	})
	if !strings.Contains(ps.metrics(t, api), "takeout_refunds_needing_attention 2") {
		t.Error("the gauge does not show the 2 failed refunds")
	}
	var page payment.RefundPage
	ps.do(t, api, "GET", "/admin/v1/refunds", ps.admin, nil).json(t, &page)
	if len(page.Refunds) != 2 {
		t.Fatalf("refunds needing attention: %+v", page)
	}
	byOrder := map[string]string{}
	for _, r := range page.Refunds {
		byOrder[r.OrderID] = r.OutRefundNo
	}
	ps.simConfig(t, `{}`) // the platform takes the retry
	var wg sync.WaitGroup
	for range 4 { // the operator clicks retry four times at once
		wg.Go(func() {
			r := ps.do(t, api, "POST", "/admin/v1/refunds/"+byOrder[orders[0]]+"/retry", ps.admin, map[string]string{"note": "card reissued"})
			if r.status != 200 {
				t.Errorf("retry: %d %s", r.status, r.body)
			}
		})
		wg.Go(func() {
			r := ps.do(t, api, "POST", "/admin/v1/refunds/"+byOrder[orders[1]]+"/settle", ps.admin, map[string]string{"note": "bank transfer 8841"})
			if r.status != 200 {
				t.Errorf("settle: %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	waitUntil(t, "both orders to be refunded", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = ANY($1::bigint[]) AND status = 'REFUNDED'", orders) == 2
	})
	for q, want := range map[string]int{
		"SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'RETRIED'":                  1,
		"SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'":                  1,
		"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'REFUNDED'": 1,
	} {
		if n := ps.count(t, q, orders[0]); n != want {
			t.Errorf("retried order: %s: %d, want %d", q, n, want)
		}
	}
	for q, want := range map[string]int{
		"SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SETTLED' AND note LIKE '%bank transfer 8841'": 1,
		"SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'REFUNDED'":                                   1,
		"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'REFUNDED'":                    1,
	} {
		if n := ps.count(t, q, orders[1]); n != want {
			t.Errorf("settled order: %s: %d, want %d", q, n, want)
		}
	}
	if !strings.Contains(ps.metrics(t, api), "takeout_refunds_needing_attention 0") {
		t.Error("the gauge still counts refunds needing attention")
	}
	if r := ps.do(t, api, "POST", "/admin/v1/refunds/"+byOrder[orders[0]]+"_2/settle", ps.admin, map[string]string{"note": "x"}); r.status != 409 || r.problemType() != "refund-status-conflict" {
		t.Errorf("settling a refund that went through: %d %s", r.status, r.body)
	}
}

// A user who logs out, and a staff token an admin (or the command line)
// revokes, are refused on every instance: at once where it happened, over
// Redis pub/sub on the others, and without Redis at the next reload.
func TestRevokedTokensAreRefusedEverywhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"with redis", nil},
		{"without redis", map[string]string{"TAKEOUT_REDIS_URL": "", "TAKEOUT_REVOCATION_RELOAD_INTERVAL": "200ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sh := newShop(t, 2, tc.env, 5)
			a, b := sh.apis[0], sh.apis[1]
			refused := func(inst *instance, path, token string) bool {
				return sh.do(t, inst, "GET", path, token, nil).status == 401
			}
			user := sh.login(t, "leaving-user")
			if refused(a, "/v1/orders", user) || refused(b, "/v1/orders", user) {
				t.Fatal("a fresh session is refused")
			}
			if r := sh.do(t, a, "POST", "/v1/auth/logout", user, nil); r.status != 204 {
				t.Fatalf("logout: %d %s", r.status, r.body)
			}
			if !refused(a, "/v1/orders", user) {
				t.Error("the instance that logged the user out still takes the session")
			}
			waitUntil(t, "the other instance to refuse the session", func() bool { return refused(b, "/v1/orders", user) })

			staff := sh.staffToken(t, "merchant:"+sh.merchantID)
			dishes := "/admin/v1/merchants/" + sh.merchantID + "/dishes"
			if refused(b, dishes, staff) {
				t.Fatal("a fresh staff token is refused")
			}
			var rv struct {
				TokenID string `json:"token_id"`
				Kind    string `json:"kind"`
			}
			r := sh.do(t, a, "POST", "/admin/v1/tokens/revoke", sh.admin, map[string]string{"token": staff})
			r.json(t, &rv)
			if r.status != 200 || rv.Kind != "staff" || rv.TokenID == "" {
				t.Fatalf("revoke: %d %s", r.status, r.body)
			}
			waitUntil(t, "both instances to refuse the staff token", func() bool { return refused(a, dishes, staff) && refused(b, dishes, staff) })

			// The command line, by the id `api token` printed.
			other := sh.staffToken(t, "admin")
			var stdout, stderr bytes.Buffer
			env := func(k string) string { return sh.env[k] }
			if tc.env != nil {
				env = func(k string) string {
					if v, ok := tc.env[k]; ok {
						return v
					}
					return sh.env[k]
				}
			}
			info, err := sh.tokens.Inspect(other)
			if err != nil {
				t.Fatal(err)
			}
			if err := run(t.Context(), []string{"token", "revoke", "-id", info.ID, "-by", "test"}, env, &stdout, &stderr); err != nil {
				t.Fatalf("api token revoke: %v\n%s", err, stderr.String())
			}
			waitUntil(t, "both instances to refuse the token revoked from the command line", func() bool {
				return refused(a, "/admin/v1/jobs/dead", other) && refused(b, "/admin/v1/jobs/dead", other)
			})
		})
	}
}

// A pay whose prepay failed (WeChat timed out) leaves its attempt open
// without a prepay; a cancel then closes it like any other, so no payment
// of a cancelled order stays open (found by the soak).
func TestCancelClosesAnAttemptWhosePrepayFailed(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_WECHAT_TIMEOUT": "1s"}, 10)
	api := ps.apis[0]
	user := ps.login(t, "prepay-timed-out")
	o := ps.place(t, user, "timed-out", 1)
	ps.simConfig(t, `{"prepay_delay_ms":1500}`)
	if r := ps.do(t, api, "POST", "/v1/orders/"+o.ID+"/pay", user, nil); r.status != 502 {
		t.Fatalf("pay while WeChat times out: %d %s, want 502", r.status, r.body)
	}
	if n := ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'CREATED' AND prepay_id IS NULL", o.ID); n != 1 {
		t.Fatalf("%d open attempts without a prepay, want 1", n)
	}
	if r := ps.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", user, nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	waitUntil(t, "the attempt to be closed", func() bool {
		return ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'CLOSED'", o.ID) == 1
	})
	// And no new attempt for the cancelled order.
	if r := ps.do(t, api, "POST", "/v1/orders/"+o.ID+"/pay", user, nil); r.status != 409 {
		t.Errorf("pay of the cancelled order: %d %s, want 409", r.status, r.body)
	}
}
