package main

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/printing"
	"github.com/takeout/takeout/internal/printsim"
)

// printShop is a shop whose API prints through the printer simulator.
type printShop struct {
	*shop
	sim    *printsim.Server
	simURL string
	// env is the API's print settings, for a test's own providers.
	env map[string]string
}

const printTestClientID = "1000000001"

// newPrintShop starts the printer simulator and an API configured for
// both its providers, with short timeouts so that faults resolve within
// a test. The providers call back through a forwarder bound to the API
// once it listens.
func newPrintShop(t *testing.T, env map[string]string, stocks ...int32) *printShop {
	t.Helper()
	feieKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&feieKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPath := filepath.Join(t.TempDir(), "feie_pub.pem")
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		t.Fatal(err)
	}
	var apiURL atomic.Pointer[url.URL]
	forward := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		if u := apiURL.Load(); u != nil {
			r.SetURL(u)
		}
	}})
	t.Cleanup(forward.Close)
	secret := "printer-secret-" + strconv.Itoa(len(t.Name()))
	sim := printsim.New(printsim.Options{
		YilianyunClientID: printTestClientID, YilianyunSecret: secret, YilianyunCallbackURL: forward.URL + "/v1/printers/yilianyun/callback",
		FeieUser: "feie-user", FeieUKey: secret, FeieKey: feieKey, Client: &http.Client{Timeout: 5 * time.Second},
	})
	simSrv := httptest.NewServer(sim)
	t.Cleanup(func() { simSrv.Close(); sim.Wait() })
	all := map[string]string{
		"TAKEOUT_YILIANYUN_API_BASE": simSrv.URL + "/yilianyun", "TAKEOUT_YILIANYUN_CLIENT_ID": printTestClientID,
		"TAKEOUT_YILIANYUN_CLIENT_SECRET": secret,
		"TAKEOUT_FEIE_API_BASE":           simSrv.URL + "/feie", "TAKEOUT_FEIE_USER": "feie-user", "TAKEOUT_FEIE_UKEY": secret,
		"TAKEOUT_FEIE_PUBLIC_KEY": pubPath, "TAKEOUT_FEIE_CALLBACK_URL": forward.URL + "/v1/printers/feie/callback",
		"TAKEOUT_PRINT_TIMEOUT": "1s", "TAKEOUT_PRINT_SWEEP_INTERVAL": "200ms", "TAKEOUT_PRINT_CONFIRM_AFTER": "2s",
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
	return &printShop{shop: sh, sim: sim, simURL: simSrv.URL, env: all}
}

// printer adds a printer to the shop's merchant.
func (ps *printShop) printer(t *testing.T, name, provider, device, role string, categories ...string) printing.Printer {
	t.Helper()
	if categories == nil {
		categories = []string{}
	}
	r := ps.do(t, ps.apis[0], "POST", "/admin/v1/merchants/"+ps.merchantID+"/printers", ps.admin,
		map[string]any{"name": name, "provider": provider, "device": device, "role": role, "category_ids": categories})
	if r.status != 201 {
		t.Fatalf("add printer %s: %d %s", name, r.status, r.body)
	}
	var p printing.Printer
	r.json(t, &p)
	return p
}

// simConfig sets the printer simulator's faults.
func (ps *printShop) simConfig(t *testing.T, c printsim.Config) {
	t.Helper()
	b, _ := json.Marshal(c)
	resp, err := http.Post(ps.simURL+"/printsim/config", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("printsim config: %d", resp.StatusCode)
	}
}

// acceptedOrder places an order of qty of each dish, marks it paid and
// has the merchant accept it.
func (ps *printShop) acceptedOrder(t *testing.T, code string, qty ...int32) string {
	t.Helper()
	user := ps.login(t, code)
	c := ps.confirm(t, ps.apis[0], user, ps.cart(qty...))
	r := ps.submit(t, ps.apis[0], user, code, c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("place: %d %s", r.status, r.body)
	}
	id := placedOrder(t, r).ID
	ps.markPaid(t, id)
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/accept", ps.admin, nil); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	return id
}

