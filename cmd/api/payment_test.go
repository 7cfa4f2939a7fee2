package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/wxsim"
)

// payShop is a shop whose instances take payments through a wxsim that
// plays WeChat Pay with keys made for this test.
type payShop struct {
	*shop
	merchantPEM string
	sim         *httptest.Server
	merchant    *rsa.PrivateKey
	platform    *rsa.PrivateKey
	apiKey      []byte
	payEnv      map[string]string // the payment settings the API runs with, to start more instances
}

const (
	// testRefundGap is wxsim's least time between two refunds of one
	// payment in tests (WeChat's is a minute); the API waits a little
	// more.
	testRefundGap     = 100 * time.Millisecond
	testMchID         = "1900000109"
	testV2Key         = "192006250b4c09247ec02edce69f6a2d"
	testWebhookSecret = "webhook-secret-0123456789"
)

func newPayShop(t testing.TB, extra map[string]string, stocks ...int32) *payShop {
	t.Helper()
	merchant, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	platform, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ps := &payShop{merchant: merchant, platform: platform, apiKey: []byte("0123456789abcdef0123456789abcdef")}
	der, _ := x509.MarshalPKCS8PrivateKey(merchant)
	merchantPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	ps.merchantPEM = string(merchantPEM)
	pub, _ := x509.MarshalPKIXPublicKey(&platform.PublicKey)
	platformFile := filepath.Join(t.TempDir(), "platform.pem")
	if err := os.WriteFile(platformFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		t.Fatal(err)
	}
	// The API's address is known only once it listens: callbacks go
	// through a forwarder that learns it.
	var target atomic.Pointer[url.URL]
	forward := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp := httputil.NewSingleHostReverseProxy(target.Load())
		rp.ErrorLog = log.New(io.Discard, "", 0) // the API may be gone while wxsim still calls back
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(forward.Close)
	ps.sim = httptest.NewServer(wxsim.New(testAppID, testAppSecret).WithPayments(wxsim.PayOptions{
		MchID: testMchID, MerchantKey: &merchant.PublicKey, PlatformKey: platform, PlatformSerial: "PUB_KEY_ID_SIM",
		APIv3Key: ps.apiKey, Client: &http.Client{Timeout: 10 * time.Second}, Now: time.Now,
		RefundGap: testRefundGap,
	}))
	t.Cleanup(ps.sim.Close)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	t.Cleanup(hook.Close)
	env := map[string]string{
		"TAKEOUT_WECHAT_API_BASE":       ps.sim.URL,
		"TAKEOUT_WXPAY_API_BASE":        ps.sim.URL,
		"TAKEOUT_WXPAY_MCHID":           testMchID,
		"TAKEOUT_WXPAY_MERCHANT_SERIAL": "MERCHANT-SERIAL-1",
		"TAKEOUT_WXPAY_MERCHANT_KEY":    string(merchantPEM),
		"TAKEOUT_WXPAY_PLATFORM_KEYS":   "PUB_KEY_ID_SIM=" + platformFile,
		"TAKEOUT_WXPAY_APIV3_KEY":       string(ps.apiKey),
		"TAKEOUT_WXPAY_V2_KEY":          testV2Key,
		"TAKEOUT_WXPAY_NOTIFY_URL":      forward.URL + "/v1/payments/wechat/notify",
		"TAKEOUT_WEBHOOK_URL":           hook.URL,
		"TAKEOUT_WEBHOOK_SECRET":        testWebhookSecret,
		"TAKEOUT_JOB_POLL_INTERVAL":     "50ms",
		"TAKEOUT_WXPAY_REFUND_GAP":      (testRefundGap + 50*time.Millisecond).String(),
	}
	for k, v := range extra {
		env[k] = v
	}
	ps.payEnv = env
	ps.shop = newShop(t, 1, env, stocks...)
	u, _ := url.Parse(ps.apis[0].url)
	target.Store(u)
	return ps
}

func (ps *payShop) pay(t *testing.T, user, orderID string) payment.RequestPayment {
	t.Helper()
	r := ps.do(t, ps.apis[0], "POST", "/v1/orders/"+orderID+"/pay", user, nil)
	if r.status != 200 {
		t.Fatalf("pay: %d %s", r.status, r.body)
	}
	var rp payment.RequestPayment
	r.json(t, &rp)
	return rp
}

// simConfig sets wxsim's refund knobs.
func (ps *payShop) simConfig(t *testing.T, body string) {
	t.Helper()
	resp, err := http.Post(ps.sim.URL+"/sim/config", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sim config: %d", resp.StatusCode)
	}
}

// expectOnce checks that each count query finds exactly one row for id.
func (ps *payShop) expectOnce(t *testing.T, id string, queries ...string) {
	t.Helper()
	for _, q := range queries {
		if n := ps.count(t, q, id); n != 1 {
			t.Errorf("%s: %d, want 1", q, n)
		}
	}
}

