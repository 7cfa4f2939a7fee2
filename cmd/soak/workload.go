package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/takeout/takeout/internal/lab"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/wxsim"
)

// dish is a seeded dish.
type dish struct {
	ID       string        `json:"id"`
	PriceFen int64         `json:"price_fen"`
	Stock    int32         `json:"stock"`
	Version  int64         `json:"version"`
	Options  []optionGroup `json:"options"`
}

// optionGroup is a dish's option group as the API shows it.
type optionGroup struct {
	MinChoices int `json:"min_choices"`
	MaxChoices int `json:"max_choices"`
	Choices    []struct {
		ID string `json:"id"`
	} `json:"choices"`
}

// pickOptions chooses a valid set of the dish's choices at random.
func (d dish) pickOptions() []string {
	out := []string{}
	for _, g := range d.Options {
		n := g.MinChoices + rand.IntN(g.MaxChoices-g.MinChoices+1)
		for _, i := range rand.Perm(len(g.Choices))[:n] {
			out = append(out, g.Choices[i].ID)
		}
	}
	return out
}

// merchant is a seeded merchant with its dishes and staff token.
type merchant struct {
	ID     string
	Dishes []dish
	Staff  string
	// ByDistance: the merchant prices delivery by distance from Lat, Lng.
	ByDistance bool
	Lat, Lng   float64
	// Pickup: the merchant offers pickup and time slots too.
	Pickup bool
	// Courier: the merchant hands its delivery orders to couriers.
	Courier bool
}

// driver plays the users, the merchants' staff and the payment platform's
// customers.
type driver struct {
	o         options
	insts     []*instance
	wxsimURL  string
	log       *clientLog
	client    *http.Client
	merchants []merchant
	hot       dish // on merchants[0]
	wallets   *wallets

	purchases  atomic.Int64
	simPays    atomic.Int64
	callbacks  atomic.Int64
	background sync.WaitGroup // wxsim payments and deadline taps in flight
	lateTaps   atomic.Int64   // paid orders accepted as their accept deadline fell

	sessions          sessions     // each order's customer, for after-sales requests
	askedAfter        sync.Map     // orders asked about after-sales
	afterSaleRequests atomic.Int64 // requests made
}

// result is one answer.
type result struct {
	status int
	body   []byte
	header http.Header
	err    error
}

func (r result) ok() bool { return r.err == nil && r.status >= 200 && r.status < 300 }

// retryable: the request may not have been processed, or was refused for
// now (in flight elsewhere, or the service is degraded).
func (r result) retryable() bool {
	return r.err != nil || r.status >= 500 || r.status == http.StatusTooManyRequests ||
		(r.status == http.StatusConflict && r.header.Get("Retry-After") != "")
}

func (r result) problemType() string {
	var p struct {
		Type string `json:"type"`
	}
	if r.err == nil && r.status >= 400 {
		_ = json.Unmarshal(r.body, &p)
	}
	return p.Type
}

// call sends one request to instance inst and logs it.
func (d *driver) call(ctx context.Context, e entry, token string, body any, header map[string]string) result {
	start := time.Now()
	resp, err := lab.Call(ctx, d.client, e.Method, d.insts[e.Inst].baseURL()+e.Path, token, body, header)
	res := result{status: resp.Status, header: resp.Header, body: resp.Body}
	res.err = err
	e.T, e.Ms, e.Status = start, float64(time.Since(start).Microseconds())/1000, res.status
	if err != nil {
		e.Err = err.Error()
	}
	e.Replayed = res.header.Get("Idempotent-Replayed") == "true"
	e.Problem = res.problemType()
	if e.Order == "" && res.ok() && (e.Op == "submit" || e.Op == "confirm") {
		var v struct {
			ID      string `json:"id"`
			OrderID string `json:"order_id"`
		}
		_ = json.Unmarshal(res.body, &v)
		e.Order = v.ID + v.OrderID
	}
	ans := res.body
	if len(ans) > 200 {
		ans = ans[:200]
	}
	e.Answer = string(ans)
	d.log.add(e)
	return res
}

func (d *driver) randInst() int { return rand.IntN(len(d.insts)) }

// backoff sleeps before retry attempt n (0-based), honouring Retry-After.
func backoff(ctx context.Context, n int, r result) {
	wait := time.Duration(100<<min(n, 5)) * time.Millisecond
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err == nil && s > 0 {
		wait = min(time.Duration(s)*time.Second, 2*time.Second)
	}
	select {
	case <-ctx.Done():
	case <-time.After(wait):
	}
}