// papers are the tickets a printer produced for an order: each paper's
// content, read from the simulator.
func (ps *printShop) papers(device, orderID string) []string {
	var out []string
	for _, p := range ps.sim.Papers(device) {
		if strings.Contains(p.Content, "订单 "+orderID+"\n") {
			out = append(out, p.Content)
		}
	}
	return out
}

// unmarked counts papers that carry no reprint mark.
func unmarked(papers []string) int {
	n := 0
	for _, p := range papers {
		if !strings.Contains(p, printing.TicketMarkAttempt) && !strings.Contains(p, printing.TicketMarkReprint) {
			n++
		}
	}
	return n
}

// tickets lists print tickets as an operator does.
func (ps *printShop) tickets(t *testing.T, query string) []printing.Ticket {
	t.Helper()
	r := ps.do(t, ps.apis[0], "GET", "/admin/v1/prints"+query, ps.admin, nil)
	if r.status != 200 {
		t.Fatalf("GET /admin/v1/prints%s: %d %s", query, r.status, r.body)
	}
	var ts printing.Tickets
	r.json(t, &ts)
	return ts.Tickets
}

// ticketsOf lists an order's tickets.
func (ps *printShop) ticketsOf(t *testing.T, orderID string) []printing.Ticket {
	t.Helper()
	var out []printing.Ticket
	for _, tk := range ps.tickets(t, "") {
		if tk.OrderID == orderID {
			out = append(out, tk)
		}
	}
	return out
}

// setCategory puts dish i in a new category and returns its id.
func (ps *printShop) setCategory(t *testing.T, i int, name string) string {
	t.Helper()
	var c catalog.Category
	r := ps.do(t, ps.apis[0], "POST", "/admin/v1/merchants/"+ps.merchantID+"/categories", ps.admin, map[string]any{"name": name})
	if r.status != 201 {
		t.Fatalf("create category: %d %s", r.status, r.body)
	}
	r.json(t, &c)
	d := ps.dish(t, i)
	if r := ps.do(t, ps.apis[0], "PATCH", "/admin/v1/dishes/"+d.ID, ps.admin, map[string]any{"version": d.Version, "category_id": c.ID}); r.status != 200 {
		t.Fatalf("set the dish's category: %d %s", r.status, r.body)
	}
	return c.ID
}