// simPay tells wxsim the user paid, with delivery knobs.
func (ps *payShop) simPay(t *testing.T, req wxsim.PayRequest) wxsim.PayResult {
	t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(ps.sim.URL+"/sim/pay", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("sim pay: %d", resp.StatusCode)
	}
	var res wxsim.PayResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

// End to end: confirm, submit, pay, a callback delivered 5 times at once
// and 3 more times later: one PAID transition, one payment row, one
// order.paid event.
func TestPaymentCallbackExactlyOnce(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	user := ps.login(t, "payer")
	o := ps.place(t, user, "pay-1", 2)

	// Concurrent pay calls share one payment row and one prepay.
	packages := make(chan string, 10)
	for range 10 {
		go func() {
			var rp payment.RequestPayment
			r := ps.do(t, ps.apis[0], "POST", "/v1/orders/"+o.ID+"/pay", user, nil)
			r.json(t, &rp)
			packages <- rp.Package
		}()
	}
	seen := map[string]bool{}
	for range 10 {
		seen[<-packages] = true
	}
	if len(seen) != 1 || ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1", o.ID) != 1 {
		t.Fatalf("concurrent pay calls: packages %v, %d payment rows", seen, ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1", o.ID))
	}
	rp := ps.pay(t, user, o.ID)
	msg := rp.AppID + "\n" + rp.TimeStamp + "\n" + rp.NonceStr + "\n" + rp.Package + "\n"
	if err := wxpay.VerifySHA256WithRSA(&ps.merchant.PublicKey, []byte(msg), rp.PaySign); err != nil || rp.SignType != "RSA" || rp.AppID != testAppID {
		t.Fatalf("requestPayment %+v: %v", rp, err)
	}
	if again := ps.pay(t, user, o.ID); again.Package != rp.Package {
		t.Errorf("pay again: prepay %s, want the live %s", again.Package, rp.Package)
	}
	if r := ps.do(t, ps.apis[0], "POST", "/v1/orders/"+o.ID+"/pay", ps.login(t, "stranger"), nil); r.status != 404 {
		t.Errorf("another user's pay: %d", r.status)
	}

	first := ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1), Copies: 5, Concurrent: true, Retries: 20, RetryMS: 20, ReorderMS: 30})
	later := ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1), Copies: 3, Retries: 20, RetryMS: 20})
	for _, a := range append(first.Answers, later.Answers...) {
		if a != 204 {
			t.Errorf("a delivery was finally answered %d (all %v %v)", a, first.Answers, later.Answers)
		}
	}
	checks := map[string]struct {
		query string
		want  int
	}{
		"paid order":          {"SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", 1},
		"PAID transitions":    {"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'", 1},
		"payment rows":        {"SELECT count(*) FROM payments WHERE order_id = $1", 1},
		"successful payments": {"SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'SUCCESS'", 1},
		"notifications":       {"SELECT count(*) FROM payment_notifications WHERE order_id = $1", 1},
		"order.paid events":   {"SELECT count(*) FROM river_job WHERE kind = 'webhook.deliver' AND args->'event'->>'type' = 'order.paid' AND args->'event'->>'order_id' = $1::text", 1},
		"refunds":             {"SELECT count(*) FROM refunds WHERE order_id = $1", 0},
	}
	for name, c := range checks {
		if n := ps.count(t, c.query, o.ID); n != c.want {
			t.Errorf("%s: %d, want %d", name, n, c.want)
		}
	}
	if r := ps.do(t, ps.apis[0], "POST", "/v1/orders/"+o.ID+"/pay", user, nil); r.status != 409 {
		t.Errorf("pay a paid order: %d", r.status)
	}
	m := ps.metrics(t, ps.apis[0])
	if !strings.Contains(m, `takeout_payment_callbacks_total{outcome="applied",source="v3"} 1`) ||
		!strings.Contains(m, `takeout_payment_callbacks_total{outcome="duplicate",source="v3"}`) {
		t.Errorf("callback metrics:\n%s", grepLines(m, "takeout_payment_callbacks_total"))
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A payment that arrives after the order was cancelled is refunded
// automatically; a second payment of a paid order too.
func TestLateAndDoublePaymentsAreRefunded(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	user := ps.login(t, "late-payer")

	// The user pays, but the callback has not arrived when they cancel:
	// closing the payment at the provider finds it paid, and it is refunded.
	late := ps.place(t, user, "late", 1)
	ps.pay(t, user, late.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, late.ID), 1), Drop: true})
	if r := ps.do(t, ps.apis[0], "POST", "/v1/orders/"+late.ID+"/cancel", user, nil); r.status != 200 {
		t.Fatalf("cancel: %d", r.status)
	}
	waitUntil(t, "the late payment's refund", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", late.ID) == 1
	})
	if n := ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'CANCELLED'", late.ID); n != 1 {
		t.Error("the late payment changed the cancelled order")
	}
	if n := ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'REFUNDED'", late.ID); n != 1 {
		t.Error("the late payment is not marked refunded")
	}

	// A plain cancel closes the open payment at the provider: it can no
	// longer be paid.
	cancelled := ps.place(t, user, "cancelled", 4)
	ps.pay(t, user, cancelled.ID)
	if r := ps.do(t, ps.apis[0], "POST", "/v1/orders/"+cancelled.ID+"/cancel", user, nil); r.status != 200 {
		t.Fatalf("cancel: %d", r.status)
	}
	waitUntil(t, "the payment to be closed", func() bool {
		return ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'CLOSED'", cancelled.ID) == 1
	})
	b, _ := json.Marshal(wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, cancelled.ID), 1)})
	resp, err := http.Post(ps.sim.URL+"/sim/pay", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("paying the closed payment of a cancelled order: %d", resp.StatusCode)
	}

	double := ps.place(t, user, "double", 2)
	ps.pay(t, user, double.ID)
	// The first prepay lapses unpaid; the user pays again with a new one,
	// and then both go through.
	ps.count(t, "UPDATE payments SET prepay_expires_at = now() - interval '1 second' WHERE order_id = $1 RETURNING 1", double.ID)
	ps.pay(t, user, double.ID)
	for attempt := 1; attempt <= 2; attempt++ {
		ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, double.ID), attempt), Retries: 10, RetryMS: 20})
	}
	waitUntil(t, "the second payment's refund", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", double.ID) == 1
	})
	if n := ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", double.ID); n != 1 {
		t.Error("the doubly paid order is not PAID")
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE r.order_id = $1 AND p.out_trade_no = $2", double.ID, payment.OutTradeNo(mustID(t, double.ID), 2)); n != 1 {
		t.Error("the refund is not of the second payment")
	}
	// The ledger: the late payment's sale and its refund net to nothing;
	// the second payment came in for no sale and went back.
	ps.ledgerHolds(t, late.ID)
	ps.ledgerHolds(t, double.ID)
	if n := ps.count(t, "SELECT count(*) FROM ledger_entries WHERE order_id = $1 AND account = 'unexpected_receipts'", double.ID); n != 2 {
		t.Errorf("the second payment: %d entries of unexpected receipts, want 2 (in, and back)", n)
	}

	// A merchant rejecting a paid order refunds it and ends REFUNDED.
	rejected := ps.place(t, user, "rejected", 3)
	ps.pay(t, user, rejected.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, rejected.ID), 1), Retries: 10, RetryMS: 20})
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+rejected.ID+"/reject", ps.admin, nil); r.status != 200 {
		t.Fatalf("reject: %d %s", r.status, r.body)
	}
	waitUntil(t, "REFUNDED", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDED'", rejected.ID) == 1
	})

	// The refund's notification again: 4 copies of one notification at
	// once and one under another id. All succeed; nothing changes.
	refundNo := payment.OutRefundNo(payment.OutTradeNo(mustID(t, rejected.ID), 1))
	plain, _ := json.Marshal(map[string]any{"mchid": testMchID, "out_refund_no": refundNo, "refund_id": "dup",
		"refund_status": "SUCCESS", "amount": map[string]any{"refund": rejected.TotalFen, "total": rejected.TotalFen}})
	refundNote := func(id string) (http.Header, []byte) {
		ct, err := wxpay.EncryptAEAD(ps.apiKey, "0123456789ab", "refund", plain)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(wxpay.Notification{ID: id, EventType: "REFUND.SUCCESS", ResourceType: "encrypt-resource",
			Resource: wxpay.Resource{OriginalType: "refund", Algorithm: "AEAD_AES_256_GCM", Ciphertext: ct, AssociatedData: "refund", Nonce: "0123456789ab"}})
		return signedHeaders(ps.platform, "PUB_KEY_ID_SIM", time.Now(), body), body
	}
	answers := make(chan int, 5)
	for i := range 5 {
		id := "EV-REFUND-DUP"
		if i == 4 {
			id = "EV-REFUND-OTHER"
		}
		go func() {
			h, body := refundNote(id)
			req, _ := http.NewRequest("POST", ps.apis[0].url+"/v1/payments/wechat/notify", bytes.NewReader(body))
			req.Header = h
			answers <- ps.send(t, req).status
		}()
	}
	for range 5 {
		if a := <-answers; a != 204 {
			t.Errorf("duplicate refund notification answered %d", a)
		}
	}
	for name, q := range map[string]string{
		"REFUNDED transitions": "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'REFUNDED'",
		"successful refunds":   "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'",
	} {
		if n := ps.count(t, q, rejected.ID); n != 1 {
			t.Errorf("%s: %d, want 1", name, n)
		}
	}
}

