// Package couriersim plays the two courier providers takeout dispatches
// to, for development, tests and the soak: a Dada-like API under /dada
// (JSON posts signed md5(secret + sorted parameters + secret); a quote
// whose deliveryNo places the order within three minutes; tips; a cancel
// that deducts a fee once a rider took the order; callbacks signed over
// the order id, the client id and the time only, so that their status
// proves nothing; status 1000 when it cannot place an order after all)
// and a Meituan-like one under /meituan (form posts signed sha1(secret +
// sorted parameters); callbacks signed over every field; statuses that
// skip steps; a rider reassigned repeats "taken" with another courier).
//
// Riders move each placed order one step at a time: on Advance (POST
// /couriersim/advance), or every Options.Step. Faults (POST
// /couriersim/config) make the providers go down, answer slowly, refuse,
// find no rider, fail after placing, and lose, repeat, reorder or hold
// back callbacks. GET /couriersim/orders is the providers' truth.
package couriersim

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/takeout/takeout/internal/courier"
)

// Options configure a Server.
type Options struct {
	DadaAppKey, DadaAppSecret, DadaSourceID string
	MeituanAppKey, MeituanAppSecret         string
	// MeituanCallbackURL is the app's callback address (set in Meituan's
	// console, not per order; /couriersim/config may change it).
	MeituanCallbackURL string
	// Step, when set, moves every order's rider on by one step that
	// often; zero leaves it to Advance.
	Step time.Duration
	// QuoteTTL is how long a Dada quote places an order (three minutes).
	QuoteTTL time.Duration
	Client   *http.Client
	Now      func() time.Time
}

// Faults are one provider's failure knobs. Counts apply to the next
// requests (or orders, or callbacks) and go down as they are used; rates
// apply to each independently, for long runs.
type Faults struct {
	// Down: requests answer HTTP 503 and do nothing.
	Down     int     `json:"down"`
	DownRate float64 `json:"down_rate"`
	// SlowMS delays every request.
	SlowMS int `json:"slow_ms"`
	// HangAfterPlace: a placement is taken, and its answer never comes.
	HangAfterPlace int     `json:"hang_after_place"`
	HangRate       float64 `json:"hang_rate"`
	// Refuse: placements are refused (nothing placed).
	Refuse     int     `json:"refuse"`
	RefuseRate float64 `json:"refuse_rate"`
	// FailAfterPlace: a placement taken fails at the provider (Dada's
	// status 1000) instead of finding a rider.
	FailAfterPlace int     `json:"fail_after_place"`
	FailRate       float64 `json:"fail_rate"`
	// NoRider: a placement no rider ever takes.
	NoRider     int     `json:"no_rider"`
	NoRiderRate float64 `json:"no_rider_rate"`
	// Reassign: the rider of an order drops it before pickup and another
	// takes it.
	Reassign     int     `json:"reassign"`
	ReassignRate float64 `json:"reassign_rate"`
	// SkipRate: a step's callback is not sent (the next one skips it).
	SkipRate float64 `json:"skip_rate"`
	// Callbacks lost, sent twice, or held back and sent after the next.
	LoseCallbacks    int     `json:"lose_callbacks"`
	LoseRate         float64 `json:"lose_rate"`
	RepeatCallbacks  int     `json:"repeat_callbacks"`
	RepeatRate       float64 `json:"repeat_rate"`
	ReorderCallbacks int     `json:"reorder_callbacks"`
	ReorderRate      float64 `json:"reorder_rate"`
}

// Config is the body of POST /couriersim/config.
type Config struct {
	Dada    Faults `json:"dada"`
	Meituan Faults `json:"meituan"`
	// MeituanCallbackURL, when set, replaces the console's.
	MeituanCallbackURL string `json:"meituan_callback_url,omitempty"`
}