// retry sends a request until it gets a final answer (or gives up after
// 8 tries): what a careful client does.
func (d *driver) retry(ctx context.Context, e entry, token string, body any, header map[string]string) result {
	var r result
	for n := 0; n < 8 && ctx.Err() == nil; n++ {
		e.Inst = d.randInst()
		if r = d.call(ctx, e, token, body, header); !r.retryable() {
			return r
		}
		backoff(ctx, n, r)
	}
	return r
}

// user is one simulated user placing orders one after another until stop
// is closed; requests use ctx.
func (d *driver) user(ctx context.Context, stop <-chan struct{}, n int) {
	token := d.login(ctx, n)
	for token != "" && ctx.Err() == nil {
		select {
		case <-stop:
			return
		default:
		}
		d.purchase(ctx, n, &token)
	}
}

func (d *driver) login(ctx context.Context, n int) string {
	return d.loginAs(ctx, n, fmt.Sprintf("soak-%d", n))
}

// loginCode logs in a customer who is not one of the ordering users.
func (d *driver) loginCode(ctx context.Context, code string) string { return d.loginAs(ctx, -1, code) }

func (d *driver) loginAs(ctx context.Context, n int, code string) string {
	for ctx.Err() == nil {
		r := d.retry(ctx, entry{Op: "login", User: n, Method: "POST", Path: "/v1/auth/wx-login"}, "",
			map[string]string{"code": code}, nil)
		if r.ok() {
			var v struct {
				Token string `json:"token"`
			}
			_ = json.Unmarshal(r.body, &v)
			return v.Token
		}
		time.Sleep(time.Second)
	}
	return ""
}

type confirmItem struct {
	DishID  string   `json:"dish_id"`
	Options []string `json:"options"`
	Qty     int32    `json:"qty"`
}

type confirmRequest struct {
	MerchantID string         `json:"merchant_id"`
	Items      []confirmItem  `json:"items"`
	Address    map[string]any `json:"address"`
	Remark     string         `json:"remark"`
	VoucherID  string         `json:"voucher_id,omitempty"`
	Fulfilment string         `json:"fulfilment,omitempty"`
	SlotStart  string         `json:"slot_start,omitempty"`
}

type confirmed struct {
	Token  string `json:"confirm_token"`
	Order  string `json:"order_id"`
	Digest string `json:"digest"`
}

// purchase is one order from the user's point of view: a confirm, a storm
// of submits, and then paying, cancelling or walking away.
func (d *driver) purchase(ctx context.Context, user int, token *string) {
	pid := d.purchases.Add(1)
	m := d.merchants[rand.IntN(len(d.merchants))]
	var items []confirmItem
	if rand.IntN(2) == 0 {
		// The hot dish: everyone wants it.
		m = d.merchants[0]
		items = append(items, confirmItem{DishID: d.hot.ID, Qty: 1, Options: d.hot.pickOptions()})
	}
	for _, i := range rand.Perm(len(m.Dishes))[:1+rand.IntN(2)] {
		if m.Dishes[i].ID != d.hot.ID {
			items = append(items, confirmItem{DishID: m.Dishes[i].ID, Qty: int32(1 + rand.IntN(2)), Options: m.Dishes[i].pickOptions()}) //nolint:gosec // G115: 1 or 2
		}
	}
	// The remark makes each purchase's content unique, so only retries of
	// this purchase may merge into its order.
	addr := map[string]any{"name": fmt.Sprintf("User %d", user), "phone": "13800138000", "detail": "1 Soak Road"}
	if m.ByDistance {
		// Up to about 6.6 km north: some beyond its last band (5 km).
		addr["location"] = map[string]float64{"lat": m.Lat + rand.Float64()*0.06, "lng": m.Lng}
	}
	req := confirmRequest{MerchantID: m.ID, Items: items, Remark: fmt.Sprintf("soak purchase %d", pid), Address: addr}
	if d.wallets != nil && rand.IntN(100) < 30 {
		req.VoucherID = d.voucherToSpend(ctx, user, *token)
	}
	d.chooseFulfilment(ctx, m, *token, &req)
	c, ok := d.confirm(ctx, user, pid, token, req)
	if !ok {
		return
	}
	var twin sync.WaitGroup
	if req.VoucherID != "" && rand.IntN(100) < 15 {
		// The same voucher on another cart at the same moment (a second
		// phone): at most one of the two orders may take it.
		tid := d.purchases.Add(1)
		treq := req
		treq.Remark = fmt.Sprintf("soak purchase %d", tid)
		if tc, ok := d.confirm(ctx, user, tid, token, treq); ok {
			session := *token
			twin.Go(func() {
				if id := d.submitStorm(ctx, user, tid, session, tc, treq); id != "" {
					d.afterPlacement(ctx, user, tid, session, id)
				}
			})
		}
	}
	defer twin.Wait()
	orderID := d.submitStorm(ctx, user, pid, *token, c, req)
	if orderID == "" {
		return
	}
	if req.VoucherID != "" {
		d.wallets.spent.Add(1)
	}
	d.afterPlacement(ctx, user, pid, *token, orderID)
}