// notification builds a callback the way the platform does, with knobs to
// break it.
func (ps *payShop) notification(t *testing.T, plain any, key []byte, signer *rsa.PrivateKey, serial string, at time.Time) (http.Header, []byte) {
	t.Helper()
	raw, _ := json.Marshal(plain)
	ct, err := wxpay.EncryptAEAD(key, "0123456789ab", "transaction", raw)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(wxpay.Notification{ID: "EV-" + strconv.FormatInt(at.UnixNano(), 10), CreateTime: at.Format(time.RFC3339), EventType: "TRANSACTION.SUCCESS",
		ResourceType: "encrypt-resource", Resource: wxpay.Resource{OriginalType: "transaction", Algorithm: "AEAD_AES_256_GCM", Ciphertext: ct, AssociatedData: "transaction", Nonce: "0123456789ab"}})
	return signedHeaders(signer, serial, at, body), body
}

// signedHeaders signs body as the platform does.
func signedHeaders(signer *rsa.PrivateKey, serial string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	sig, _ := wxpay.SignSHA256WithRSA(signer, []byte(ts+"\nn1\n"+string(body)+"\n"))
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Wechatpay-Timestamp", ts)
	h.Set("Wechatpay-Nonce", "n1")
	h.Set("Wechatpay-Serial", serial)
	h.Set("Wechatpay-Signature", sig)
	return h
}

