package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/webhook"
)

// markPaid stands in for the payments capability: it moves a pending
// order to PAID with its history row, as a payment callback would.
func (sh *shop) markPaid(t *testing.T, orderID string) {
	t.Helper()
	n := sh.count(t, `WITH o AS (UPDATE orders SET status = 'PAID', version = version + 1, updated_at = now()
		WHERE id = $1 AND status = 'PENDING_PAYMENT' RETURNING id, version)
		INSERT INTO order_status_history (order_id, from_status, to_status, version, actor, reason)
		SELECT id, 'PENDING_PAYMENT', 'PAID', version, 'payment:test', 'paid' FROM o RETURNING 1`, orderID)
	if n != 1 {
		t.Fatalf("order %s not marked paid", orderID)
	}
}

func (sh *shop) place(t *testing.T, user, key string, qty int32) order.Placed {
	t.Helper()
	c := sh.confirm(t, sh.apis[0], user, sh.cart(qty))
	r := sh.submit(t, sh.apis[0], user, key, c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("place: %d %s", r.status, r.body)
	}
	return placedOrder(t, r)
}

func TestLifecycleOverHTTP(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10)
	api := sh.apis[0]
	user := sh.login(t, "life")
	staffA := sh.staffToken(t, "merchant:"+sh.merchantID)
	otherMerchant := createMerchant(t, sh.stack, api, "Other Kitchen")
	staffB := sh.staffToken(t, "merchant:"+otherMerchant)

	// An unpaid order: the user cancels, stock comes back, once.
	o := sh.place(t, user, "life-1", 3)
	if sh.stock(t, 0) != 7 {
		t.Fatalf("stock %d after placing 3", sh.stock(t, 0))
	}
	r := sh.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", user, nil)
	var got order.Order
	r.json(t, &got)
	if r.status != 200 || got.Status != "CANCELLED" || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	again := sh.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", user, nil)
	if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" || sh.stock(t, 0) != 10 {
		t.Fatalf("second cancel: %d %s, stock %d", again.status, again.body, sh.stock(t, 0))
	}
	if r := sh.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", sh.login(t, "not-owner"), nil); r.status != 404 {
		t.Errorf("another user's cancel: %d", r.status)
	}

	// A paid order through the merchant's hands.
	p := sh.place(t, user, "life-2", 1)
	sh.markPaid(t, p.ID)
	if r := sh.do(t, api, "POST", "/admin/v1/orders/"+p.ID+"/accept", staffB, nil); r.status != 404 {
		t.Errorf("other merchant's staff accept: %d %s", r.status, r.body)
	}
	steps := []struct {
		token, action, want string
		status              int
		replayed            bool
	}{
		{staffA, "accept", "ACCEPTED", 200, false},
		{staffA, "accept", "ACCEPTED", 200, true},
		{staffA, "complete", "ACCEPTED", 409, false},
		{staffA, "ready", "READY", 200, false},
		{staffA, "ready", "READY", 200, true},
		{user, "complete", "READY", 409, false},
		{staffA, "dispatch", "DELIVERING", 200, false},
		{sh.login(t, "not-owner"), "complete", "", 404, false},
		{user, "complete", "COMPLETED", 200, false},
		{user, "complete", "COMPLETED", 200, true},
		{staffA, "complete", "COMPLETED", 200, true},
		{staffA, "refund", "COMPLETED", 409, false},
	}
	for _, s := range steps {
		path := "/admin/v1/orders/" + p.ID + "/" + s.action
		if s.token != staffA {
			path = "/v1/orders/" + p.ID + "/" + s.action // the customer's own route
		}
		r := sh.do(t, api, "POST", path, s.token, nil)
		var state string
		switch r.status {
		case 409:
			var p struct {
				CurrentStatus string `json:"current_status"`
			}
			r.json(t, &p)
			state = p.CurrentStatus
			if r.problemType() != "order-status-conflict" {
				t.Errorf("%s: %s", s.action, r.body)
			}
		case 200:
			var o order.Order
			r.json(t, &o)
			state = string(o.Status)
		}
		if r.status != s.status || state != s.want || (r.header.Get("Idempotent-Replayed") == "true") != s.replayed {
			t.Errorf("%s: %d %s, want %d %s replayed=%v", s.action, r.status, r.body, s.status, s.want, s.replayed)
		}
	}
	if n := sh.count(t, `SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'COMPLETED' AND actor LIKE 'user:%'`, p.ID); n != 1 {
		t.Errorf("%d completions by the customer in the history, want 1", n)
	}
	if r := sh.do(t, api, "POST", "/v1/orders/"+p.ID+"/cancel", user, nil); r.status != 409 {
		t.Errorf("cancel a completed order: %d", r.status)
	}
	// A paid order the user cancels before acceptance: refunding, stock back.
	q := sh.place(t, user, "life-3", 2)
	sh.markPaid(t, q.ID)
	before := sh.stock(t, 0)
	r = sh.do(t, api, "POST", "/v1/orders/"+q.ID+"/cancel", user, nil)
	r.json(t, &got)
	if got.Status != "REFUNDING" || sh.stock(t, 0) != before+2 {
		t.Errorf("cancel paid: %s, stock %d -> %d", got.Status, before, sh.stock(t, 0))
	}

	// Search: admin sees all; merchant B sees none of A's, and cannot ask.
	var page order.OrderPage
	sh.do(t, api, "GET", "/admin/v1/orders?status=COMPLETED", sh.admin, nil).json(t, &page)
	if len(page.Orders) != 1 || page.Orders[0].ID != p.ID {
		t.Errorf("search COMPLETED: %+v", page.Orders)
	}
	sh.do(t, api, "GET", "/admin/v1/orders?limit=2", staffA, nil).json(t, &page)
	if len(page.Orders) != 2 || page.NextCursor == nil {
		t.Errorf("staff A first page: %d orders", len(page.Orders))
	}
	sh.do(t, api, "GET", "/admin/v1/orders", staffB, nil).json(t, &page)
	if len(page.Orders) != 0 {
		t.Errorf("staff B sees %d of A's orders", len(page.Orders))
	}
	if r := sh.do(t, api, "GET", "/admin/v1/orders?merchant_id="+sh.merchantID, staffB, nil); r.status != 403 {
		t.Errorf("staff B asking for A's orders: %d", r.status)
	}
	for _, bad := range []string{"?status=LOST", "?from=yesterday", "?limit=0", "?user_id=x"} {
		if r := sh.do(t, api, "GET", "/admin/v1/orders"+bad, sh.admin, nil); r.status != 400 {
			t.Errorf("search %s: %d", bad, r.status)
		}
	}
	m := sh.metrics(t, api)
	if !containsAll(m, `takeout_order_transitions_total{from="PAID",to="ACCEPTED"} 1`, `takeout_order_transitions_total{from="PENDING_PAYMENT",to="CANCELLED"} 1`,
		`takeout_order_transitions_total{from="ACCEPTED",to="READY"} 1`, `takeout_order_transitions_total{from="READY",to="DELIVERING"} 1`) {
		t.Error("transition metrics missing")
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// The payment timeout job cancels an unpaid order at its deadline and
// returns its stock.
func TestPaymentTimeoutJob(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, map[string]string{"TAKEOUT_ORDER_PAY_WINDOW": "1s", "TAKEOUT_JOB_POLL_INTERVAL": "100ms"}, 5)
	user := sh.login(t, "late")
	o := sh.place(t, user, "late-1", 2)
	paid := sh.place(t, user, "late-2", 1)
	sh.markPaid(t, paid.ID)
	deadline := time.Now().Add(20 * time.Second)
	for sh.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'CANCELLED'", o.ID) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the unpaid order was not cancelled by its timeout job")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The paid order gets no timeout job at all: the sweep queues one only
	// for an order still unpaid past its deadline, once.
	for sh.count(t, "SELECT count(*) FROM river_job WHERE kind = 'order.payment_timeout' AND state = 'completed'") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the timeout job did not complete")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // two more sweeps
	if n := sh.count(t, "SELECT count(*) FROM river_job WHERE kind = 'order.payment_timeout' AND args->>'order_id' = $1", o.ID); n != 1 {
		t.Errorf("%d timeout jobs for the unpaid order, want 1", n)
	}
	if n := sh.count(t, "SELECT count(*) FROM river_job WHERE kind = 'order.payment_timeout' AND args->>'order_id' = $1", paid.ID); n != 0 {
		t.Errorf("%d timeout jobs for the paid order, want none", n)
	}
	if s := sh.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", paid.ID); s != 1 {
		t.Error("the timeout touched a paid order")
	}
	if sh.stock(t, 0) != 4 {
		t.Errorf("stock %d, want 4 (2 returned, 1 sold)", sh.stock(t, 0))
	}
}