func (d *driver) confirm(ctx context.Context, user int, pid int64, token *string, req confirmRequest) (confirmed, bool) {
	e := entry{Op: "confirm", User: user, Purchase: pid, Method: "POST", Path: "/v1/orders/confirm"}
	r := d.retry(ctx, e, *token, req, nil)
	if r.status == http.StatusUnauthorized {
		*token = d.login(ctx, user)
		return confirmed{}, false
	}
	if !r.ok() {
		return confirmed{}, false
	}
	var c confirmed
	if err := json.Unmarshal(r.body, &c); err != nil {
		return confirmed{}, false
	}
	return c, true
}

// submitOnce sends a submit with the user's session.
func (d *driver) submitOnce(ctx context.Context, user int, pid int64, session, key string, c confirmed) result {
	e := entry{Op: "submit", User: user, Purchase: pid, Method: "POST", Path: "/v1/orders", Key: key, Digest: c.Digest, Inst: d.randInst()}
	return d.call(ctx, e, session, map[string]string{"confirm_token": c.Token}, map[string]string{"Idempotency-Key": key})
}

// submitUntilFinal retries one key until a final answer, like a client
// that keeps its Idempotency-Key across retries.
func (d *driver) submitUntilFinal(ctx context.Context, user int, pid int64, session, key string, c confirmed) result {
	var r result
	for n := 0; n < 8 && ctx.Err() == nil; n++ {
		if r = d.submitOnce(ctx, user, pid, session, key, c); !r.retryable() {
			return r
		}
		backoff(ctx, n, r)
	}
	return r
}

func orderOf(r result) string {
	if !r.ok() {
		return ""
	}
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(r.body, &v)
	return v.ID
}

func newKey() string { return "soak-" + randomSecret()[:20] }