// An accepted order prints once on each printer it is routed to: the
// kitchen printer of its dishes' category and the receipt printer, not
// the kitchen printer of another category; the paper names the dishes,
// the amounts as ¥, the order, and its ticket id. Eight racing accepts
// of one order (one wins, the rest replay) still print one ticket each;
// a rejected order prints nothing; an order accepted by its deadline
// prints like one the merchant accepted.
func TestPrintingAcceptedOrder(t *testing.T) {
	t.Parallel()
	ps := newPrintShop(t, nil, 100, 100)
	hot := ps.setCategory(t, 0, "Hot")
	cold := ps.setCategory(t, 1, "Cold")
	ps.printer(t, "Wok", "yilianyun", "YLYHOT1", "kitchen", hot)
	ps.printer(t, "Salad", "feie", "FEIECOLD1", "kitchen", cold)
	ps.printer(t, "Counter", "feie", "FEIERCPT1", "receipt")

	user := ps.login(t, "print-race")
	c := ps.confirm(t, ps.apis[0], user, ps.cart(2))
	r := ps.submit(t, ps.apis[0], user, "print-race", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("place: %d %s", r.status, r.body)
	}
	id := placedOrder(t, r).ID
	ps.markPaid(t, id)
	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for range 8 {
		wg.Go(func() { codes <- ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/accept", ps.admin, nil).status })
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Errorf("accept answered %d", code)
		}
	}
	waitUntil(t, "both tickets printed", func() bool {
		return ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND status = 'printed'", id) == 2
	})
	if n := ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1", id); n != 2 {
		t.Fatalf("%d tickets for the order, want 2 (the wok and the counter)", n)
	}
	ps.sim.Wait()
	wok, salad, counter := ps.papers("YLYHOT1", id), ps.papers("FEIECOLD1", id), ps.papers("FEIERCPT1", id)
	if len(wok) != 1 || len(counter) != 1 || len(salad) != 0 {
		t.Fatalf("papers: wok %d, salad %d, counter %d; want 1, 0, 1", len(wok), len(salad), len(counter))
	}
	for _, want := range []string{"Order Kitchen", printing.TicketLineKitchen + " · Wok", "Dish 0 ×2", printing.TicketLineID} {
		if !strings.Contains(wok[0], want) {
			t.Errorf("the wok's ticket lacks %q:\n%s", want, wok[0])
		}
	}
	if strings.Contains(wok[0], "¥") {
		t.Errorf("the kitchen's ticket shows amounts:\n%s", wok[0])
	}
	for _, want := range []string{printing.TicketLineReceipt, "Dish 0 ×2  ¥20.00", "实付 ¥", "地址: "} {
		if !strings.Contains(counter[0], want) {
			t.Errorf("the receipt lacks %q:\n%s", want, counter[0])
		}
	}
	for _, tk := range ps.ticketsOf(t, id) {
		if tk.Status != "printed" || tk.Attempt != 1 || tk.PrintedAt == nil || tk.Late {
			t.Errorf("ticket %+v, want printed on its first attempt", tk)
		}
	}

	rejected := ps.place(t, ps.login(t, "print-reject"), "print-reject", 1)
	ps.markPaid(t, rejected.ID)
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+rejected.ID+"/reject", ps.admin, nil); r.status != 200 {
		t.Fatalf("reject: %d %s", r.status, r.body)
	}
	if n := ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1", rejected.ID); n != 0 {
		t.Errorf("a rejected order has %d tickets", n)
	}

	// The accept deadline's auto-accept prints too.
	ps.setAcceptRule(t, 60, "accept")
	auto := ps.place(t, ps.login(t, "print-auto"), "print-auto", 1)
	if n := ps.count(t, `WITH o AS (UPDATE orders SET status = 'PAID', version = version + 1, accept_by = now() - interval '1 second', accept_then = 'accept'
		WHERE id = $1 RETURNING id) SELECT count(*) FROM o`, auto.ID); n != 1 {
		t.Fatal("order not paid")
	}
	if _, err := ps.pool.Exec(t.Context(), "INSERT INTO order_accept_deadlines (accept_by, order_id) VALUES (now() - interval '1 second', $1)", auto.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the order accepted at its deadline", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'ACCEPTED'", auto.ID) == 1
	})
	waitUntil(t, "the auto-accepted order's tickets printed", func() bool {
		return ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND status = 'printed'", auto.ID) == 2
	})
}