// Order is an order as its provider knows it.
type Order struct {
	Provider    string         `json:"provider"`
	OutNo       string         `json:"out_no"`
	Ref         string         `json:"ref"`
	Status      courier.Status `json:"status"`
	Code        int            `json:"code"`
	RiderID     string         `json:"rider_id"`
	RiderName   string         `json:"rider_name"`
	RiderPhone  string         `json:"rider_phone"`
	Riders      []string       `json:"riders"` // every rider that took it, in order
	FeeFen      int64          `json:"fee_fen"`
	TipFen      int64          `json:"tip_fen"`
	CancelFee   int64          `json:"cancel_fee_fen"`
	CancelledBy string         `json:"cancelled_by,omitempty"`
	UpdatedAt   time.Time      `json:"updated_at"`
	Callbacks   int            `json:"callbacks"`
	noRider     bool
	fail        bool
	callbackURL string
	lat, lng    float64
	held        *pending // a callback held back, sent after the next
}

// pending is a callback to send.
type pending struct {
	url         string
	contentType string
	body        string
}

type quote struct {
	outNo   string
	body    dadaBody
	feeFen  int64
	expires time.Time
}

// Server is the simulator's HTTP handler.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu        sync.Mutex
	cfg       Config
	orders    map[string]*Order // by out_no
	quotes    map[string]*quote // Dada's deliveryNo
	quoted    map[string]int    // quotes asked, by out_no
	seq       int
	callbacks sync.WaitGroup
	stop      chan struct{}
	stopOnce  sync.Once
}

// New returns a simulator; Close stops its riders.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if opts.QuoteTTL <= 0 {
		opts.QuoteTTL = 3 * time.Minute
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), orders: map[string]*Order{}, quotes: map[string]*quote{},
		quoted: map[string]int{}, stop: make(chan struct{})}
	s.mux.HandleFunc("POST /dada/api/order/{op...}", s.dada)
	s.mux.HandleFunc("POST /meituan/api/order/{op...}", s.meituan)
	s.mux.HandleFunc("POST /couriersim/config", s.setConfig)
	s.mux.HandleFunc("GET /couriersim/orders", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"orders": s.Orders()})
	})
	s.mux.HandleFunc("POST /couriersim/advance", func(w http.ResponseWriter, r *http.Request) {
		o, err := s.Advance(r.URL.Query().Get("out_no"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		writeJSON(w, o)
	})
	if opts.Step > 0 {
		go s.ride(opts.Step)
	}
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the riders and waits for the callbacks under way.
func (s *Server) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.callbacks.Wait()
}

// Wait waits for the callbacks under way.
func (s *Server) Wait() { s.callbacks.Wait() }

// SetConfig replaces the faults.
func (s *Server) SetConfig(c Config) {
	s.mu.Lock()
	s.cfg = c
	s.mu.Unlock()
}

func (s *Server) setConfig(w http.ResponseWriter, r *http.Request) {
	var c Config
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.SetConfig(c)
	writeJSON(w, c)
}

// Orders returns every order the providers took, by out_no.
func (s *Server) Orders() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Order, 0, len(s.orders))
	for _, o := range s.orders {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b Order) int { return strings.Compare(a.OutNo, b.OutNo) })
	return out
}

// Order returns the provider's order out_no.
func (s *Server) Order(outNo string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[outNo]
	if !ok {
		return Order{}, false
	}
	return *o, true
}

// Quotes returns how many quotes were asked for out_no.
func (s *Server) Quotes(outNo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quoted[outNo]
}

// take reports whether a fault fires: a count left (used up) or the rate.
func take(count *int, rate float64) bool {
	if *count > 0 {
		*count--
		return true
	}
	return rate > 0 && mrand.Float64() < rate //nolint:gosec // G404: fault injection
}

func (s *Server) faults(provider string) *Faults {
	if provider == "dada" {
		return &s.cfg.Dada
	}
	return &s.cfg.Meituan
}

// gate applies the request faults: slow, down. It reports whether the
// request goes on.
func (s *Server) gate(w http.ResponseWriter, provider string) bool {
	s.mu.Lock()
	f := s.faults(provider)
	slow, down := f.SlowMS, take(&f.Down, f.DownRate)
	s.mu.Unlock()
	if slow > 0 {
		time.Sleep(time.Duration(slow) * time.Millisecond)
	}
	if down {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return false
	}
	return true
}

var riderNames = []string{"张伟", "王芳", "李娜", "刘洋", "陈杰", "杨磊", "赵敏", "黄勇", "周静", "吴强"}

