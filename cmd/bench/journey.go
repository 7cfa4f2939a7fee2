package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/takeout/takeout/internal/auth"
)

// The journey: the whole life of an order as its parties drive it. A
// customer reads the menu, confirms a cart with a voucher, submits and
// pays; WeChat Pay calls back; the kitchen accepts (its printer prints the
// ticket, a courier is placed with Dada); the rider takes the order,
// arrives, picks it up and delivers it, each step a callback of the
// provider's; the order completes. The kitchen's boards are connected
// throughout, and each asynchronous step is waited for on a board, as a
// kitchen sees it.
const (
	journeyClients  = 32
	journeyBoards   = 2 // the kitchen's screens, a stream each
	journeyDishes   = 16
	journeyStepWait = 30 * time.Second
	// journeyRounds stretches the journey's window over that many of the
	// other scenarios' windows: a journey lasts a few hundred ms.
	journeyRounds = 3
)

// The steps of a journey, in its order: what the client waits for in
// each. dispatch is from the accept's answer until the board shows the
// delivery placed; courier_callback from a rider's step at the provider
// until the board shows it (four a journey); complete from the rider's
// delivery until the board shows the order completed; print (read from
// the database after the run) from the accept's commit until the printer's
// callback said the ticket came out.
var journeySteps = []string{"menu", "confirm", "submit", "pay", "callback", "accept", "dispatch", "courier_callback", "complete", "print"}

// journeyWrite is one write a journey commits, priced at the floor
// transaction nearest to it: the placement at the floor's placement, every
// other state change (a compare-and-set with a row beside it, announced
// to the boards) at the floor's payment, which is exactly that.
type journeyWrite struct {
	What  string `json:"what"`
	Floor string `json:"floor"`
}

// journeyWrites are the writes a journey cannot do without: the least a
// database must commit for one, however the service is built.
var journeyWrites = []journeyWrite{
	{"order placed", "floor_place"}, {"prepay recorded", "floor_pay"}, {"payment", "floor_pay"}, {"accepted", "floor_pay"},
	{"ticket sent", "floor_pay"}, {"ticket printed", "floor_pay"}, {"delivery placed", "floor_pay"}, {"rider assigned", "floor_pay"},
	{"rider arrived", "floor_pay"}, {"picked up (order delivering)", "floor_pay"}, {"delivered (order completed)", "floor_pay"},
}