// submitStorm places the purchase the way a flaky network and an
// impatient user do: dup copies at once, more after a pause, sometimes a
// new key with the same token, sometimes the whole confirm and submit
// again. It returns the order id the answers named.
func (d *driver) submitStorm(ctx context.Context, user int, pid int64, session string, c confirmed, req confirmRequest) string {
	key := newKey()
	var mu sync.Mutex
	orderID := ""
	note := func(r result) {
		if id := orderOf(r); id != "" {
			mu.Lock()
			orderID = id
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for range d.o.dup {
		wg.Go(func() { note(d.submitUntilFinal(ctx, user, pid, session, key, c)) })
	}
	wg.Wait()
	sleep(ctx, time.Duration(rand.IntN(500))*time.Millisecond)
	for range 1 + rand.IntN(2) {
		note(d.submitUntilFinal(ctx, user, pid, session, key, c))
	}
	if rand.IntN(10) < 3 {
		// The app lost the answer and retried from scratch with a new key.
		note(d.submitUntilFinal(ctx, user, pid, session, newKey(), c))
	}
	if rand.IntN(10) < 2 {
		// The user tapped "place order" again: a new confirm of the same cart.
		s := session
		if c2, ok := d.confirm(ctx, user, pid, &s, req); ok {
			k2 := newKey()
			var wg2 sync.WaitGroup
			for range max(2, d.o.dup/2) {
				wg2.Go(func() { note(d.submitUntilFinal(ctx, user, pid, session, k2, c2)) })
			}
			wg2.Wait()
		}
	}
	return orderID
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// afterPlacement: walk away (the pay deadline cancels it), cancel, or pay
// through wxsim with duplicated, delayed, reordered or dropped callbacks,
// sometimes racing a cancel, sometimes cancelling once paid.
func (d *driver) afterPlacement(ctx context.Context, user int, pid int64, session, orderID string) {
	d.sessions.put(orderID, session)
	cancel := func() {
		var wg sync.WaitGroup
		for range 1 + rand.IntN(2) {
			wg.Go(func() {
				d.retry(ctx, entry{Op: "cancel", User: user, Purchase: pid, Method: "POST", Path: "/v1/orders/" + orderID + "/cancel", Order: orderID},
					session, nil, nil)
			})
		}
		wg.Wait()
	}
	switch p := rand.IntN(100); {
	case p < 12:
		return // unpaid: the pay deadline must cancel it
	case p < 22:
		cancel()
		return
	}
	r := d.retry(ctx, entry{Op: "pay", User: user, Purchase: pid, Method: "POST", Path: "/v1/orders/" + orderID + "/pay", Order: orderID}, session, nil, nil)
	if !r.ok() {
		return
	}
	id, err := strconv.ParseInt(orderID, 10, 64)
	if err != nil {
		return
	}
	pay := wxsim.PayRequest{
		OutTradeNo: payment.OutTradeNo(id, 1), Copies: 1 + rand.IntN(4), Concurrent: rand.IntN(2) == 0,
		DelayMS: rand.IntN(300), ReorderMS: rand.IntN(200), Drop: rand.IntN(100) < 5, Retries: 12, RetryMS: 200,
	}
	race := rand.IntN(100) < 6
	cancelLater := rand.IntN(100) < 8
	d.background.Go(func() {
		if race {
			go cancel()
		}
		d.simPay(ctx, pay)
		if cancelLater {
			cancel()
		}
	})
}

// simPay tells wxsim the user paid; wxsim then calls back.
func (d *driver) simPay(ctx context.Context, req wxsim.PayRequest) {
	b, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, d.wxsimURL+"/sim/pay", bytes.NewReader(b))
	if err != nil {
		return
	}
	hreq.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := d.client.Do(hreq)
	e := entry{T: start, Op: "sim_pay", Method: "POST", Path: "/sim/pay", Inst: -1, Order: req.OutTradeNo}
	if err != nil {
		e.Err = err.Error()
		d.log.add(e)
		return
	}
	defer resp.Body.Close()
	var res wxsim.PayResult
	_ = json.NewDecoder(resp.Body).Decode(&res)
	e.Status, e.Ms = resp.StatusCode, float64(time.Since(start).Microseconds())/1000
	e.Answer = fmt.Sprintf("deliveries=%d answers=%v drop=%v", res.Deliveries, res.Answers, req.Drop)
	d.log.add(e)
	d.simPays.Add(1)
	d.callbacks.Add(int64(res.Deliveries))
}

// staffStep is what the staff do with an order found in status: pick
// gives its fate from a hash of the order and status (0-99), "" to leave
// it.
type staffStep struct {
	status string
	pick   func(h uint32) string
}

// staffSteps are the staff's fates by status.
func staffSteps() []staffStep {
	return []staffStep{
		{"PAID", func(h uint32) string {
			switch {
			case h < 80:
				return "accept"
			case h < 88:
				return "reject"
			case h < 94:
				return atDeadline
			}
			return ""
		}},
		{"ACCEPTED", func(h uint32) string {
			switch {
			case h < 50:
				return "ready"
			case h < 92:
				return "dispatch" // READY is optional
			case h < 96:
				return "refund"
			}
			return ""
		}},
		{"READY", func(h uint32) string {
			switch {
			case h < 95:
				return "dispatch"
			case h < 98:
				return "refund"
			}
			return ""
		}},
		{"DELIVERING", func(h uint32) string {
			if h < 60 {
				return "complete"
			}
			return "" // auto-complete
		}},
	}
}

// staff plays one merchant's staff until stop: accept, reject, ready,
// dispatch, complete or refund what is waiting, sometimes twice at once. Each order
// gets one fixed fate per status, so some are left for the system's
// deadlines (the accept deadline, auto-complete), and some paid ones are
// accepted just as their accept deadline falls, racing the system's
// sweep (acceptAtDeadline).
func (d *driver) staff(ctx context.Context, stop <-chan struct{}, m merchant) {
	steps := staffSteps()
	racing := map[string]bool{} // orders whose accept waits for their deadline
	for {
		select {
		case <-stop:
			return
		case <-time.After(300 * time.Millisecond):
		}
		d.partialRefunds(ctx, m)
		d.afterSales(ctx, m)
		d.takeOverFailedDeliveries(ctx, m)
		for _, s := range steps {
			r := d.call(ctx, entry{Op: "staff_search", Method: "GET", Path: "/admin/v1/orders?limit=100&merchant_id=" + m.ID + "&status=" + s.status, Inst: d.randInst()},
				m.Staff, nil, nil)
			if !r.ok() {
				continue
			}
			var page struct {
				Orders []struct {
					ID             string `json:"id"`
					Fulfilment     string `json:"fulfilment"`
					AcceptDeadline *struct {
						AcceptBy time.Time `json:"accept_by"`
					} `json:"accept_deadline"`
				} `json:"orders"`
			}
			_ = json.Unmarshal(r.body, &page)
			for _, o := range page.Orders {
				h := fnv.New32a()
				_, _ = h.Write([]byte(o.ID + s.status))
				action := staffAction(s.pick(h.Sum32()%100), s.status, o.Fulfilment)
				if m.Courier && o.Fulfilment != "pickup" {
					action = courierStaffAction(action, s.status, h.Sum32()%100)
				}
				if action == atDeadline {
					if o.AcceptDeadline != nil && !racing[o.ID] {
						racing[o.ID] = true
						d.background.Go(func() { d.acceptAtDeadline(ctx, stop, m, o.ID, o.AcceptDeadline.AcceptBy) })
					}
					continue
				}
				if action == "" {
					continue
				}
				var wg sync.WaitGroup
				for range 1 + rand.IntN(2) {
					wg.Go(func() {
						d.retry(ctx, entry{Op: "staff_" + action, Method: "POST", Path: "/admin/v1/orders/" + o.ID + "/" + action, Order: o.ID}, m.Staff, nil, nil)
					})
				}
				wg.Wait()
			}
		}
	}
}

// atDeadline is the staff's fate for a paid order accepted as its accept
// deadline falls.
const atDeadline = "accept at the deadline"

// acceptAtDeadline taps accept twice at once as the order's accept
// deadline falls (within ±300 ms of it), while the system's sweep may be
// applying the merchant's rule: one of them wins, the other finds the
// order moved on (200 as a replay, or 409). The checker holds the
// outcome to one history row.
func (d *driver) acceptAtDeadline(ctx context.Context, stop <-chan struct{}, m merchant, id string, by time.Time) {
	wait := time.Until(by) + time.Duration(rand.IntN(600)-300)*time.Millisecond
	select {
	case <-stop:
		return
	case <-time.After(max(0, wait)):
	}
	d.lateTaps.Add(1)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			d.retry(ctx, entry{Op: "staff_accept_at_deadline", Method: "POST", Path: "/admin/v1/orders/" + id + "/accept", Order: id}, m.Staff, nil, nil)
		})
	}
	wg.Wait()
}