// Each provider's faults, one order at a time: the ticket ends printed,
// the kitchen gets exactly one paper without a reprint mark, and any
// further paper says "重打 #n". A provider that is down or refuses prints
// nothing until it recovers; one that times out after printing prints
// once at Yilianyun (the repeated origin_id returns the first ticket)
// and twice at Feie (no idempotency id: the second paper is marked); a
// lost callback is made good by a query, a repeated one changes
// nothing; a printer offline past the print deadline shows as late and
// prints when it is back.
func TestPrintingProviderFaults(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"yilianyun", "feie"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			ps := newPrintShop(t, map[string]string{"TAKEOUT_PRINT_WITHIN": "1s"}, 1000)
			device := strings.ToUpper(provider[:3]) + "DEV1"
			ps.printer(t, "Kitchen", provider, device, "kitchen")
			faults := func(f printsim.Faults) printsim.Config {
				if provider == "feie" {
					return printsim.Config{Feie: f}
				}
				return printsim.Config{Yilianyun: f}
			}
			for i, tc := range []struct {
				name     string
				cfg      printsim.Config
				papers   int // what the kitchen holds at the end
				unmarked int // of them without a reprint mark (the rest say 重打)
				recover  func(t *testing.T, orderID string)
			}{
				{name: "down", cfg: faults(printsim.Faults{Down: 3}), papers: 1, unmarked: 1},
				{name: "refusing", cfg: faults(printsim.Faults{Refuse: 2}), papers: 1, unmarked: 1},
				{name: "timing out after printing", cfg: faults(printsim.Faults{HangAfterPrint: 1}), papers: map[string]int{"yilianyun": 1, "feie": 2}[provider], unmarked: 1},
				{name: "callback lost", cfg: faults(printsim.Faults{LoseCallbacks: 1}), papers: 1, unmarked: 1},
				{name: "callback repeated", cfg: faults(printsim.Faults{RepeatCallbacks: 1}), papers: 1, unmarked: 1},
				// A timeout before the provider took the ticket: Yilianyun's
				// repeated origin_id makes the retry safe; at Feie nobody can
				// tell, so the one paper that comes out says 重打 #2.
				{name: "slow past the timeout", cfg: faults(printsim.Faults{SlowMS: 1500}), papers: 1,
					unmarked: map[string]int{"yilianyun": 1, "feie": 0}[provider], recover: func(t *testing.T, orderID string) {
						waitUntil(t, "a try timed out", func() bool {
							return ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND tries >= 1", orderID) == 1
						})
						ps.simConfig(t, printsim.Config{})
					}},
				{name: "printer offline", cfg: printsim.Config{Offline: []string{device}}, papers: 1, unmarked: 1, recover: func(t *testing.T, orderID string) {
					waitUntil(t, "the ticket listed as late", func() bool {
						for _, tk := range ps.tickets(t, "?status=late") {
							if tk.OrderID == orderID {
								return true
							}
						}
						return false
					})
					ps.simConfig(t, printsim.Config{})
				}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					ps.simConfig(t, tc.cfg)
					id := ps.acceptedOrder(t, fmt.Sprintf("fault-%s-%d", provider, i), 1)
					if tc.recover != nil {
						tc.recover(t, id)
					}
					waitUntil(t, "the ticket printed", func() bool {
						return ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND status = 'printed'", id) == 1
					})
					ps.simConfig(t, printsim.Config{})
					ps.sim.Wait()
					papers := ps.papers(device, id)
					if len(papers) != tc.papers || unmarked(papers) != tc.unmarked {
						t.Fatalf("the kitchen holds %d papers, %d unmarked; want %d, %d unmarked:\n%s", len(papers), unmarked(papers), tc.papers, tc.unmarked, strings.Join(papers, "\n"))
					}
					if len(papers) > tc.unmarked && !strings.Contains(strings.Join(papers, ""), printing.TicketMarkAttempt+"2") {
						t.Errorf("the second paper is not marked %q", printing.TicketMarkAttempt+"2")
					}
					if n := ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1", id); n != 1 {
						t.Errorf("%d tickets for one printer", n)
					}
				})
			}
		})
	}
}

// crashingProvider is a provider whose process dies right after the
// provider took the ticket: nothing after the call runs.
type crashingProvider struct {
	printing.Provider
	t *testing.T
}

func (c crashingProvider) Print(ctx context.Context, device, ticketID, content string) (string, error) {
	if _, err := c.Provider.Print(ctx, device, ticketID, content); err != nil {
		c.t.Errorf("the send before the crash: %v", err)
	}
	runtime.Goexit()
	return "", nil
}