// journeyReport is what the journey scenario measured.
type journeyReport struct {
	Clients    int     `json:"clients"`
	Journeys   int     `json:"journeys"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	DurationS  float64 `json:"duration_s"`
	PerS       float64 `json:"journeys_per_s"`
	// P50Ms and P99Ms are of whole journeys.
	P50Ms float64    `json:"p50_ms"`
	P99Ms float64    `json:"p99_ms"`
	Steps []stepStat `json:"steps"`
	// CPUUsPerJourney is the CPU each process used in the measured part
	// over the journeys completed in it: api, postgres, redis, providers
	// (wxsim: WeChat Pay, the printer, the couriers) and load (the bench).
	CPUUsPerJourney map[string]float64 `json:"cpu_us_per_journey"`
	// Writes are the writes a journey cannot do without, each priced at
	// its floor's PostgreSQL CPU per transaction (at the floor's best
	// concurrency in this run); FloorCPUUs is their sum.
	Writes     []journeyWrite `json:"writes"`
	FloorCPUUs float64        `json:"floor_cpu_us"`
	// BoardEvents is how many events each of the kitchen's boards read.
	BoardEvents []int64 `json:"board_events"`
	// Prints are the tickets of the journeys measured; PrintsMissing
	// counts the journeys completed in the measured part whose ticket
	// was not printed a few seconds after it.
	Prints        int `json:"prints"`
	PrintsMissing int `json:"prints_missing"`
}

// stepStat is one step's latency over the measured journeys.
type stepStat struct {
	Step  string  `json:"step"`
	Count int     `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// journeyShop is the journey's merchant: dishes, a kitchen printer,
// deliveries placed with a courier on accept, and its staff's token.
type journeyShop struct {
	merchant int64
	dishes   []int64
	kitchen  string
	vouchers []int64
}

// journey runs the journey scenario.
func (r *runner) journey(ctx context.Context) (*journeyReport, error) {
	e := r.e
	warmup, d := r.o.warmup*journeyRounds, r.o.duration*journeyRounds
	// Each journey spends a voucher: as many as 200 journeys a second
	// need (this machine runs 50-60), so that none runs out.
	shop, err := e.journeyShop(ctx, int(200*(warmup+d).Seconds())+journeyClients)
	if err != nil {
		return nil, fmt.Errorf("journey: %w", err)
	}
	board := newJourneyBoard(journeyBoards)
	stop, err := board.open(ctx, e.api, shop.merchant, shop.kitchen)
	if err != nil {
		return nil, fmt.Errorf("journey: %w", err)
	}
	defer stop()
	j := &journeyRun{e: e, shop: shop, board: board, steps: map[string][]time.Duration{}}
	if err := r.settle(ctx)(); err != nil {
		return nil, err
	}
	var seq atomic.Int64
	closedLoop(ctx, journeyClients, warmup, j.run, &seq, false)
	meter := processCPU("/proc", map[string]int{"api": e.apiPID, "providers": e.wxsimPID})
	from := time.Now()
	before := meter()
	j.measuring.Store(true)
	profiled := r.cpuProfile(ctx, "journey", journeyClients, int(d.Seconds()))
	w := closedLoop(ctx, journeyClients, d, j.run, &seq, true)
	j.measuring.Store(false)
	cpu := meter().sub(before)
	profiled()
	rep := &journeyReport{Clients: journeyClients, Errors: w.errors, FirstError: w.firstErr, Writes: journeyWrites}
	var whole result
	whole.summarize(w.lat, w.elapsed)
	rep.Journeys, rep.DurationS, rep.PerS, rep.P50Ms, rep.P99Ms = whole.Requests, round3(whole.DurationS), round3(whole.Throughput), whole.P50Ms, whole.P99Ms
	rep.CPUUsPerJourney = cpu.perRequest(rep.Journeys)
	prints, err := e.journeyPrints(ctx, shop.merchant, from)
	if err != nil {
		return nil, err
	}
	rep.Prints, rep.PrintsMissing = len(prints), j.missingPrints(prints)
	j.steps["print"] = printLatencies(prints)
	for _, s := range journeySteps {
		var x result
		x.summarize(j.steps[s], time.Second)
		rep.Steps = append(rep.Steps, stepStat{Step: s, Count: x.Requests, P50Ms: x.P50Ms, P99Ms: x.P99Ms, MaxMs: x.MaxMs})
	}
	for i := range board.events {
		rep.BoardEvents = append(rep.BoardEvents, board.events[i].Load())
	}
	r.logf("journey: %d journeys at %d clients, %.1f/s, p50 %.0f ms, p99 %.0f ms, errors %d %s; CPU per journey %v; %d tickets, %d not printed",
		rep.Journeys, rep.Clients, rep.PerS, rep.P50Ms, rep.P99Ms, rep.Errors, rep.FirstError, rep.CPUUsPerJourney, rep.Prints, rep.PrintsMissing)
	return rep, nil
}

// journeyShop creates the journey's merchant and issues n vouchers.
func (e *env) journeyShop(ctx context.Context, n int) (*journeyShop, error) {
	s := &journeyShop{}
	var err error
	if s.merchant, err = e.create(ctx, "/admin/v1/merchants", map[string]any{"name": "Journey Kitchen", "delivery_fee_fen": 500,
		"accept_within_seconds": 7200, "accept_timeout_action": "reject"}); err != nil {
		return nil, err
	}
	m := strconv.FormatInt(s.merchant, 10)
	for i := range journeyDishes {
		id, err := e.create(ctx, "/admin/v1/merchants/"+m+"/dishes", map[string]any{"name": fmt.Sprintf("Journey Dish %02d", i), "price_fen": 1500, "stock": 1_000_000})
		if err != nil {
			return nil, err
		}
		s.dishes = append(s.dishes, id)
	}
	if _, err := e.create(ctx, "/admin/v1/merchants/"+m+"/printers", map[string]any{"name": "Kitchen", "provider": "yilianyun", "device": "BENCHJ1", "role": "kitchen"}); err != nil {
		return nil, err
	}
	if st, b, err := e.do(ctx, "PUT", "/admin/v1/merchants/"+m+"/courier", e.admin, map[string]string{"dispatch": "accept"}, nil); err != nil || st != http.StatusOK {
		return nil, fmt.Errorf("courier dispatch: %d %s: %w", st, b, err)
	}
	if s.kitchen, _, err = e.tokens.IssueStaff("journey-kitchen", auth.Role{MerchantID: s.merchant}, time.Hour); err != nil {
		return nil, err
	}
	if s.vouchers, err = e.issueVouchers(ctx, n); err != nil {
		return nil, err
	}
	return s, nil
}

// create posts body as the admin and returns the id of what was created.
func (e *env) create(ctx context.Context, path string, body any) (int64, error) {
	st, b, err := e.do(ctx, "POST", path, e.admin, body, nil)
	if err != nil || st != http.StatusCreated {
		return 0, fmt.Errorf("POST %s: %d %s: %w", path, st, b, err)
	}
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, err
	}
	return strconv.ParseInt(v.ID, 10, 64)
}