// Deliveries of one transaction racing on two instances: several
// notifications of it (each its own notification id), each delivered
// again and again to both at once, as the platform retries. Every delivery
// ends in success (a 503 while another delivery of it is applied on the
// same instance is retried, as the platform does), and each order is paid
// once: one PAID transition, one notification, one event, no refund, and
// one "applied" counted over both instances.
func TestConcurrentDeliveriesAcrossInstancesApplyOnce(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 20)
	ps.apis = append(ps.apis, ps.start(t, ps.payEnv))
	user := ps.login(t, "racing-payer")
	const orders, notificationsPerOrder, copies = 4, 2, 4
	type delivery struct {
		api    string
		header http.Header
		body   []byte
	}
	var deliveries []delivery
	var ids []string
	for i := range orders {
		o := ps.place(t, user, fmt.Sprintf("racing-%d", i), int32(i+1)) // another cart each: another order
		ps.pay(t, user, o.ID)
		ids = append(ids, o.ID)
		txn := map[string]any{"appid": testAppID, "mchid": testMchID, "out_trade_no": payment.OutTradeNo(mustID(t, o.ID), 1),
			"transaction_id": fmt.Sprintf("42000000000000%05d", i), "trade_state": "SUCCESS", "success_time": time.Now().Format(time.RFC3339),
			"amount": map[string]any{"total": o.TotalFen, "currency": "CNY"}}
		for n := range notificationsPerOrder {
			h, body := ps.notification(t, txn, ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", time.Now().Add(time.Duration(n)*time.Millisecond))
			for range copies {
				for _, api := range ps.apis {
					deliveries = append(deliveries, delivery{api.url, h, body})
				}
			}
		}
	}
	answers := make(chan string, len(deliveries))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, d := range deliveries {
		wg.Go(func() {
			<-start
			for range 200 {
				req, _ := http.NewRequest("POST", d.api+"/v1/payments/wechat/notify", bytes.NewReader(d.body))
				req.Header = d.header.Clone()
				resp, err := ps.client.Do(req) // each answer checked against the contract
				if err != nil {
					answers <- err.Error()
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					answers <- strconv.Itoa(resp.StatusCode)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			answers <- "still 503 after 200 tries"
		})
	}
	close(start)
	wg.Wait()
	close(answers)
	for a := range answers {
		if a != "204" {
			t.Errorf("a delivery was finally answered %s", a)
		}
	}
	for _, id := range ids {
		ps.expectOnce(t, id,
			"SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'",
			"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'",
			"SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'SUCCESS'",
			"SELECT count(*) FROM payment_notifications WHERE order_id = $1",
			"SELECT count(*) FROM river_job WHERE kind = 'webhook.deliver' AND args->'event'->>'type' = 'order.paid' AND args->'event'->>'order_id' = $1::text")
		if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", id); n != 0 {
			t.Errorf("order %s: %d refunds", id, n)
		}
	}
	applied := 0
	for _, api := range ps.apis {
		m := ps.metrics(t, api)
		for _, l := range strings.Split(m, "\n") {
			if v, ok := strings.CutPrefix(l, `takeout_payment_callbacks_total{outcome="applied",source="v3"} `); ok {
				n, _ := strconv.Atoi(v)
				applied += n
			}
		}
	}
	if applied != orders {
		t.Errorf("%d callbacks counted applied over both instances, want %d", applied, orders)
	}
	// A copy answered 503 while its first was being applied is expected
	// (the platform retries): nothing of it is logged at ERROR.
	for _, api := range ps.apis {
		for _, l := range strings.Split(api.logs.String(), "\n") {
			if strings.Contains(l, `"level":"ERROR"`) {
				t.Errorf("logged at ERROR: %s", l)
			}
		}
	}
}

// A notification redelivered byte for byte answers 204 from the
// remembered delivery; a copy with a forged signature or an altered body
// is still verified, and refused.
func TestRedeliveredNotificationIsRemembered(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	user := ps.login(t, "redelivered")
	o := ps.place(t, user, "redelivered", 1)
	ps.pay(t, user, o.ID)
	txn := map[string]any{"appid": testAppID, "mchid": testMchID, "out_trade_no": payment.OutTradeNo(mustID(t, o.ID), 1),
		"transaction_id": "4200000000000000077", "trade_state": "SUCCESS", "success_time": time.Now().Format(time.RFC3339),
		"amount": map[string]any{"total": o.TotalFen, "currency": "CNY"}}
	h, body := ps.notification(t, txn, ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", time.Now())
	post := func(h http.Header, body []byte) int {
		req, _ := http.NewRequest("POST", ps.apis[0].url+"/v1/payments/wechat/notify", bytes.NewReader(body))
		req.Header = h.Clone()
		return ps.send(t, req).status
	}
	for i := range 3 {
		if st := post(h, body); st != 204 {
			t.Fatalf("delivery %d: %d", i+1, st)
		}
	}
	mallory, _ := rsa.GenerateKey(rand.Reader, 2048)
	forged := signedHeaders(mallory, "PUB_KEY_ID_SIM", time.Now(), body)
	if st := post(forged, body); st != 401 {
		t.Errorf("same body, forged signature: %d, want 401", st)
	}
	altered := append([]byte(nil), body...)
	altered[len(altered)-2] = ' '
	if st := post(h, altered); st != 401 {
		t.Errorf("same headers, altered body: %d, want 401", st)
	}
	if n := ps.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'", o.ID); n != 1 {
		t.Errorf("%d PAID transitions", n)
	}
}

// Bad callbacks are refused with the platform's failure answer and change
// nothing.
func TestBadCallbacksAreRefused(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	user := ps.login(t, "victim")
	o := ps.place(t, user, "bad-cb", 1)
	ps.pay(t, user, o.ID)
	outTradeNo := payment.OutTradeNo(mustID(t, o.ID), 1)
	txn := func(total int64, mchid, appid, no string) map[string]any {
		return map[string]any{"appid": appid, "mchid": mchid, "out_trade_no": no, "transaction_id": "4200000000000000001",
			"trade_state": "SUCCESS", "success_time": time.Now().Format(time.RFC3339), "amount": map[string]any{"total": total, "currency": "CNY"}}
	}
	good := txn(o.TotalFen, testMchID, testAppID, outTradeNo)
	mallory, _ := rsa.GenerateKey(rand.Reader, 2048)
	now := time.Now()
	cases := []struct {
		name   string
		build  func() (http.Header, []byte)
		status int
	}{
		{"bad signature", func() (http.Header, []byte) {
			return ps.notification(t, good, ps.apiKey, mallory, "PUB_KEY_ID_SIM", now)
		}, 401},
		{"unknown serial", func() (http.Header, []byte) { return ps.notification(t, good, ps.apiKey, ps.platform, "OTHER", now) }, 401},
		{"stale timestamp", func() (http.Header, []byte) {
			return ps.notification(t, good, ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", now.Add(-6*time.Minute))
		}, 401},
		{"signature probe", func() (http.Header, []byte) {
			h, b := ps.notification(t, good, ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", now)
			h.Set("Wechatpay-Signature", "WECHATPAY/SIGNTEST/"+h.Get("Wechatpay-Signature"))
			return h, b
		}, 401},
		{"wrong APIv3 key", func() (http.Header, []byte) {
			return ps.notification(t, good, []byte("ffffffffffffffffffffffffffffffff"), ps.platform, "PUB_KEY_ID_SIM", now)
		}, 400},
		{"tampered ciphertext", func() (http.Header, []byte) {
			_, b := ps.notification(t, good, ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", now)
			var n wxpay.Notification
			_ = json.Unmarshal(b, &n)
			c := []byte(n.Resource.Ciphertext)
			c[5] ^= 1
			n.Resource.Ciphertext = string(c)
			raw, _ := json.Marshal(n)
			return signedHeaders(ps.platform, "PUB_KEY_ID_SIM", now, raw), raw
		}, 400},
		{"amount mismatch", func() (http.Header, []byte) {
			return ps.notification(t, txn(1, testMchID, testAppID, outTradeNo), ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", now)
		}, 400},
		{"mchid mismatch", func() (http.Header, []byte) {
			return ps.notification(t, txn(o.TotalFen, "1999999999", testAppID, outTradeNo), ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", now)
		}, 400},
		{"appid mismatch", func() (http.Header, []byte) {
			return ps.notification(t, txn(o.TotalFen, testMchID, "wxother", outTradeNo), ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", now)
		}, 400},
		{"unknown order", func() (http.Header, []byte) {
			return ps.notification(t, txn(o.TotalFen, testMchID, testAppID, "T999-1"), ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", now)
		}, 404},
		{"malformed JSON", func() (http.Header, []byte) {
			body := []byte(`{"id":`)
			return signedHeaders(ps.platform, "PUB_KEY_ID_SIM", now, body), body
		}, 400},
	}
	for _, c := range cases {
		h, body := c.build()
		req, _ := http.NewRequest("POST", ps.apis[0].url+"/v1/payments/wechat/notify", bytes.NewReader(body))
		req.Header = h
		r := ps.send(t, req)
		var fail struct{ Code, Message string }
		_ = json.Unmarshal(r.body, &fail)
		if r.status != c.status || fail.Code != "FAIL" || fail.Message == "" {
			t.Errorf("%s: %d %s, want %d FAIL", c.name, r.status, r.body, c.status)
		}
	}
	for name, q := range map[string]string{
		"order still pending": "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PENDING_PAYMENT'",
		"no notification":     "SELECT 1 - count(*) FROM payment_notifications WHERE order_id = $1",
		"payment not paid":    "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'CREATED'",
	} {
		if n := ps.count(t, q, o.ID); n != 1 {
			t.Errorf("%s: %d", name, n)
		}
	}
	if n := ps.count(t, "SELECT count(DISTINCT kind) FROM payment_anomalies WHERE out_trade_no = $1", outTradeNo); n != 3 {
		t.Errorf("%d anomaly kinds recorded, want 3 (amount, mchid, appid)", n)
	}
	m := ps.metrics(t, ps.apis[0])
	if !strings.Contains(m, `takeout_payment_anomalies_total{kind="amount"} 1`) {
		t.Error("anomaly metric missing")
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(fmt.Errorf("id %q: %w", s, err))
	}
	return id
}

// Callbacks dropped entirely: the reconciliation job finds the payment and
// the order becomes PAID once; callbacks that arrive after that change
// nothing.
func TestDroppedCallbacksAreReconciled(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_WXPAY_RECONCILE_INTERVAL": "200ms", "TAKEOUT_WXPAY_QUERY_AFTER": "0s"}, 10)
	user := ps.login(t, "unlucky")
	o := ps.place(t, user, "dropped", 1)
	ps.pay(t, user, o.ID)
	no := payment.OutTradeNo(mustID(t, o.ID), 1)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: no, Drop: true})
	waitUntil(t, "reconciliation", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", o.ID) == 1
	})
	res := ps.simPay(t, wxsim.PayRequest{OutTradeNo: no, Copies: 2, Concurrent: true, Retries: 10, RetryMS: 20})
	for _, a := range res.Answers {
		if a != 204 {
			t.Errorf("late callback answered %d", a)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'", o.ID); n != 1 {
		t.Errorf("%d PAID transitions", n)
	}
	if n := ps.count(t, "SELECT count(*) FROM payment_notifications WHERE order_id = $1", o.ID); n != 1 {
		t.Errorf("%d processed notifications", n)
	}
}

// A refund's result arrives only one way, never by notification: the
// platform finishes it silently (the reconciliation job's query finds it),
// or the refund API answers SUCCESS at once (as it does when a refund job
// is retried after the refund finished; the job applies it). Either way
// the order becomes REFUNDED, once. The second case was found by the
// soak: a database crash made the refund job retry, the notification had
// given up meanwhile, and the order stayed REFUNDING.
func TestRefundWithoutNotificationIsApplied(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sim string
		env       map[string]string
	}{
		{"reconciled by query", `{"drop_refund_notifications":true}`,
			map[string]string{"TAKEOUT_WXPAY_RECONCILE_INTERVAL": "200ms", "TAKEOUT_WXPAY_QUERY_AFTER": "0s"}},
		{"answered at once", `{"refund_at_once":true,"drop_refund_notifications":true}`,
			map[string]string{"TAKEOUT_WXPAY_RECONCILE_INTERVAL": "1h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ps := newPayShop(t, tc.env, 10)
			ps.simConfig(t, tc.sim)
			user := ps.login(t, "refund-in-silence")
			o := ps.place(t, user, "silent", 1)
			ps.pay(t, user, o.ID)
			ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1), Retries: 10, RetryMS: 20})
			if r := ps.do(t, ps.apis[0], "POST", "/v1/orders/"+o.ID+"/cancel", user, nil); r.status != 200 {
				t.Fatalf("cancel a paid order: %d %s", r.status, r.body)
			}
			waitUntil(t, "the order to be refunded", func() bool {
				return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDED'", o.ID) == 1
			})
			ps.expectOnce(t, o.ID,
				"SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'",
				"SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'REFUNDED'",
				"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'REFUNDED'",
				"SELECT count(*) FROM payment_notifications WHERE order_id = $1 AND event_type = 'REFUND.SUCCESS'")
		})
	}
}

// At the pay deadline the payment went through but is being applied by
// another instance at that moment (its transaction holds the payment's
// row): the timeout must not cancel the order, and once that transaction
// is gone (here it rolls back, as an instance that died would) the
// timeout applies the payment itself. Found by the soak, where the order
// was cancelled and its paid payment left open.
func TestTimeoutWaitsForAPaymentBeingApplied(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_ORDER_PAY_WINDOW": "1s", "TAKEOUT_WXPAY_RECONCILE_INTERVAL": "1h",
		"TAKEOUT_JOB_RETRY_MAX_DELAY": "1s"}, 10)
	user := ps.login(t, "being-applied")
	o := ps.place(t, user, "being-applied", 1)
	ps.pay(t, user, o.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1), Drop: true})

	ctx := context.Background()
	elsewhere, err := ps.db(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = elsewhere.Rollback(ctx) }()
	if _, err := elsewhere.Exec(ctx, "SELECT 1 FROM payments WHERE order_id = $1 FOR UPDATE", o.ID); err != nil {
		t.Fatal(err)
	}

	held := time.Now().Add(5 * time.Second)
	for time.Now().Before(held) {
		if n := ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status <> 'PENDING_PAYMENT'", o.ID); n != 0 {
			t.Fatal("the order left PENDING_PAYMENT while its payment was being applied elsewhere")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := ps.count(t, "SELECT count(*) FROM river_job WHERE kind = 'order.payment_timeout' AND attempt > 0"); n == 0 {
		t.Fatal("the timeout never ran: the test proves nothing")
	}
	if err := elsewhere.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the timeout to apply the payment", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", o.ID) == 1
	})
	ps.expectOnce(t, o.ID,
		"SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'SUCCESS'",
		"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'")
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", o.ID); n != 0 {
		t.Errorf("%d refunds of an order that was paid in time", n)
	}
}