// newRider hires the next rider.
func (s *Server) newRider(o *Order) {
	s.seq++
	o.RiderID = strconv.Itoa(70000 + s.seq)
	o.RiderName = riderNames[s.seq%len(riderNames)]
	o.RiderPhone = fmt.Sprintf("138%08d", 10000000+s.seq)
	o.Riders = append(o.Riders, o.RiderID)
}

// steps is the way a placed order goes.
var steps = []courier.Status{courier.Placed, courier.Assigned, courier.Arrived, courier.PickedUp, courier.Delivered}

// Advance moves the rider of out_no on by one step, with its callback
// (and the provider's faults). An order no rider takes, or that ended,
// stays.
func (s *Server) Advance(outNo string) (Order, error) {
	s.mu.Lock()
	o, ok := s.orders[outNo]
	if !ok {
		s.mu.Unlock()
		return Order{}, fmt.Errorf("no order %s", outNo)
	}
	var sends []pending
	switch {
	case o.Status.Terminal() || (o.noRider && o.Status == courier.Placed):
	case o.fail && o.Status == courier.Placed:
		sends = s.move(o, courier.Failed, "")
	default:
		f := s.faults(o.Provider)
		if (o.Status == courier.Assigned || o.Status == courier.Arrived) && take(&f.Reassign, f.ReassignRate) {
			sends = s.reassign(o)
			break
		}
		next := steps[slices.Index(steps, o.Status)+1]
		if next == courier.Assigned {
			s.newRider(o)
		}
		sends = s.move(o, next, "")
	}
	out := *o
	s.mu.Unlock()
	s.send(sends)
	return out, nil
}

// ride moves every order on by a step, every step.
func (s *Server) ride(step time.Duration) {
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		var live []string
		for no, o := range s.orders {
			if !o.Status.Terminal() {
				live = append(live, no)
			}
		}
		s.mu.Unlock()
		for _, no := range live {
			_, _ = s.Advance(no)
		}
	}
}

// move sets o's status and returns its callbacks, after the callback
// faults.
func (s *Server) move(o *Order, to courier.Status, reason string) []pending {
	o.Status = to
	o.Code = code(o.Provider, to)
	o.UpdatedAt = s.opts.Now()
	if to == courier.Arrived || to == courier.PickedUp || to == courier.Delivered {
		// The rider closes in on the customer.
		o.lat, o.lng = o.lat+0.001, o.lng+0.001
	}
	f := s.faults(o.Provider)
	if !to.Terminal() && f.SkipRate > 0 && mrand.Float64() < f.SkipRate { //nolint:gosec // G404: fault injection
		return nil
	}
	cb := s.callback(o, reason)
	if cb.url == "" {
		return nil
	}
	var out []pending
	switch {
	case take(&f.LoseCallbacks, f.LoseRate):
	case take(&f.ReorderCallbacks, f.ReorderRate) && !to.Terminal():
		o.held = &cb // sent after the next one
		return nil
	default:
		out = append(out, cb)
		if take(&f.RepeatCallbacks, f.RepeatRate) {
			out = append(out, cb)
		}
	}
	if o.held != nil {
		out = append(out, *o.held)
		o.held = nil
	}
	o.Callbacks += len(out)
	return out
}

// reassign has another rider take o: Dada puts the order back to
// waiting and then taken by the new rider; Meituan repeats "taken" with
// the new courier.
func (s *Server) reassign(o *Order) []pending {
	var out []pending
	if o.Provider == "dada" {
		out = append(out, s.move(o, courier.Placed, "rider dropped it")...)
	}
	s.newRider(o)
	return append(out, s.move(o, courier.Assigned, "")...)
}

func code(provider string, st courier.Status) int {
	dada := map[courier.Status]int{courier.Placed: courier.DadaWaiting, courier.Assigned: courier.DadaToPickUp, courier.Arrived: courier.DadaArrived,
		courier.PickedUp: courier.DadaDelivering, courier.Delivered: courier.DadaDone, courier.Cancelled: courier.DadaCancelled, courier.Failed: courier.DadaFailed}
	meituan := map[courier.Status]int{courier.Placed: courier.MeituanWaiting, courier.Assigned: courier.MeituanTaken, courier.Arrived: courier.MeituanArrived,
		courier.PickedUp: courier.MeituanPickedUp, courier.Delivered: courier.MeituanDelivered, courier.Cancelled: courier.MeituanCancelled, courier.Failed: courier.MeituanCancelled}
	if provider == "dada" {
		return dada[st]
	}
	return meituan[st]
}

