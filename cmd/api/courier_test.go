package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/takeout/takeout/internal/courier"
	"github.com/takeout/takeout/internal/couriersim"
)

// courierShop is a shop whose API dispatches to the courier simulator's
// two providers.
type courierShop struct {
	*shop
	sim    *couriersim.Server
	simURL string
	secret string
}

const (
	testDadaKey    = "dada-test-app"
	testMeituanKey = "meituan-test-app"
)

// newCourierShop starts the courier simulator and an API dispatching to
// both of its providers (Dada first unless env says otherwise) on
// accept; the providers call back through a forwarder bound to the API
// once it listens.
func newCourierShop(t *testing.T, env map[string]string, stocks ...int32) *courierShop {
	t.Helper()
	var apiURL atomic.Pointer[url.URL]
	forward := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		if u := apiURL.Load(); u != nil {
			r.SetURL(u)
		}
	}})
	t.Cleanup(forward.Close)
	secret := "courier-secret-" + strconv.Itoa(len(t.Name()))
	sim := couriersim.New(couriersim.Options{
		DadaAppKey: testDadaKey, DadaAppSecret: secret, MeituanAppKey: testMeituanKey, MeituanAppSecret: secret,
		MeituanCallbackURL: forward.URL + "/v1/couriers/meituan/callback",
	})
	simSrv := httptest.NewServer(sim)
	t.Cleanup(func() { simSrv.Close(); sim.Close() })
	all := map[string]string{
		"TAKEOUT_DADA_API_BASE": simSrv.URL + "/dada", "TAKEOUT_DADA_APP_KEY": testDadaKey, "TAKEOUT_DADA_APP_SECRET": secret,
		"TAKEOUT_MEITUAN_API_BASE": simSrv.URL + "/meituan", "TAKEOUT_MEITUAN_APP_KEY": testMeituanKey, "TAKEOUT_MEITUAN_APP_SECRET": secret,
		"TAKEOUT_COURIER_CALLBACK_BASE": forward.URL, "TAKEOUT_COURIER_TIMEOUT": "1s", "TAKEOUT_COURIER_SWEEP_INTERVAL": "200ms",
	}
	for k, v := range env {
		all[k] = v
	}
	sh := newShop(t, 1, all, stocks...)
	u, err := url.Parse(sh.apis[0].url)
	if err != nil {
		t.Fatal(err)
	}
	apiURL.Store(u)
	cs := &courierShop{shop: sh, sim: sim, simURL: simSrv.URL, secret: secret}
	cs.dispatchOn(t, courier.DispatchAccept)
	return cs
}

func (cs *courierShop) dispatchOn(t *testing.T, when string) {
	t.Helper()
	r := cs.do(t, cs.apis[0], "PUT", "/admin/v1/merchants/"+cs.merchantID+"/courier", cs.admin, map[string]string{"dispatch": when})
	if r.status != 200 {
		t.Fatalf("set courier dispatch: %d %s", r.status, r.body)
	}
}

// paidOrder places an order for a new customer and marks it paid; it
// returns the order id and the customer's token.
func (cs *courierShop) paidOrder(t *testing.T, code string) (id, user string) {
	t.Helper()
	user = cs.login(t, code)
	c := cs.confirm(t, cs.apis[0], user, cs.cart(1))
	r := cs.submit(t, cs.apis[0], user, code, c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("place: %d %s", r.status, r.body)
	}
	id = placedOrder(t, r).ID
	cs.markPaid(t, id)
	return id, user
}

// advance moves the simulated rider of outNo on by a step.
func (cs *courierShop) advance(t *testing.T, outNo string) {
	t.Helper()
	if _, err := cs.sim.Advance(outNo); err != nil {
		t.Fatal(err)
	}
}

func (cs *courierShop) act(t *testing.T, id, action string) {
	t.Helper()
	if r := cs.do(t, cs.apis[0], "POST", "/admin/v1/orders/"+id+"/"+action, cs.admin, nil); r.status != 200 {
		t.Fatalf("%s: %d %s", action, r.status, r.body)
	}
}

// courierDelivery is an order's delivery attempt as the database has it.
type courierDelivery struct {
	outNo, provider, status, rider string
	attempt                        int
	fee, cancelFee                 int64
}