// A process that dies between a provider's taking a ticket and the
// write of what it answered leaves the ticket queued; the next process
// sends it again. Yilianyun answers the repeated origin_id with the
// earlier ticket: one paper. Feie has no such id: the second paper says
// 重打 #2, never two unmarked papers.
func TestPrintingCrashAfterSend(t *testing.T) {
	t.Parallel()
	for provider, want := range map[string]int{"yilianyun": 1, "feie": 2} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			// The API's sweep runs once, at its start: this test's own
			// deliveries are the only ones.
			ps := newPrintShop(t, map[string]string{"TAKEOUT_PRINT_SWEEP_INTERVAL": "1h"}, 1000)
			device := strings.ToUpper(provider[:3]) + "CRASH"
			ps.printer(t, "Kitchen", provider, device, "kitchen")
			var prov printing.Provider = &printing.Yilianyun{Base: ps.env["TAKEOUT_YILIANYUN_API_BASE"], ClientID: printTestClientID,
				ClientSecret: ps.env["TAKEOUT_YILIANYUN_CLIENT_SECRET"], HTTP: &http.Client{Timeout: 5 * time.Second}, Now: time.Now}
			if provider == "feie" {
				prov = &printing.Feie{Base: ps.env["TAKEOUT_FEIE_API_BASE"], User: "feie-user", UKey: ps.env["TAKEOUT_FEIE_UKEY"],
					CallbackURL: ps.env["TAKEOUT_FEIE_CALLBACK_URL"], HTTP: &http.Client{Timeout: 5 * time.Second}, Now: time.Now}
			}
			deliver := func(p printing.Provider) {
				svc, err := printing.NewService(printing.Options{Pool: ps.pool, Providers: []printing.Provider{p}, Now: time.Now})
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					defer close(done)
					var id int64
					if err := ps.pool.QueryRow(t.Context(), "SELECT id FROM print_jobs WHERE printer_id IN (SELECT id FROM printers WHERE device = $1)", device).Scan(&id); err != nil {
						done <- err
						return
					}
					done <- svc.Deliver(t.Context(), id)
				}()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			id := ps.acceptedOrder(t, "crash-"+provider, 1)
			deliver(crashingProvider{prov, t})
			waitUntil(t, "the crashed send's paper", func() bool { return len(ps.papers(device, id)) == 1 })
			deliver(prov)
			waitUntil(t, "the ticket printed", func() bool {
				return ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND status = 'printed'", id) == 1
			})
			ps.sim.Wait()
			papers := ps.papers(device, id)
			if len(papers) != want || unmarked(papers) != 1 {
				t.Fatalf("the kitchen holds %d papers, %d unmarked; want %d, 1 unmarked:\n%s", len(papers), unmarked(papers), want, strings.Join(papers, "\n"))
			}
			if want == 2 && !strings.Contains(papers[1], printing.TicketMarkAttempt+"2") {
				t.Errorf("the second paper is not marked %q:\n%s", printing.TicketMarkAttempt+"2", papers[1])
			}
		})
	}
}