// receiver is a merchant webhook endpoint that fails while failing is set.
type receiver struct {
	srv       *httptest.Server
	mu        sync.Mutex
	got       []delivery
	failFirst int
	failAll   atomic.Bool
}

type delivery struct {
	eventID, signatureOK string
	event                webhook.Event
	answered             int
}

func newReceiver(t *testing.T, secret string, failFirst int) *receiver {
	rc := &receiver{failFirst: failFirst}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev webhook.Event
		_ = json.Unmarshal(body, &ev)
		ok := webhook.Verify([]byte(secret), r.Header.Get(webhook.HeaderTimestamp), body, r.Header.Get(webhook.HeaderSignature))
		rc.mu.Lock()
		defer rc.mu.Unlock()
		status := 200
		if len(rc.got) < rc.failFirst || rc.failAll.Load() {
			status = 503
		}
		rc.got = append(rc.got, delivery{eventID: r.Header.Get(webhook.HeaderEventID), signatureOK: map[bool]string{true: "ok", false: "bad"}[ok], event: ev, answered: status})
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A receiver that fails the first deliveries gets the event once it
// accepts, every attempt with the same event id and a valid signature.
func TestWebhookRetriesUntilAccepted(t *testing.T) {
	t.Parallel()
	const secret = "webhook-secret-0123456789"
	rc := newReceiver(t, secret, 2)
	sh := newShop(t, 1, map[string]string{
		"TAKEOUT_WEBHOOK_URL": rc.srv.URL, "TAKEOUT_WEBHOOK_SECRET": secret,
		"TAKEOUT_WEBHOOK_RETRY_BASE": "50ms", "TAKEOUT_JOB_POLL_INTERVAL": "50ms",
	}, 5)
	user := sh.login(t, "hooked")
	o := sh.place(t, user, "hook-1", 1)
	sh.do(t, sh.apis[0], "POST", "/v1/orders/"+o.ID+"/cancel", user, nil)
	waitUntil(t, "an accepted delivery", func() bool {
		d := rc.deliveries()
		return len(d) > 0 && d[len(d)-1].answered == 200
	})
	d := rc.deliveries()
	if len(d) != 3 {
		t.Fatalf("%d deliveries, want 3 (two refused, one accepted)", len(d))
	}
	for _, x := range d {
		if x.eventID != o.ID+":order.cancelled:2" || x.event.ID != x.eventID || x.signatureOK != "ok" || x.event.Type != "order.cancelled" || x.event.Status != "CANCELLED" {
			t.Errorf("delivery %+v", x)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if len(rc.deliveries()) != 3 {
		t.Error("delivered again after the receiver accepted")
	}
}

// A receiver that always fails: the job ends in the dead list with every
// attempt's error; once the receiver is fixed, an admin retry delivers it.
func TestWebhookDeadLetterAndRetry(t *testing.T) {
	t.Parallel()
	const secret = "webhook-secret-0123456789"
	rc := newReceiver(t, secret, 0)
	rc.failAll.Store(true)
	sh := newShop(t, 1, map[string]string{
		"TAKEOUT_WEBHOOK_URL": rc.srv.URL, "TAKEOUT_WEBHOOK_SECRET": secret, "TAKEOUT_WEBHOOK_MAX_ATTEMPTS": "2",
		"TAKEOUT_WEBHOOK_RETRY_BASE": "50ms", "TAKEOUT_JOB_POLL_INTERVAL": "50ms",
	}, 5)
	api := sh.apis[0]
	user := sh.login(t, "dead")
	o := sh.place(t, user, "dead-1", 1)
	sh.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", user, nil)

	type deadList struct {
		Jobs []struct {
			ID       string `json:"id"`
			Kind     string `json:"kind"`
			Attempts int    `json:"attempts"`
			Errors   []struct {
				Error string `json:"error"`
			} `json:"errors"`
		} `json:"jobs"`
	}
	var dead deadList
	waitUntil(t, "the job to be dead", func() bool {
		sh.do(t, api, "GET", "/admin/v1/jobs/dead", sh.admin, nil).json(t, &dead)
		return len(dead.Jobs) == 1
	})
	j := dead.Jobs[0]
	if j.Kind != "webhook.deliver" || j.Attempts != 2 || len(j.Errors) != 2 || !strings.Contains(j.Errors[0].Error, "HTTP 503") {
		t.Fatalf("dead job %+v", j)
	}
	if r := sh.do(t, api, "GET", "/admin/v1/jobs/dead", sh.staffToken(t, "merchant:"+sh.merchantID), nil); r.status != 403 {
		t.Errorf("merchant staff reading dead jobs: %d", r.status)
	}
	m := sh.metrics(t, api)
	if !containsAll(m, `takeout_jobs_dead_total{kind="webhook.deliver"} 1`, `takeout_job_failures_total{kind="webhook.deliver"} 2`) {
		t.Error("job metrics missing")
	}

	rc.failAll.Store(false)
	if r := sh.do(t, api, "POST", "/admin/v1/jobs/"+j.ID+"/retry", sh.admin, nil); r.status != 200 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	waitUntil(t, "the retried delivery", func() bool {
		d := rc.deliveries()
		return d[len(d)-1].answered == 200
	})
	d := rc.deliveries()
	if d[len(d)-1].eventID != d[0].eventID {
		t.Errorf("the retry carried event id %s, first %s", d[len(d)-1].eventID, d[0].eventID)
	}
	sh.do(t, api, "GET", "/admin/v1/jobs/dead", sh.admin, nil).json(t, &dead)
	if len(dead.Jobs) != 0 {
		t.Errorf("%d dead jobs after the retry delivered", len(dead.Jobs))
	}
	if r := sh.do(t, api, "POST", "/admin/v1/jobs/999999/retry", sh.admin, nil); r.status != 404 {
		t.Errorf("retry of an unknown job: %d", r.status)
	}
}

// A delivery nobody marks delivered is completed by its job.
func TestAutoCompleteJob(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, map[string]string{"TAKEOUT_ORDER_AUTO_COMPLETE_AFTER": "1s", "TAKEOUT_JOB_POLL_INTERVAL": "100ms"}, 5)
	user := sh.login(t, "forgetful")
	o := sh.place(t, user, "auto-1", 1)
	sh.markPaid(t, o.ID)
	for _, action := range []string{"accept", "dispatch"} {
		if r := sh.do(t, sh.apis[0], "POST", "/admin/v1/orders/"+o.ID+"/"+action, sh.admin, nil); r.status != 200 {
			t.Fatalf("%s: %d %s", action, r.status, r.body)
		}
	}
	waitUntil(t, "auto-complete", func() bool {
		return sh.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'COMPLETED'", o.ID) == 1
	})
	if n := sh.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND actor = 'system:auto-complete'", o.ID); n != 1 {
		t.Errorf("%d auto-complete history rows", n)
	}
}