// journeyRun is the state the journeys share.
type journeyRun struct {
	e         *env
	shop      *journeyShop
	board     *journeyBoard
	measuring atomic.Bool
	mu        sync.Mutex
	steps     map[string][]time.Duration
	orders    sync.Map // the measured journeys' order ids
}

// timed runs one step and records how long it took when measuring.
func (j *journeyRun) timed(step string, fn func() error) error {
	t := time.Now()
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", step, err)
	}
	if j.measuring.Load() {
		el := time.Since(t)
		j.mu.Lock()
		j.steps[step] = append(j.steps[step], el)
		j.mu.Unlock()
	}
	return nil
}

// call sends one request with token and wants status; out, when not nil,
// gets the answer.
func (j *journeyRun) call(ctx context.Context, method, path, token string, body any, header map[string]string, want int, out any) error {
	st, b, err := j.e.do(ctx, method, path, token, body, header)
	if err != nil {
		return err
	}
	if st != want {
		return fmt.Errorf("%s %s: %d %.200s", method, path, st, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// run is one journey (an op of the closed loop).
func (j *journeyRun) run(ctx context.Context, _ int, n int64) error {
	e, shop := j.e, j.shop
	if n >= int64(len(shop.vouchers)) {
		return errExhausted
	}
	user := e.users[n%int64(len(e.users))]
	m := strconv.FormatInt(shop.merchant, 10)
	if err := j.timed("menu", func() error { return j.call(ctx, "GET", "/v1/merchants/"+m+"/menu", "", nil, nil, http.StatusOK, nil) }); err != nil {
		return err
	}
	cart := map[string]any{
		"merchant_id": m, "items": []map[string]any{{"dish_id": strconv.FormatInt(shop.dishes[n%int64(len(shop.dishes))], 10), "qty": 2}},
		"address": map[string]string{"name": "Journey", "phone": "13800138000", "detail": "1 Bench Road"},
		"remark":  fmt.Sprintf("journey %d", n), "voucher_id": strconv.FormatInt(shop.vouchers[n], 10),
	}
	var confirmed struct {
		Token string `json:"confirm_token"`
	}
	if err := j.timed("confirm", func() error {
		return j.call(ctx, "POST", "/v1/orders/confirm", user, cart, nil, http.StatusOK, &confirmed)
	}); err != nil {
		return err
	}
	var placed struct {
		ID    string `json:"id"`
		Total int64  `json:"total_fen"`
	}
	if err := j.timed("submit", func() error {
		return j.call(ctx, "POST", "/v1/orders", user, map[string]string{"confirm_token": confirmed.Token},
			map[string]string{"Idempotency-Key": fmt.Sprintf("journey-%d", n)}, http.StatusCreated, &placed)
	}); err != nil {
		return err
	}
	id, err := strconv.ParseInt(placed.ID, 10, 64)
	if err != nil {
		return fmt.Errorf("submit: order id %q", placed.ID)
	}
	if err := j.timed("pay", func() error {
		return j.call(ctx, "POST", "/v1/orders/"+placed.ID+"/pay", user, nil, nil, http.StatusOK, nil)
	}); err != nil {
		return err
	}
	if err := j.timed("callback", func() error {
		nt, err := e.signPayment(id, placed.Total)
		if err != nil {
			return err
		}
		return e.callback(ctx, nt)
	}); err != nil {
		return err
	}
	if err := j.kitchenAndCourier(ctx, placed.ID); err != nil {
		return err
	}
	if j.measuring.Load() {
		j.orders.Store(id, true)
	}
	return nil
}

// kitchenAndCourier is the rest of a paid order's journey: accepted,
// placed with a courier, ridden step by step, completed.
func (j *journeyRun) kitchenAndCourier(ctx context.Context, id string) error {
	if err := j.timed("accept", func() error {
		return j.call(ctx, "POST", "/admin/v1/orders/"+id+"/accept", j.shop.kitchen, nil, nil, http.StatusOK, nil)
	}); err != nil {
		return err
	}
	var delivery struct {
		OutNo string `json:"out_no"`
	}
	if err := j.timed("dispatch", func() error {
		ev, err := j.board.wait(ctx, boardKey{id, "delivery", "PLACED"})
		if err != nil {
			return err
		}
		return json.Unmarshal(ev.Delivery, &delivery)
	}); err != nil {
		return err
	}
	for _, st := range []string{"ASSIGNED", "ARRIVED", "PICKED_UP", "DELIVERED"} {
		if err := j.timed("courier_callback", func() error {
			if err := j.e.post(ctx, j.e.wxsim+"/couriersim/advance?out_no="+delivery.OutNo, nil, nil, http.StatusOK); err != nil {
				return err
			}
			_, err := j.board.wait(ctx, boardKey{id, "delivery", st})
			return err
		}); err != nil {
			return err
		}
	}
	return j.timed("complete", func() error {
		_, err := j.board.wait(ctx, boardKey{id, "order", "COMPLETED"})
		return err
	})
}

// printed is one ticket of a measured journey.
type printed struct {
	order   int64
	printed bool
	took    time.Duration // from the accept's commit to printed
}

// journeyPrints waits up to ten seconds for the tickets of the merchant's
// orders since from to print and returns them.
func (e *env) journeyPrints(ctx context.Context, merchant int64, from time.Time) ([]printed, error) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var open int
		if err := e.db.QueryRow(ctx, `SELECT count(*) FROM print_jobs WHERE merchant_id = $1 AND status IN ('queued', 'sent')`, merchant).Scan(&open); err != nil {
			return nil, err
		}
		if open == 0 {
			break
		}
	}
	rows, err := e.db.Query(ctx, `SELECT order_id, status = 'printed', coalesce(printed_at - created_at, interval '0')
		FROM print_jobs WHERE merchant_id = $1 AND created_at >= $2`, merchant, from)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []printed
	for rows.Next() {
		var p printed
		if err := rows.Scan(&p.order, &p.printed, &p.took); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// missingPrints counts the measured journeys whose ticket did not print.
func (j *journeyRun) missingPrints(prints []printed) int {
	ok := map[int64]bool{}
	for _, p := range prints {
		ok[p.order] = ok[p.order] || p.printed
	}
	missing := 0
	j.orders.Range(func(k, _ any) bool {
		if !ok[k.(int64)] {
			missing++
		}
		return true
	})
	return missing
}

func printLatencies(prints []printed) []time.Duration {
	var out []time.Duration
	for _, p := range prints {
		if p.printed {
			out = append(out, p.took)
		}
	}
	return out
}

// boardKey is an event a journey waits for: of an order ("order") or of
// its delivery ("delivery"), reaching a status.
type boardKey struct{ order, kind, status string }

// boardEvent is what a journey reads of an event.
type boardEvent struct {
	Type     string          `json:"type"`
	OrderID  string          `json:"order_id"`
	Status   string          `json:"status"`
	Delivery json.RawMessage `json:"delivery"`
}

// journeyBoard is the kitchen's boards: every one reads every event (and
// counts them); the first hands each to the journey waiting for it.
type journeyBoard struct {
	mu     sync.Mutex
	waits  map[boardKey]chan boardEvent
	early  map[boardKey]boardEvent // read before anyone waited
	events []atomic.Int64
}

func newJourneyBoard(n int) *journeyBoard {
	return &journeyBoard{waits: map[boardKey]chan boardEvent{}, early: map[boardKey]boardEvent{}, events: make([]atomic.Int64, n)}
}

// open connects the boards and returns what closes them.
func (b *journeyBoard) open(ctx context.Context, api string, merchant int64, token string) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	var wg sync.WaitGroup
	up := make(chan struct{}, len(b.events))
	failed := make(chan error, len(b.events))
	for i := range b.events {
		wg.Go(func() {
			err := openBoard(ctx, client, api, merchant, token, func() { up <- struct{}{} }, func(data string) {
				b.events[i].Add(1)
				if i == 0 {
					b.read(data)
				}
			})
			if err != nil && ctx.Err() == nil {
				failed <- err
			}
		})
	}
	stop := func() { cancel(); wg.Wait() }
	for range b.events {
		select {
		case <-up:
		case err := <-failed:
			stop()
			return nil, fmt.Errorf("a board's stream: %w", err)
		}
	}
	return stop, nil
}

// read hands one event's data to the journey waiting for it.
func (b *journeyBoard) read(data string) {
	var ev boardEvent
	if json.Unmarshal([]byte(data), &ev) != nil || ev.OrderID == "" {
		return
	}
	k := boardKey{ev.OrderID, "order", ev.Status}
	if ev.Type == "order.delivery" {
		k.kind = "delivery"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.waits[k]; ok {
		delete(b.waits, k)
		ch <- ev
		return
	}
	b.early[k] = ev
}

// wait returns the event of k once a board read it.
func (b *journeyBoard) wait(ctx context.Context, k boardKey) (boardEvent, error) {
	b.mu.Lock()
	if ev, ok := b.early[k]; ok {
		delete(b.early, k)
		b.mu.Unlock()
		return ev, nil
	}
	ch := make(chan boardEvent, 1)
	b.waits[k] = ch
	b.mu.Unlock()
	t := time.NewTimer(journeyStepWait)
	defer t.Stop()
	select {
	case ev := <-ch:
		return ev, nil
	case <-ctx.Done():
		return boardEvent{}, ctx.Err()
	case <-t.C:
		b.mu.Lock()
		delete(b.waits, k)
		b.mu.Unlock()
		return boardEvent{}, errors.New("the board never showed " + k.kind + " " + k.status + " of order " + k.order)
	}
}

// journeyFloorCPU is the PostgreSQL CPU the journey's writes cost in the
// floors (each floor at its best concurrency); false when a floor is
// missing from the run.
func (r *results) journeyFloorCPU() (float64, bool) {
	var sum float64
	for _, w := range journeyWrites {
		x, ok := r.best(w.Floor)
		if !ok || x.CPUUsPerRequest["postgres"] <= 0 {
			return 0, false
		}
		sum += x.CPUUsPerRequest["postgres"]
	}
	return sum, true
}

// journeyTargets sets the journey's target: every serving process's CPU
// per journey against its writes in the floors.
func (r *results) journeyTargets(ceiling func(name string, v, goal float64)) {
	jr := r.Journey
	if jr == nil || jr.Journeys == 0 {
		return
	}
	floor, ok := r.journeyFloorCPU()
	if !ok {
		return
	}
	jr.FloorCPUUs = round3(floor)
	c := jr.CPUUsPerJourney
	ceiling("journey_cpu_vs_floors", (c["api"]+c["postgres"]+c["redis"])/floor, 2)
	if jr.Errors > 0 || jr.PrintsMissing > 0 {
		// A journey that failed, or a ticket never printed, did less
		// work than a whole one: the ratio is not of whole journeys.
		r.Targets[len(r.Targets)-1].Met = false
	}
}

// journeyMarkdown is the journey's section of the Markdown.
func (jr *journeyReport) markdown() string {
	if jr == nil {
		return ""
	}
	var s string
	s += fmt.Sprintf("\nThe journey (menu, confirm with a voucher, submit, pay, WeChat Pay's callback, accept, the ticket printed, a Dada courier placed, four rider callbacks, completed; %d boards of the kitchen connected): %d journeys at %d clients in %.0f s, %.1f a second, p50 %.0f ms, p99 %.0f ms, errors %d%s; %d tickets, %d journeys not printed; events read by each board %v.\n\n",
		len(jr.BoardEvents), jr.Journeys, jr.Clients, jr.DurationS, jr.PerS, jr.P50Ms, jr.P99Ms, jr.Errors, firstErrorNote(jr.FirstError), jr.Prints, jr.PrintsMissing, jr.BoardEvents)
	s += "| step | count | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|\n"
	for _, st := range jr.Steps {
		s += fmt.Sprintf("| %s | %d | %.2f | %.2f | %.2f |\n", st.Step, st.Count, st.P50Ms, st.P99Ms, st.MaxMs)
	}
	c := jr.CPUUsPerJourney
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s += "\nCPU per journey (µs):"
	for _, k := range keys {
		s += fmt.Sprintf(" %s %.0f;", k, c[k])
	}
	s += fmt.Sprintf(" against the floors' PostgreSQL CPU for its %d writes (the placement at floor_place's, each other state change at floor_pay's): %.0f µs.\n", len(jr.Writes), jr.FloorCPUUs)
	return s
}

func firstErrorNote(e string) string {
	if e == "" {
		return ""
	}
	return " (first: " + e + ")"
}