// send posts callbacks, in order, in the background.
func (s *Server) send(cbs []pending) {
	if len(cbs) == 0 {
		return
	}
	s.callbacks.Add(1)
	go func() {
		defer s.callbacks.Done()
		for _, cb := range cbs {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, cb.url, strings.NewReader(cb.body))
			if err != nil {
				continue
			}
			req.Header.Set("Content-Type", cb.contentType)
			if resp, err := s.opts.Client.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}
	}()
}

// callback is o's status callback as its provider sends it.
func (s *Server) callback(o *Order, reason string) pending {
	ts := strconv.FormatInt(o.UpdatedAt.Unix(), 10)
	if o.Provider == "dada" {
		dm, _ := strconv.ParseInt(o.RiderID, 10, 64)
		body, _ := json.Marshal(map[string]any{ //nolint:errchkjson // plain values
			"client_id": o.Ref, "order_id": o.OutNo, "order_status": o.Code, "cancel_reason": reason, "update_time": o.UpdatedAt.Unix(),
			"signature": courier.DadaCallbackSign(o.Ref, o.OutNo, ts), "dm_id": dm, "dm_name": o.RiderName, "dm_mobile": o.RiderPhone,
		})
		return pending{url: o.callbackURL, contentType: "application/json", body: string(body)}
	}
	f := url.Values{
		"delivery_id": {o.OutNo}, "mt_peisong_id": {o.Ref}, "order_id": {o.OutNo}, "status": {strconv.Itoa(o.Code)},
		"courier_id": {o.RiderID}, "courier_name": {o.RiderName}, "courier_phone": {o.RiderPhone}, "cancel_reason": {reason},
		"appkey": {s.opts.MeituanAppKey}, "timestamp": {ts},
	}
	f.Set("sign", courier.MeituanSign(f, s.opts.MeituanAppSecret))
	return pending{url: o.callbackURL, contentType: "application/x-www-form-urlencoded", body: f.Encode()}
}

// place takes an order for provider: refused, failed later, riderless,
// or placed; it returns nil when refused. Callers hold s.mu.
func (s *Server) place(provider, outNo, callbackURL string, feeFen int64, lat, lng float64) *Order {
	f := s.faults(provider)
	if take(&f.Refuse, f.RefuseRate) {
		return nil
	}
	s.seq++
	o := &Order{Provider: provider, OutNo: outNo, Ref: fmt.Sprintf("%s%012d", strings.ToUpper(provider[:2]), s.seq), FeeFen: feeFen,
		callbackURL: callbackURL, lat: lat - 0.01, lng: lng - 0.01, Riders: []string{}}
	o.fail = take(&f.FailAfterPlace, f.FailRate)
	o.noRider = !o.fail && take(&f.NoRider, f.NoRiderRate)
	o.Status, o.Code, o.UpdatedAt = courier.Placed, code(provider, courier.Placed), s.opts.Now()
	s.orders[outNo] = o
	return o
}

// cancel cancels o for its merchant: free before a rider took it, 2 yuan
// after, the whole fee once picked up. ok is false when o ended.
func (s *Server) cancel(o *Order, reason string) (fee int64, ok bool, cbs []pending) {
	switch o.Status {
	case courier.Delivered, courier.Cancelled, courier.Failed:
		return 0, false, nil
	case courier.Assigned, courier.Arrived:
		fee = 200
	case courier.PickedUp:
		fee = o.FeeFen + o.TipFen
	}
	o.CancelFee, o.CancelledBy = fee, "merchant"
	return fee, true, s.move(o, courier.Cancelled, reason)
}

// feeOf prices a delivery: 5 yuan and 1 more per kilometre.
func feeOf(lat, lng float64) int64 {
	if lat == 0 && lng == 0 {
		return 600
	}
	return 500 + int64(courierDistance(lat, lng)/1000)*100
}

// courierDistance is a fixed pretend distance from the shop, by address.
func courierDistance(lat, lng float64) float64 {
	return float64(int64((lat+lng)*1e4)%5000) + 1000
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