// partialRefunds gives back part of some paid orders of a merchant: a
// unit of a line (its stock back on sale before dispatch) or an amount,
// one request per order and status, its key fixed by them so that later
// passes repeat it (and replay), sometimes twice at once. Requests beyond
// what is left are refused (409), as they should be.
func (d *driver) partialRefunds(ctx context.Context, m merchant) {
	for _, status := range []string{"PAID", "DELIVERING", "COMPLETED"} {
		r := d.call(ctx, entry{Op: "staff_search", Method: "GET", Path: "/admin/v1/orders?limit=50&merchant_id=" + m.ID + "&status=" + status, Inst: d.randInst()},
			m.Staff, nil, nil)
		if !r.ok() {
			continue
		}
		var page struct {
			Orders []struct {
				ID    string `json:"id"`
				Items []struct {
					Line int `json:"line"`
				} `json:"items"`
			} `json:"orders"`
		}
		_ = json.Unmarshal(r.body, &page)
		for _, o := range page.Orders {
			h := fnv.New32a()
			_, _ = h.Write([]byte(o.ID + "partial" + status))
			pick := h.Sum32() % 100
			if pick >= 12 || len(o.Items) == 0 {
				continue
			}
			body := map[string]any{"reason": "soak: part of the order", "amount_fen": 100 + 20*pick}
			if pick%2 == 0 {
				body = map[string]any{"reason": "soak: a line short", "lines": []map[string]int{{"line": o.Items[0].Line, "qty": 1}},
					"restock": status == "PAID"}
			}
			key := "partial-" + o.ID + "-" + status
			var wg sync.WaitGroup
			for range 1 + rand.IntN(2) {
				wg.Go(func() {
					d.retry(ctx, entry{Op: "staff_refund_part", Method: "POST", Path: "/admin/v1/orders/" + o.ID + "/refunds", Order: o.ID, Key: key},
						m.Staff, body, map[string]string{"Idempotency-Key": key})
				})
			}
			wg.Wait()
		}
	}
}