// At the pay deadline an unpaid payment is closed at the provider, then
// the order is cancelled; a payment that went through unannounced makes
// the order PAID instead.
func TestDeadlineClosesOrFindsPayment(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_ORDER_PAY_WINDOW": "1s", "TAKEOUT_WXPAY_RECONCILE_INTERVAL": "1h"}, 10)
	user := ps.login(t, "deadline")
	unpaid := ps.place(t, user, "unpaid", 1)
	ps.pay(t, user, unpaid.ID)
	paid := ps.place(t, user, "silent", 2)
	ps.pay(t, user, paid.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, paid.ID), 1), Drop: true})
	waitUntil(t, "both deadlines", func() bool {
		return ps.count(t, "SELECT count(*) FROM river_job WHERE kind = 'order.payment_timeout' AND state = 'completed'") == 2
	})
	if n := ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'CANCELLED'", unpaid.ID); n != 1 {
		t.Error("the unpaid order was not cancelled")
	}
	if n := ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'CLOSED'", unpaid.ID); n != 1 {
		t.Error("the unpaid payment was not closed")
	}
	if n := ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", paid.ID); n != 1 {
		t.Error("the silently paid order was cancelled instead of paid")
	}
	b, _ := json.Marshal(wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, unpaid.ID), 1)})
	resp, err := http.Post(ps.sim.URL+"/sim/pay", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("paying a closed payment at the provider: %d", resp.StatusCode)
	}
}