// Provider callbacks are taken only with a valid signature and, for
// Yilianyun, a fresh push time; a forged one is refused and changes
// nothing. An operator's reprint runs once per Idempotency-Key, even
// sent five times at once, and its paper says "补打 #n".
func TestPrintingCallbacksAndReprints(t *testing.T) {
	t.Parallel()
	ps := newPrintShop(t, map[string]string{"TAKEOUT_PRINT_CONFIRM_AFTER": "1h"}, 100)
	ps.printer(t, "Counter", "feie", "FEIEC2", "receipt")
	// Callbacks lost, and no query for an hour: only a callback can say
	// the ticket printed.
	ps.simConfig(t, printsim.Config{Feie: printsim.Faults{LoseCallbacks: 1}})
	id := ps.acceptedOrder(t, "callback-forged", 1)
	waitUntil(t, "the ticket sent", func() bool {
		return ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND status = 'sent'", id) == 1
	})
	var ref string
	if err := ps.pool.QueryRow(t.Context(), "SELECT provider_ref FROM print_jobs WHERE order_id = $1", id).Scan(&ref); err != nil {
		t.Fatal(err)
	}
	forger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	stime := strconv.FormatInt(time.Now().Unix(), 10)
	digest := sha256.Sum256([]byte(printing.FeieCallbackMessage(ref, "1", stime)))
	sig, _ := rsa.SignPKCS1v15(rand.Reader, forger, crypto.SHA256, digest[:])
	post := func(path string, form url.Values) int {
		resp, err := http.PostForm(ps.apis[0].url+path, form)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for name, tc := range map[string]struct {
		path string
		form url.Values
		want int
	}{
		"feie signed by another key": {"/v1/printers/feie/callback", url.Values{"orderId": {ref}, "status": {"1"}, "stime": {stime}, "sign": {base64.StdEncoding.EncodeToString(sig)}}, 401},
		"feie unsigned":              {"/v1/printers/feie/callback", url.Values{"orderId": {ref}, "status": {"1"}, "stime": {stime}}, 401},
		"yilianyun stale push": {"/v1/printers/yilianyun/callback", url.Values{"machine_code": {"FEIEC2"}, "order_id": {ref}, "state": {"1"},
			"push_time": {"1000"}, "sign": {printing.YilianyunSign(printTestClientID, "1000", "wrong")}}, 401},
		"no such provider": {"/v1/printers/epson/callback", url.Values{}, 404},
	} {
		if got := post(tc.path, tc.form); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND status = 'sent'", id); n != 1 {
		t.Fatal("a refused callback changed the ticket")
	}

	tickets := ps.ticketsOf(t, id)
	if len(tickets) != 1 {
		t.Fatalf("%d tickets", len(tickets))
	}
	reprint := func(key string) response {
		return ps.doKey(t, ps.apis[0], "POST", "/admin/v1/prints/"+tickets[0].ID+"/reprint", ps.admin, key, "")
	}
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/prints/"+tickets[0].ID+"/reprint", ps.admin, nil); r.status != 400 {
		t.Errorf("a reprint without an Idempotency-Key: %d", r.status)
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if r := reprint("reprint-1"); r.status != 201 && r.status != 409 {
				t.Errorf("reprint: %d %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	if r := reprint("reprint-2"); r.status != 201 {
		t.Fatalf("second reprint: %d %s", r.status, r.body)
	}
	waitUntil(t, "both reprints printed", func() bool {
		return ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND trigger = 'reprint' AND status = 'printed'", id) == 2
	})
	if n := ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1", id); n != 3 {
		t.Fatalf("%d tickets, want the first and two reprints", n)
	}
	ps.sim.Wait()
	papers := ps.papers("FEIEC2", id)
	all := strings.Join(papers, "")
	if len(papers) != 3 || unmarked(papers) != 1 || !strings.Contains(all, printing.TicketMarkReprint+"2") || !strings.Contains(all, printing.TicketMarkReprint+"3") {
		t.Fatalf("papers (%d):\n%s", len(papers), all)
	}
}

// A ticket not printed by its deadline shows on the board with a
// reprint button; a tap reprints it once, and the paper says 补打 #2.
func TestBoardShowsLatePrints(t *testing.T) {
	t.Parallel()
	ps := newPrintShop(t, map[string]string{"TAKEOUT_PRINT_WITHIN": "1s"}, 100)
	ps.printer(t, "Wok", "yilianyun", "YLYBOARD1", "kitchen")
	ps.createStaff(t, "printboard", "correct horse battery")
	ps.simConfig(t, printsim.Config{Offline: []string{"YLYBOARD1"}})
	id := ps.acceptedOrder(t, "board-late", 1)
	var ticketID string
	waitUntil(t, "the ticket late", func() bool {
		for _, tk := range ps.tickets(t, "?status=late") {
			if tk.OrderID == id {
				ticketID = tk.ID
				return true
			}
		}
		return false
	})
	b := browser(t)
	boardLogin(t, b, ps.apis[0], "zh-CN", "printboard", "correct horse battery")
	row := fmt.Sprintf(`#prints-late li[data-ticket="%s"]`, ticketID)
	var text string
	runBrowser(t, b, 10*time.Second, "the late ticket on the board",
		chromedp.WaitVisible(chromedp.CSS(row)),
		into(chromedp.Text(chromedp.CSS(row+" span")), &text))
	if !strings.Contains(text, id[len(id)-6:]) || !strings.Contains(text, "Wok") {
		t.Errorf("the banner says %q", text)
	}
	runBrowser(t, b, 10*time.Second, "reprint from the board",
		chromedp.Click(chromedp.CSS(row+" button.reprint")),
		chromedp.WaitVisible(chromedp.CSS(row+" button.reprint:disabled")))
	waitUntil(t, "the reprint queued", func() bool {
		return ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND trigger = 'reprint'", id) == 1
	})
	ps.simConfig(t, printsim.Config{})
	waitUntil(t, "both tickets printed", func() bool {
		return ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1 AND status = 'printed'", id) == 2
	})
	ps.sim.Wait()
	papers := ps.papers("YLYBOARD1", id)
	if len(papers) != 2 || unmarked(papers) != 1 || !strings.Contains(strings.Join(papers, ""), printing.TicketMarkReprint+"2") {
		t.Fatalf("papers:\n%s", strings.Join(papers, "\n"))
	}
	if n := ps.count(t, "SELECT count(*) FROM print_jobs WHERE order_id = $1", id); n != 2 {
		t.Errorf("%d tickets, want the first and one reprint", n)
	}
}