func (cs *courierShop) deliveries(t *testing.T, orderID string) []courierDelivery {
	t.Helper()
	rows, err := cs.pool.Query(t.Context(), `SELECT out_no, provider, status, rider_id, attempt, coalesce(fee_fen, 0) + tip_fen, cancel_fee_fen
		FROM deliveries WHERE order_id = $1 ORDER BY attempt`, orderID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []courierDelivery
	for rows.Next() {
		var d courierDelivery
		if err := rows.Scan(&d.outNo, &d.provider, &d.status, &d.rider, &d.attempt, &d.fee, &d.cancelFee); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitStatus waits until the order's attempt-th delivery is in status.
func (cs *courierShop) waitStatus(t *testing.T, orderID string, attempt int, status courier.Status) courierDelivery {
	t.Helper()
	var got courierDelivery
	waitUntil(t, fmt.Sprintf("delivery %d of %s %s", attempt, orderID, status), func() bool {
		ds := cs.deliveries(t, orderID)
		if len(ds) < attempt {
			return false
		}
		got = ds[attempt-1]
		return got.status == string(status)
	})
	return got
}

func (cs *courierShop) orderStatus(t *testing.T, id string) string {
	t.Helper()
	return cs.strs(t, "SELECT status FROM orders WHERE id = $1", id)[0]
}

// checkMonotonic fails when a delivery's applied statuses ever go back.
func (cs *courierShop) checkMonotonic(t *testing.T, orderID string) {
	t.Helper()
	rank := map[string]int{"PLACED": 1, "ASSIGNED": 2, "ARRIVED": 3, "PICKED_UP": 4, "DELIVERED": 5, "CANCELLED": 6, "FAILED": 6}
	rows, err := cs.pool.Query(t.Context(), `SELECT e.delivery_id, e.status FROM delivery_events e
		WHERE e.order_id = $1 ORDER BY e.delivery_id, e.seq`, orderID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[int64]int{}
	for rows.Next() {
		var id int64
		var st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		if rank[st] < last[id] {
			t.Errorf("delivery %d went back to %s", id, st)
		}
		last[id] = rank[st]
	}
}

// The whole way: priced at confirm, placed on that quote at the accept,
// the rider's progress moves the order to DELIVERING at pickup and
// COMPLETED at delivery, the customer sees the rider with a masked
// phone, and the fee is in the ledger once.
func TestCourierDelivery(t *testing.T) {
	t.Parallel()
	cs := newCourierShop(t, nil, 100)
	user := cs.login(t, "courier-way")
	c := cs.confirm(t, cs.apis[0], user, cs.cart(1))
	out1 := "TK" + c.OrderID + "-1"
	if n := cs.sim.Quotes(out1); n != 1 {
		t.Fatalf("%d quotes asked at confirm, want 1", n)
	}
	cs.confirm(t, cs.apis[0], user, cs.cart(1)) // the same cart again: the cached quote
	if n := cs.sim.Quotes(out1); n != 1 {
		t.Fatalf("%d quotes after confirming again, want the cached one", n)
	}
	r := cs.submit(t, cs.apis[0], user, "courier-way", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("place: %d %s", r.status, r.body)
	}
	id := placedOrder(t, r).ID
	if r := cs.do(t, cs.apis[0], "GET", "/v1/orders/"+id+"/delivery", user, nil); r.status != 404 {
		t.Errorf("delivery before dispatch: %d %s", r.status, r.body)
	}
	cs.markPaid(t, id)
	cs.act(t, id, "accept")
	d := cs.waitStatus(t, id, 1, courier.Placed)
	if d.provider != "dada" || d.outNo != out1 {
		t.Fatalf("placed %+v, want with dada as %s", d, out1)
	}
	if n := cs.sim.Quotes(out1); n != 1 {
		t.Errorf("%d quotes: the placement did not use the confirm's", n)
	}
	for _, want := range []courier.Status{courier.Assigned, courier.Arrived, courier.PickedUp} {
		cs.advance(t, out1)
		cs.waitStatus(t, id, 1, want)
	}
	if st := cs.orderStatus(t, id); st != "DELIVERING" {
		t.Fatalf("order %s at pickup, want DELIVERING", st)
	}
	var v courier.View
	if r := cs.do(t, cs.apis[0], "GET", "/v1/orders/"+id+"/delivery", user, nil); r.status != 200 {
		t.Fatalf("delivery: %d %s", r.status, r.body)
	} else {
		r.json(t, &v)
	}
	simOrder, _ := cs.sim.Order(out1)
	if v.Status != courier.PickedUp || v.Rider == nil || v.Rider.Name != simOrder.RiderName || v.Location == nil {
		t.Fatalf("the customer sees %+v", v)
	}
	if want := simOrder.RiderPhone[:3] + "****" + simOrder.RiderPhone[7:]; v.Rider.Phone != want {
		t.Errorf("rider phone %q, want masked %q", v.Rider.Phone, want)
	}
	if r := cs.do(t, cs.apis[0], "GET", "/v1/orders/"+id+"/delivery", cs.login(t, "courier-stranger"), nil); r.status != 404 {
		t.Errorf("another customer's view: %d", r.status)
	}
	cs.advance(t, out1)
	cs.waitStatus(t, id, 1, courier.Delivered)
	if st := cs.orderStatus(t, id); st != "COMPLETED" {
		t.Fatalf("order %s at delivery, want COMPLETED", st)
	}
	if n := cs.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND actor = 'system:courier'", id); n != 2 {
		t.Errorf("%d order moves by the courier, want dispatch and complete", n)
	}
	fees := cs.count(t, "SELECT coalesce(sum(amount_fen), 0) FROM ledger_entries WHERE order_id = $1 AND account = 'merchant_courier_fees'", id)
	if int64(fees) != simOrder.FeeFen || fees == 0 {
		t.Errorf("courier fees in the ledger %d, the provider charged %d", fees, simOrder.FeeFen)
	}
	cs.checkMonotonic(t, id)
}

// Dada's callbacks are signed over the order and the time only: a
// callback anyone can forge says nothing until Dada is asked.
func TestCourierDadaCallbackConfirmedByQuery(t *testing.T) {
	t.Parallel()
	cs := newCourierShop(t, nil, 100)
	id, _ := cs.paidOrder(t, "courier-forged")
	cs.act(t, id, "accept")
	d := cs.waitStatus(t, id, 1, courier.Placed)
	cs.advance(t, d.outNo)
	cs.waitStatus(t, id, 1, courier.Assigned)
	now := time.Now().Add(time.Minute).Unix()
	ts := strconv.FormatInt(now, 10)
	forged := fmt.Sprintf(`{"client_id":"x","order_id":%q,"order_status":4,"update_time":%d,"signature":%q,"dm_id":1,"dm_name":"Mallory"}`,
		d.outNo, now, courier.DadaCallbackSign("x", d.outNo, ts))
	if r := cs.doRaw(t, cs.apis[0], "POST", "/v1/couriers/dada/callback", "", forged, "application/json"); r.status != 200 {
		t.Fatalf("forged callback: %d %s", r.status, r.body)
	}
	if r := cs.doRaw(t, cs.apis[0], "POST", "/v1/couriers/dada/callback", "", strings.Replace(forged, `"signature":"`, `"signature":"0`, 1), "application/json"); r.status != 401 {
		t.Errorf("badly signed callback: %d", r.status)
	}
	got := cs.deliveries(t, id)[0]
	if got.status != string(courier.Assigned) || got.rider == "1" {
		t.Fatalf("after a forged 'delivered': %+v", got)
	}
	if st := cs.orderStatus(t, id); st != "ACCEPTED" {
		t.Errorf("order %s after a forged callback", st)
	}
}

// Meituan's signed callbacks, repeated at once and arriving out of order:
// the delivery moves forward only, the order completes once, and the fee
// is posted once.
func TestCourierCallbacksRepeatedAndReordered(t *testing.T) {
	t.Parallel()
	cs := newCourierShop(t, map[string]string{"TAKEOUT_COURIER_ORDER": "meituan,dada"}, 100)
	id, _ := cs.paidOrder(t, "courier-storm")
	cs.act(t, id, "accept")
	d := cs.waitStatus(t, id, 1, courier.Placed)
	if d.provider != "meituan" {
		t.Fatalf("placed with %s", d.provider)
	}
	base := time.Now().Unix()
	callback := func(status int, rider string, at int64) string {
		f := url.Values{"delivery_id": {d.outNo}, "mt_peisong_id": {"MT1"}, "order_id": {d.outNo}, "status": {strconv.Itoa(status)},
			"courier_id": {rider}, "courier_name": {"骑手" + rider}, "courier_phone": {"13800138000"}, "appkey": {testMeituanKey},
			"timestamp": {strconv.FormatInt(at, 10)}}
		f.Set("sign", courier.MeituanSign(f, cs.secret))
		return f.Encode()
	}
	// Taken by rider 1, reassigned to rider 2, picked up, delivered: sent
	// twenty times over, in every order at once.
	bodies := []string{
		callback(courier.MeituanTaken, "1", base+1), callback(courier.MeituanTaken, "2", base+2),
		callback(courier.MeituanPickedUp, "2", base+3), callback(courier.MeituanDelivered, "2", base+4),
	}
	var wg sync.WaitGroup
	for i := range 80 {
		wg.Go(func() {
			r := cs.doRaw(t, cs.apis[0], "POST", "/v1/couriers/meituan/callback", "", bodies[(i*7)%len(bodies)], "application/x-www-form-urlencoded")
			if r.status != 200 || !strings.Contains(string(r.body), `"code":0`) {
				t.Errorf("callback: %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	got := cs.deliveries(t, id)
	if len(got) != 1 || got[0].status != string(courier.Delivered) || got[0].rider != "2" {
		t.Fatalf("deliveries %+v", got)
	}
	if st := cs.orderStatus(t, id); st != "COMPLETED" {
		t.Fatalf("order %s", st)
	}
	if n := cs.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'COMPLETED'", id); n != 1 {
		t.Errorf("completed %d times", n)
	}
	if n := cs.count(t, "SELECT count(*) FROM ledger_entries WHERE order_id = $1 AND kind = 'courier_fee'", id); n != 2 {
		t.Errorf("%d fee entries, want one journal of two", n)
	}
	cs.checkMonotonic(t, id)
	// An update older than the last applied changes nothing.
	r := cs.doRaw(t, cs.apis[0], "POST", "/v1/couriers/meituan/callback", "", callback(courier.MeituanCancelled, "2", base), "application/x-www-form-urlencoded")
	if r.status != 200 || cs.deliveries(t, id)[0].status != string(courier.Delivered) {
		t.Errorf("a stale cancel: %d, now %+v", r.status, cs.deliveries(t, id))
	}
}

// A provider that refuses, fails after placing, or finds no rider in
// time: the order is placed again with the other provider, exactly
// once, however many callbacks and sweeps race to do it.
func TestCourierReplaced(t *testing.T) {
	t.Parallel()
	cs := newCourierShop(t, map[string]string{"TAKEOUT_COURIER_ASSIGN_WITHIN": "1s", "TAKEOUT_COURIER_TIP_FEN": "0"}, 100)

	t.Run("answer lost, then refused", func(t *testing.T) {
		// First, while nothing else runs at Dada: the first try is taken and never answered; the next ones find
		// Dada down. A refusal after a lost answer proves nothing: Dada is
		// asked, and the order is found placed there, not placed again.
		id, _ := cs.paidOrder(t, "courier-lost")
		cs.sim.SetConfig(couriersim.Config{Dada: couriersim.Faults{HangAfterPlace: 1}})
		cs.act(t, id, "accept")
		outNo := "TK" + id + "-1"
		waitUntil(t, "dada holding the order", func() bool { _, ok := cs.sim.Order(outNo); return ok })
		if ds := cs.deliveries(t, id); ds[0].status != string(courier.Quoted) {
			t.Fatalf("recorded %+v before the answer was lost", ds)
		}
		// Written before the placement was sent, so that a process killed
		// now leaves it known: the try is held, the placement unsure.
		if n := cs.count(t, `SELECT count(*) FROM deliveries WHERE out_no = $1 AND place_unsure AND placing_until > now()`, outNo); n != 1 {
			t.Errorf("while dada holds the order unanswered: %d deliveries held and unsure, want 1", n)
		}
		cs.sim.SetConfig(couriersim.Config{Dada: couriersim.Faults{Down: 2}})
		d := cs.waitStatus(t, id, 1, courier.Placed)
		time.Sleep(500 * time.Millisecond)
		if ds := cs.deliveries(t, id); len(ds) != 1 || d.provider != "dada" {
			t.Fatalf("deliveries %+v", ds)
		}
		if o, ok := cs.sim.Order(d.outNo); !ok || o.Status != courier.Placed {
			t.Errorf("at dada: %+v", o)
		}
		cs.sim.SetConfig(couriersim.Config{})
	})
	t.Run("refused", func(t *testing.T) {
		cs.sim.SetConfig(couriersim.Config{Dada: couriersim.Faults{Refuse: 1}})
		id, _ := cs.paidOrder(t, "courier-refused")
		cs.act(t, id, "accept")
		d := cs.waitStatus(t, id, 2, courier.Placed)
		if ds := cs.deliveries(t, id); ds[0].status != string(courier.Failed) || d.provider != "meituan" {
			t.Fatalf("deliveries %+v", ds)
		}
	})
	t.Run("down", func(t *testing.T) {
		cs.sim.SetConfig(couriersim.Config{Dada: couriersim.Faults{Down: 100}})
		id, _ := cs.paidOrder(t, "courier-down")
		cs.act(t, id, "accept")
		cs.waitStatus(t, id, 2, courier.Placed)
		cs.sim.SetConfig(couriersim.Config{})
	})
	t.Run("failed after placing", func(t *testing.T) {
		cs.sim.SetConfig(couriersim.Config{Dada: couriersim.Faults{FailAfterPlace: 1}})
		id, _ := cs.paidOrder(t, "courier-1000")
		cs.act(t, id, "accept")
		d := cs.waitStatus(t, id, 1, courier.Placed)
		cs.advance(t, d.outNo) // Dada's status 1000
		cs.waitStatus(t, id, 1, courier.Failed)
		if d2 := cs.waitStatus(t, id, 2, courier.Placed); d2.provider != "meituan" {
			t.Fatalf("replaced with %s", d2.provider)
		}
	})
	t.Run("no rider", func(t *testing.T) {
		cs.sim.SetConfig(couriersim.Config{Dada: couriersim.Faults{NoRider: 1}})
		id, _ := cs.paidOrder(t, "courier-nobody")
		cs.act(t, id, "accept")
		d := cs.waitStatus(t, id, 1, courier.Placed)
		cs.advance(t, d.outNo) // nobody comes
		cs.waitStatus(t, id, 1, courier.Cancelled)
		cs.waitStatus(t, id, 2, courier.Placed)
		if o, _ := cs.sim.Order(d.outNo); o.Status != courier.Cancelled || o.CancelFee != 0 {
			t.Errorf("at dada the first is %s with fee %d", o.Status, o.CancelFee)
		}
	})
	t.Run("provider cancels, told twenty times at once", func(t *testing.T) {
		cs.sim.SetConfig(couriersim.Config{})
		id, _ := cs.paidOrder(t, "courier-dropped")
		cs.act(t, id, "accept")
		d := cs.waitStatus(t, id, 1, courier.Placed)
		at := time.Now().Unix() + 5
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				body := fmt.Sprintf(`{"client_id":"c","order_id":%q,"order_status":5,"update_time":%d,"signature":%q}`,
					d.outNo, at, courier.DadaCallbackSign("c", d.outNo, strconv.FormatInt(at, 10)))
				cs.doRaw(t, cs.apis[0], "POST", "/v1/couriers/dada/callback", "", body, "application/json")
			})
		}
		wg.Wait()
		// Dada was not asked to cancel it, so its query still says waiting:
		// nothing changes. Now it is cancelled there for real.
		if ds := cs.deliveries(t, id); len(ds) != 1 || ds[0].status != string(courier.Placed) {
			t.Fatalf("forged cancels moved it: %+v", ds)
		}
		if err := cs.cancelAtSim(t, "dada", d.outNo); err != nil {
			t.Fatal(err)
		}
		wg = sync.WaitGroup{}
		for range 20 {
			wg.Go(func() {
				o, _ := cs.sim.Order(d.outNo)
				ts := strconv.FormatInt(o.UpdatedAt.Unix(), 10)
				body := fmt.Sprintf(`{"client_id":%q,"order_id":%q,"order_status":5,"update_time":%s,"signature":%q}`,
					o.Ref, d.outNo, ts, courier.DadaCallbackSign(o.Ref, d.outNo, ts))
				cs.doRaw(t, cs.apis[0], "POST", "/v1/couriers/dada/callback", "", body, "application/json")
			})
		}
		wg.Wait()
		cs.waitStatus(t, id, 2, courier.Placed)
		if n := cs.count(t, "SELECT count(*) FROM deliveries WHERE order_id = $1", id); n != 2 {
			t.Errorf("%d deliveries, want the cancelled one and one more", n)
		}
	})
	if n := cs.count(t, `SELECT count(*) FROM (SELECT order_id FROM deliveries WHERE status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED')
		GROUP BY order_id HAVING count(*) > 1) x`); n != 0 {
		t.Errorf("%d orders with more than one active delivery", n)
	}
}

// cancelAtSim cancels an order at the simulated provider, as if its
// rider or its staff did.
func (cs *courierShop) cancelAtSim(t *testing.T, provider, outNo string) error {
	t.Helper()
	d := &courier.Dada{Base: cs.simURL + "/dada", AppKey: testDadaKey, AppSecret: cs.secret, HTTP: http.DefaultClient, Now: time.Now}
	if provider != "dada" {
		return fmt.Errorf("only dada")
	}
	_, err := d.Cancel(t.Context(), outNo, "rider unavailable")
	return err
}

// An order refunded after a rider took it: the delivery is cancelled at
// the provider, its cancel fee posted, and nothing placed again.
func TestCourierCancelledWithOrder(t *testing.T) {
	t.Parallel()
	cs := newCourierShop(t, nil, 100)
	id, _ := cs.paidOrder(t, "courier-refund")
	cs.act(t, id, "accept")
	d := cs.waitStatus(t, id, 1, courier.Placed)
	cs.advance(t, d.outNo)
	cs.waitStatus(t, id, 1, courier.Assigned)
	cs.act(t, id, "refund")
	got := cs.waitStatus(t, id, 1, courier.Cancelled)
	if got.cancelFee != 200 {
		t.Errorf("cancel fee %d, want Dada's 2 yuan after a rider took it", got.cancelFee)
	}
	if n := cs.count(t, "SELECT coalesce(sum(amount_fen), 0) FROM ledger_entries WHERE order_id = $1 AND kind = 'courier_cancel_fee' AND account = 'merchant_courier_fees'", id); n != 200 {
		t.Errorf("cancel fee in the ledger %d", n)
	}
	time.Sleep(500 * time.Millisecond) // a sweep or two
	if n := cs.count(t, "SELECT count(*) FROM deliveries WHERE order_id = $1", id); n != 1 {
		t.Errorf("%d deliveries after the refund", n)
	}
}

// An order refunded while its placement's answer is lost: the provider
// took it, so it is cancelled there too, not left for a rider to carry
// (make test's HA soak found two delivered by Dada that we had cancelled
// without asking).
func TestCourierCancelledWhilePlacementUnanswered(t *testing.T) {
	t.Parallel()
	cs := newCourierShop(t, nil, 100)
	cs.sim.SetConfig(couriersim.Config{Dada: couriersim.Faults{HangAfterPlace: 1}})
	id, _ := cs.paidOrder(t, "courier-refund-unsure")
	cs.act(t, id, "accept")
	outNo := "TK" + id + "-1"
	waitUntil(t, "dada holding the order", func() bool { _, ok := cs.sim.Order(outNo); return ok })
	cs.act(t, id, "refund")
	cs.waitStatus(t, id, 1, courier.Cancelled)
	waitUntil(t, "dada's order cancelled", func() bool { o, ok := cs.sim.Order(outNo); return ok && o.Status == courier.Cancelled })
	time.Sleep(500 * time.Millisecond) // a sweep or two
	if n := cs.count(t, "SELECT count(*) FROM deliveries WHERE order_id = $1", id); n != 1 {
		t.Errorf("%d deliveries after the refund", n)
	}
}

// A merchant that dispatches when the food is ready: nothing at the
// accept, one delivery at ready.
func TestCourierDispatchOnReady(t *testing.T) {
	t.Parallel()
	cs := newCourierShop(t, nil, 100)
	cs.dispatchOn(t, courier.DispatchReady)
	id, _ := cs.paidOrder(t, "courier-ready")
	cs.act(t, id, "accept")
	time.Sleep(300 * time.Millisecond)
	if n := cs.count(t, "SELECT count(*) FROM deliveries WHERE order_id = $1", id); n != 0 {
		t.Fatalf("%d deliveries at the accept", n)
	}
	cs.act(t, id, "ready")
	cs.waitStatus(t, id, 1, courier.Placed)
	if r := cs.do(t, cs.apis[0], "PUT", "/admin/v1/merchants/"+cs.merchantID+"/courier", cs.admin, map[string]string{"dispatch": "sometimes"}); r.status != 400 {
		t.Errorf("a bad dispatch setting: %d", r.status)
	}
}

// The board shows the rider on the order's card, and the orders the
// couriers gave up on.
func TestBoardShowsRiders(t *testing.T) {
	t.Parallel()
	cs := newCourierShop(t, map[string]string{"TAKEOUT_COURIER_MAX_ATTEMPTS": "1"}, 100)
	cs.createStaff(t, "riderboard", "correct horse battery")
	id, _ := cs.paidOrder(t, "board-rider")
	cs.act(t, id, "accept")
	d := cs.waitStatus(t, id, 1, courier.Placed)
	b := browser(t)
	boardLogin(t, b, cs.apis[0], "en", "riderboard", "correct horse battery")
	cs.advance(t, d.outNo)
	cs.waitStatus(t, id, 1, courier.Assigned)
	o, _ := cs.sim.Order(d.outNo)
	card := fmt.Sprintf(`.card[data-order-id="%s"] .rider`, id)
	var text string
	runBrowser(t, b, 10*time.Second, "the rider on the card",
		chromedp.WaitVisible(chromedp.CSS(card)),
		into(chromedp.Poll[bool](fmt.Sprintf(`document.querySelector(%q)?.textContent.includes(%q)`, card, o.RiderName)), nil),
		into(chromedp.Text(chromedp.CSS(card)), &text))
	if !strings.Contains(text, o.RiderName) || strings.Contains(text, o.RiderPhone) {
		t.Errorf("the card says %q", text)
	}
	cs.sim.SetConfig(couriersim.Config{Dada: couriersim.Faults{Refuse: 1}})
	failed, _ := cs.paidOrder(t, "board-failed")
	cs.act(t, failed, "accept")
	cs.waitStatus(t, failed, 1, courier.Failed)
	row := fmt.Sprintf(`#deliveries-failed li[data-order-id="%s"]`, failed)
	runBrowser(t, b, 10*time.Second, "the failed delivery on the board", chromedp.WaitVisible(chromedp.CSS(row)))
}

// The customer who subscribed to DELIVERING is messaged once, when the
// courier picks the order up (however often the pickup is reported).
func TestCourierPickupMessagesCustomer(t *testing.T) {
	t.Parallel()
	cs := newCourierShop(t, map[string]string{"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES": "DELIVERING=tpl-on-its-way", "TAKEOUT_JOB_POLL_INTERVAL": "50ms"}, 100)
	id := cs.subscribedOrder(t, "courier-message", []string{"tpl-on-its-way"}, []string{"tpl-on-its-way"})
	cs.act(t, id, "accept")
	d := cs.waitStatus(t, id, 1, courier.Placed)
	cs.sim.SetConfig(couriersim.Config{Dada: couriersim.Faults{RepeatCallbacks: 10}})
	for _, want := range []courier.Status{courier.Assigned, courier.Arrived} {
		cs.advance(t, d.outNo)
		cs.waitStatus(t, id, 1, want)
	}
	if n := messagesFor(cs.wxMessages(t), id, "tpl-on-its-way"); n != 0 {
		t.Fatalf("%d messages before pickup", n)
	}
	cs.advance(t, d.outNo)
	cs.waitStatus(t, id, 1, courier.PickedUp)
	waitUntil(t, "the message at pickup", func() bool { return messagesFor(cs.wxMessages(t), id, "tpl-on-its-way") >= 1 })
	cs.sim.Wait()
	time.Sleep(300 * time.Millisecond) // a second message would have gone by now
	if n := messagesFor(cs.wxMessages(t), id, "tpl-on-its-way"); n != 1 {
		t.Errorf("%d messages at pickup, want 1", n)
	}
}