// v2XML builds a legacy XML payment notification signed with the v2 key.
func v2XML(t *testing.T, f map[string]string, signType string) string {
	t.Helper()
	if signType != "" {
		f["sign_type"] = signType
	}
	sig, err := wxpay.V2Sign(f, testV2Key, signType)
	if err != nil {
		t.Fatal(err)
	}
	f["sign"] = sig
	var b strings.Builder
	b.WriteString("<xml>")
	for k, v := range f {
		b.WriteString("<" + k + "><![CDATA[" + v + "]]></" + k + ">")
	}
	b.WriteString("</xml>")
	return b.String()
}

func (ps *payShop) postV2(t *testing.T, body string) string {
	t.Helper()
	resp, err := ps.client.Post(ps.apis[0].url+"/v1/payments/wechat/notify/v2", "text/xml", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The legacy v2 XML callback: verified with the v2 key, applied once
// through the same core (so v3 and v2 deliveries of one payment are one),
// answered with the XML reply.
func TestV2Callback(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	user := ps.login(t, "legacy")
	o := ps.place(t, user, "v2-1", 1)
	ps.pay(t, user, o.ID)
	fields := func(total string) map[string]string {
		return map[string]string{"appid": testAppID, "mch_id": testMchID, "out_trade_no": payment.OutTradeNo(mustID(t, o.ID), 1),
			"transaction_id": "4200000000000000777", "total_fee": total, "fee_type": "CNY", "result_code": "SUCCESS",
			"return_code": "SUCCESS", "time_end": "20261130120000", "nonce_str": "abc", "trade_type": "JSAPI"}
	}
	const success = "<return_code><![CDATA[SUCCESS]]>"
	bad := fields(strconv.FormatInt(o.TotalFen, 10))
	body := v2XML(t, bad, wxpay.SignTypeMD5)
	body = strings.Replace(body, "<total_fee><![CDATA["+bad["total_fee"], "<total_fee><![CDATA[1", 1)
	for name, b := range map[string]string{
		"tampered amount": body,
		"malformed XML":   "<xml><appid>",
		"wrong key":       strings.Replace(v2XML(t, fields(strconv.FormatInt(o.TotalFen, 10)), wxpay.SignTypeMD5), "<sign><![CDATA[", "<sign><![CDATA[00", 1),
	} {
		if got := ps.postV2(t, b); strings.Contains(got, success) {
			t.Errorf("%s: answered %s", name, got)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PENDING_PAYMENT'", o.ID); n != 1 {
		t.Fatal("a refused v2 callback changed the order")
	}
	good := v2XML(t, fields(strconv.FormatInt(o.TotalFen, 10)), wxpay.SignTypeHMACSHA256)
	answers := make(chan string, 4)
	for range 4 {
		go func() { answers <- ps.postV2(t, good) }()
	}
	successes := 0
	for range 4 {
		if strings.Contains(<-answers, success) {
			successes++
		}
	}
	// Copies racing the first are told to retry; retried, all succeed.
	for successes < 4 {
		if strings.Contains(ps.postV2(t, good), success) {
			successes++
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'", o.ID); n != 1 {
		t.Errorf("%d PAID transitions", n)
	}
	// The same transaction announced again through v3: a duplicate. (One
	// with another transaction id would be a second payment, refunded:
	// TestUnexpectedMoneyIsRecordedAndGivenBack.)
	same := map[string]any{"appid": testAppID, "mchid": testMchID, "out_trade_no": payment.OutTradeNo(mustID(t, o.ID), 1),
		"transaction_id": "4200000000000000777", "trade_state": "SUCCESS", "success_time": time.Now().Format(time.RFC3339),
		"amount": map[string]any{"total": o.TotalFen, "currency": "CNY"}}
	if r := ps.notify(t, ps.apis[0], "EV-V3-AFTER-V2", "TRANSACTION.SUCCESS", "transaction", same); r.status != 204 {
		t.Errorf("v3 after v2: %d %s", r.status, r.body)
	}
	if n := ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'SUCCESS'", o.ID); n != 1 {
		t.Errorf("%d successful payments", n)
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", o.ID); n != 0 {
		t.Errorf("v3 after v2 was refunded as a second payment")
	}
}

// A full run (login, confirm, submit, pay, callbacks, admin actions, bad
// input) leaves no secret in the logs: no configured secret or key, no
// session, staff or confirm token, no signature.
func TestLogsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	api := ps.apis[0]
	user := ps.login(t, "secretive")
	c := ps.confirm(t, api, user, ps.cart(1))
	r := ps.submit(t, api, user, "secret-key-1", c.ConfirmToken)
	o := placedOrder(t, r)
	rp := ps.pay(t, user, o.ID)
	res := ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1), Copies: 2, Concurrent: true, Retries: 5, RetryMS: 20})
	ps.do(t, api, "POST", "/admin/v1/orders/"+o.ID+"/accept", ps.admin, nil)
	ps.do(t, api, "POST", "/v1/orders/confirm", user, `{"merchant_id":"x"}`)
	ps.do(t, api, "GET", "/v1/orders", tamper(user), nil)
	h, body := ps.notification(t, map[string]any{"out_trade_no": "nope"}, ps.apiKey, ps.platform, "PUB_KEY_ID_SIM", time.Now())
	req, _ := http.NewRequest("POST", api.url+"/v1/payments/wechat/notify", bytes.NewReader(body))
	req.Header = h
	ps.send(t, req)
	if res.Answers[0] != 204 {
		t.Fatalf("payment flow failed: %v", res.Answers)
	}

	logs := api.logs.String()
	if !strings.Contains(logs, `"msg":"http request"`) {
		t.Fatal("no request logs captured")
	}
	if !strings.Contains(logs, `"order_id":"`+o.ID+`"`) && !strings.Contains(logs, `"order_id":`+o.ID) {
		t.Error("request logs do not carry the order id")
	}
	secrets := map[string]string{
		"session secret":      ps.env["TAKEOUT_SESSION_SECRET"],
		"staff secret":        ps.env["TAKEOUT_STAFF_SECRET"],
		"confirm secret":      ps.env["TAKEOUT_CONFIRM_SECRET"],
		"app secret":          ps.env["TAKEOUT_WECHAT_APP_SECRET"],
		"APIv3 key":           string(ps.apiKey),
		"webhook secret":      testWebhookSecret,
		"v2 key":              testV2Key,
		"merchant key":        strings.Split(ps.merchantPEM, "\n")[1],
		"user token":          user,
		"admin token":         ps.admin,
		"confirm token":       c.ConfirmToken,
		"paySign":             rp.PaySign,
		"callback signature":  h.Get("Wechatpay-Signature"),
		"token signature":     user[strings.LastIndex(user, ".")+1:],
		"confirm token's MAC": c.ConfirmToken[strings.LastIndex(c.ConfirmToken, ".")+1:],
	}
	for name, secret := range secrets {
		if secret == "" {
			t.Fatalf("%s is empty: the test is not looking", name)
		}
		if strings.Contains(logs, secret) {
			t.Errorf("the logs contain the %s", name)
		}
	}
}
