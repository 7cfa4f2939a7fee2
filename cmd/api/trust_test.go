package main

// End-to-end regressions of issue "Trust, round three", each as the user
// (or the hostile tester) would see it.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/orderstream"
	"github.com/takeout/takeout/internal/staff"
	"github.com/takeout/takeout/internal/testenv"
)

// A key's request is its method, route, path parameters and body, in
// every layer: the same key and body sent to another resource or route
// is 422 idempotency-key-mismatch on the instance that answered the first
// (its L1 warm), on another one (Redis), on one without Redis
// (PostgreSQL alone) and on one started afterwards (a restart); never the
// first request's answer, and the second resource is never changed. The
// first resource's retries still replay.
func TestKeyBelongsToOneRequest(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10, 10)
	withoutRedis := maps.Clone(ps.payEnv)
	withoutRedis["TAKEOUT_REDIS_URL"] = ""
	instances := []struct {
		name string
		api  *instance
	}{
		{"warm", ps.apis[0]},
		{"cold, with Redis", ps.start(t, ps.payEnv)},
		{"cold, without Redis", ps.start(t, withoutRedis)},
	}
	restarted := func() *instance { return ps.start(t, ps.payEnv) }

	// tries sends the key and body to the first path (a replay) and to
	// the second (a mismatch) on every instance and on a restarted one.
	tries := func(t *testing.T, key, body, first, second string, firstAnswer response) {
		t.Helper()
		all := append(instances, struct {
			name string
			api  *instance
		}{"restarted", restarted()})
		for _, in := range all {
			if r := ps.doKey(t, in.api, "POST", second, ps.admin, key, body); r.status != 422 || r.problemType() != "idempotency-key-mismatch" {
				t.Errorf("%s: %s with the key of %s: %d %s, want 422 idempotency-key-mismatch", in.name, second, first, r.status, r.body)
			}
			if r := ps.doKey(t, in.api, "POST", first, ps.admin, key, body); r.status != firstAnswer.status || string(r.body) != string(firstAnswer.body) || r.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("%s: %s retried: %d %s, want the first answer replayed", in.name, first, r.status, r.body)
			}
		}
	}

	t.Run("refunds of two orders", func(t *testing.T) {
		_, a, _ := ps.paidOrder(t, "key-scope-a")
		_, b, _ := ps.paidOrder(t, "key-scope-b")
		const body = `{"amount_fen":300,"reason":"cold soup"}`
		first := ps.doKey(t, ps.apis[0], "POST", "/admin/v1/orders/"+a+"/refunds", ps.admin, "K", body)
		if first.status != 201 {
			t.Fatalf("refund of A: %d %s", first.status, first.body)
		}
		tries(t, "K", body, "/admin/v1/orders/"+a+"/refunds", "/admin/v1/orders/"+b+"/refunds", first)
		if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", b); n != 0 {
			t.Errorf("order B has %d refunds, want none", n)
		}
		if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", a); n != 1 {
			t.Errorf("order A has %d refunds, want 1", n)
		}
	})

	t.Run("stock adjustments of two dishes", func(t *testing.T) {
		one := "/admin/v1/dishes/" + ps.dishes[0].ID + "/stock/adjustments"
		two := "/admin/v1/dishes/" + ps.dishes[1].ID + "/stock/adjustments"
		before := ps.stock(t, 1)
		first := ps.doKey(t, ps.apis[0], "POST", one, ps.admin, "S", `{"delta":7}`)
		if first.status != 201 {
			t.Fatalf("adjust dish 1: %d %s", first.status, first.body)
		}
		tries(t, "S", `{"delta":7}`, one, two, first)
		if got := ps.stock(t, 1); got != before {
			t.Errorf("dish 2 has %d on hand, want %d: another dish's key changed it", got, before)
		}
		if n := ps.count(t, "SELECT count(*) FROM stock_adjustments WHERE dish_id = $1 AND kind = 'delta'", ps.dishes[1].ID); n != 0 {
			t.Errorf("%d ledger rows for dish 2", n)
		}
	})

	t.Run("a category with a merchant's key", func(t *testing.T) {
		const body = `{"name":"Key Scope Kitchen"}`
		first := ps.doKey(t, ps.apis[0], "POST", "/admin/v1/merchants", ps.admin, "M", body)
		if first.status != 201 {
			t.Fatalf("create merchant: %d %s", first.status, first.body)
		}
		tries(t, "M", body, "/admin/v1/merchants", "/admin/v1/merchants/"+ps.merchantID+"/categories", first)
		if n := ps.count(t, "SELECT count(*) FROM categories WHERE name = 'Key Scope Kitchen'"); n != 0 {
			t.Errorf("%d categories made with a merchant create's key", n)
		}
	})
}

// creatingCase is one creating route as TestEveryCreatingRouteReplays
// drives it: the caller's token, the path and body of a request that
// creates something, and a count of what it created.
type creatingCase struct {
	token, path, body string
	made              func() int
}

// Every POST of the contract that answers 201 declares Idempotency-Key and
// replays under it: the same key and body, sent as concurrent copies to
// two instances and once more later, get one 201 byte for byte (all but
// one with Idempotent-Replayed: true) and create one thing. A creating route added to the contract
// without a case here fails the test.
func TestEveryCreatingRouteReplays(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10, 10)
	other := ps.start(t, ps.payEnv)
	_, paid, _ := ps.paidOrder(t, "creating-routes")
	user := ps.login(t, "creating-submit")
	confirm := ps.confirm(t, ps.apis[0], user, ps.cart(1))
	count := func(query string, args ...any) func() int {
		return func() int { return ps.count(t, query, args...) }
	}
	offered := ps.voucherTemplate(t, ps.admin, map[string]any{"name": "walked offer", "per_user_limit": 5})
	claimer := ps.login(t, "creating-claim")
	promoted := createMerchant(t, ps.stack, ps.apis[0], "Promoted Kitchen")
	// A print ticket of the paid order, to reprint.
	var ticket string
	if err := ps.pool.QueryRow(t.Context(), `WITH p AS (INSERT INTO printers (merchant_id, name, provider, device, role)
		    VALUES ($1, 'Walked', 'yilianyun', 'WALKEDREPRINT', 'kitchen') RETURNING id, merchant_id)
		INSERT INTO print_jobs (order_id, merchant_id, printer_id, trigger, print_by)
		SELECT $2, merchant_id, id, 'accept', now() FROM p RETURNING id::text`, mustID(t, ps.merchantID), mustID(t, paid)).Scan(&ticket); err != nil {
		t.Fatal(err)
	}
	// An accepted order of its customer, to ask after.
	afterUser, accepted, _ := ps.paidOrder(t, "creating-after")
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+accepted+"/accept", ps.admin, nil); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	cases := map[string]creatingCase{
		"/v1/orders/{id}/after-sales": {afterUser, "/v1/orders/" + accepted + "/after-sales", `{"amount_fen":100,"reason":"walked"}`,
			count("SELECT count(*) FROM after_sales WHERE order_id = $1", accepted)},
		"/admin/v1/merchants/{id}/printers": {ps.admin, "/admin/v1/merchants/" + ps.merchantID + "/printers",
			`{"name":"Walked Printer","provider":"feie","device":"WALKED1","role":"receipt"}`,
			count("SELECT count(*) FROM printers WHERE device = 'WALKED1'")},
		"/admin/v1/prints/{id}/reprint": {ps.admin, "/admin/v1/prints/" + ticket + "/reprint", "",
			count("SELECT count(*) FROM print_jobs WHERE trigger = 'reprint' AND order_id = $1", paid)},
		"/admin/v1/voucher-templates": {ps.admin, "/admin/v1/voucher-templates", fmt.Sprintf(
			`{"merchant_id":%q,"name":"walked","amount_fen":100,"funded_by":"merchant","claim_from":"2026-06-01T00:00:00Z","claim_until":"2027-06-01T00:00:00Z","valid_days":3,"budget":9}`, ps.merchantID),
			count("SELECT count(*) FROM voucher_templates WHERE name = 'walked'")},
		// Another merchant's: a promotion moves its merchant's quote, and
		// the submit's cart above was confirmed at this one's.
		"/admin/v1/merchants/{id}/promotions": {ps.admin, "/admin/v1/merchants/" + promoted + "/promotions",
			`{"kind":"free_delivery","name":"walked","funded_by":"merchant","tiers":[{"threshold_fen":5000,"off_fen":0}]}`,
			count("SELECT count(*) FROM promotions WHERE name = 'walked'")},
		"/v1/vouchers/claim": {claimer, "/v1/vouchers/claim", fmt.Sprintf(`{"template_id":%q}`, offered.ID),
			count("SELECT count(*) FROM vouchers WHERE template_id = $1", offered.ID)},
		"/v1/orders": {user, "/v1/orders", fmt.Sprintf(`{"confirm_token":%q}`, confirm.ConfirmToken),
			count("SELECT count(*) FROM orders WHERE user_id = (SELECT id FROM users WHERE openid = 'sim-creating-submit')")},
		"/admin/v1/merchants": {ps.admin, "/admin/v1/merchants", `{"name":"Walked Kitchen"}`,
			count("SELECT count(*) FROM merchants WHERE name = 'Walked Kitchen'")},
		"/admin/v1/merchants/{id}/dishes": {ps.admin, "/admin/v1/merchants/" + ps.merchantID + "/dishes", `{"name":"Walked Soup","price_fen":900,"stock":3}`,
			count("SELECT count(*) FROM dishes WHERE name = 'Walked Soup'")},
		"/admin/v1/merchants/{id}/categories": {ps.admin, "/admin/v1/merchants/" + ps.merchantID + "/categories", `{"name":"Walked Noodles"}`,
			count("SELECT count(*) FROM categories WHERE name = 'Walked Noodles'")},
		"/admin/v1/dishes/{id}/stock/adjustments": {ps.admin, "/admin/v1/dishes/" + ps.dishes[1].ID + "/stock/adjustments", `{"delta":2}`,
			count("SELECT count(*) FROM stock_adjustments WHERE dish_id = $1 AND kind = 'delta'", ps.dishes[1].ID)},
		"/admin/v1/orders/{id}/refunds": {ps.admin, "/admin/v1/orders/" + paid + "/refunds", `{"amount_fen":100,"reason":"walked"}`,
			count("SELECT count(*) FROM refunds WHERE order_id = $1 AND amount_fen = 100", paid)},
		"/admin/v1/merchants/{id}/staff": {ps.admin, "/admin/v1/merchants/" + ps.merchantID + "/staff", `{"username":"walked.cook","password":"long enough secret"}`,
			count("SELECT count(*) FROM staff_accounts WHERE username = 'walked.cook'")},
	}
	creating := 0
	for path, item := range testenv.OpenAPIDoc(t).Paths.Map() {
		op := item.Post
		if op == nil || op.Responses.Value("201") == nil {
			continue
		}
		creating++
		t.Run(path, func(t *testing.T) {
			declared := false
			for _, p := range append(item.Parameters, op.Parameters...) {
				if p.Value != nil && p.Value.In == "header" && p.Value.Name == "Idempotency-Key" {
					declared = true
				}
			}
			if !declared {
				t.Errorf("POST %s answers 201 but does not declare the Idempotency-Key header", path)
			}
			tc, ok := cases[path]
			if !ok {
				t.Fatalf("POST %s answers 201 and this test has no case for it: add one that creates something", path)
			}
			// Concurrent duplicates over two instances, then a late retry.
			before := tc.made()
			const copies = 6
			answers := make([]response, copies)
			var wg sync.WaitGroup
			for i := range copies {
				api := []*instance{ps.apis[0], other}[i%2]
				wg.Go(func() { answers[i] = ps.doKey(t, api, "POST", tc.path, tc.token, "walk-"+path, tc.body) })
			}
			wg.Wait()
			// A copy that waited longer than the coalescing wait for the
			// first (a password hash under -race) is told to come back:
			// the late retry then replays.
			var late response
			waitUntil(t, "a late retry to be answered", func() bool {
				late = ps.doKey(t, other, "POST", tc.path, tc.token, "walk-"+path, tc.body)
				return late.problemType() != "request-in-progress"
			})
			answers = append(answers, late)
			fresh, body := 0, ""
			for _, r := range answers {
				switch {
				case r.status == 409 && r.problemType() == "request-in-progress":
					continue
				case r.status != 201 || (body != "" && string(r.body) != body):
					t.Errorf("%d %s, want one 201 body for every copy (or 409 request-in-progress)", r.status, r.body)
				}
				body = string(r.body)
				if r.header.Get("Idempotent-Replayed") != "true" {
					fresh++
				}
			}
			if fresh != 1 || late.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("%d answers not marked replayed, want 1; the late retry replayed: %q", fresh, late.header.Get("Idempotent-Replayed"))
			}
			if got := tc.made() - before; got != 1 {
				t.Errorf("one key made %d, want 1", got)
			}
		})
	}
	if creating != len(cases) {
		t.Errorf("the contract has %d creating routes and this test %d cases: remove the cases of routes that are gone", creating, len(cases))
	}
}

// untilEnd reads a stream until it closes or d passes; it returns the
// order events it carried and whether it ended with a stream.end event.
func (s *sseStream) untilEnd(t *testing.T, d time.Duration) (events []sseEvent, ended bool) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return events, ended
			}
			switch {
			case ev.Event == orderstream.EndEvent:
				ended = true
			case ev.ID != "":
				events = append(events, ev)
			}
		case <-timeout:
			t.Fatalf("the stream is still open after %s (events %v)", d, events)
		}
	}
}

// An open order stream lasts only while its token is valid: a logout, an
// admin's revocation, the account disabled (each on the other instance)
// and the token's expiry each end it with a stream.end event, and the
// order paid afterwards never reaches it; reconnecting is 401.
func TestStreamEndsWithItsToken(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 1000)
	a, b := sh.apis[0], sh.apis[1]
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, token string, account staff.Account)
	}{
		{"logout", func(t *testing.T, token string, _ staff.Account) {
			if r := sh.do(t, a, "POST", "/admin/v1/auth/logout", token, nil); r.status != 204 {
				t.Fatalf("logout: %d %s", r.status, r.body)
			}
		}},
		{"revoked by an admin", func(t *testing.T, token string, _ staff.Account) {
			if r := sh.do(t, a, "POST", "/admin/v1/tokens/revoke", sh.admin, map[string]string{"token": token}); r.status != 204 && r.status != 200 {
				t.Fatalf("revoke: %d %s", r.status, r.body)
			}
		}},
		{"account disabled", func(t *testing.T, _ string, account staff.Account) {
			if r := sh.do(t, a, "DELETE", "/admin/v1/staff/"+account.ID, sh.admin, nil); r.status != 200 {
				t.Fatalf("disable: %d %s", r.status, r.body)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := strings.ReplaceAll("cook."+tc.name, " ", ".")
			account := sh.createStaff(t, user, "correct horse battery")
			token := sh.staffLogin(t, b, user, "correct horse battery").Token
			stream := openStream(t, b, sh.merchantID, token, "")
			if stream.status != 200 {
				t.Fatalf("stream: %d", stream.status)
			}
			tc.end(t, token, account)
			id := sh.paidOrder(t, "after-"+user)
			if r := sh.do(t, a, "POST", "/admin/v1/orders/"+id+"/accept", sh.admin, nil); r.status != 200 {
				t.Fatalf("accept: %d %s", r.status, r.body)
			}
			events, ended := stream.untilEnd(t, 10*time.Second)
			for _, ev := range events {
				t.Errorf("the stream carried %s %s after its token ended", ev.Event, ev.ID)
			}
			if !ended {
				t.Error("the stream closed without a stream.end event")
			}
			if again := openStream(t, b, sh.merchantID, token, ""); again.status != 401 {
				t.Errorf("reconnect: %d, want 401", again.status)
			}
		})
	}
	t.Run("expiry", func(t *testing.T) {
		r, _ := auth.ParseRole("merchant:" + sh.merchantID)
		token, _, err := sh.tokens.IssueStaff("short.lived", r, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		stream := openStream(t, b, sh.merchantID, token, "")
		if stream.status != 200 {
			t.Fatalf("stream: %d", stream.status)
		}
		if _, ended := stream.untilEnd(t, 10*time.Second); !ended {
			t.Error("the stream closed without a stream.end event")
		}
	})
}

// One merchant cannot take every stream of an instance: with room for 4,
// a token may open 2 and a merchant 3; the next is 429 with Retry-After,
// and another kitchen's board still connects and rings.
func TestStreamsPerMerchantAndToken(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, map[string]string{
		"TAKEOUT_STREAM_MAX": "4", "TAKEOUT_STREAM_MAX_PER_MERCHANT": "3", "TAKEOUT_STREAM_MAX_PER_TOKEN": "2",
	}, 1000)
	api := sh.apis[0]
	sh.createStaff(t, "greedy.one", "correct horse battery")
	sh.createStaff(t, "greedy.two", "correct horse battery")
	one := sh.staffLogin(t, api, "greedy.one", "correct horse battery").Token
	two := sh.staffLogin(t, api, "greedy.two", "correct horse battery").Token
	for i, tc := range []struct {
		token  string
		status int
	}{{one, 200}, {one, 200}, {one, 429}, {two, 200}, {two, 429}} {
		s := openStream(t, api, sh.merchantID, tc.token, "")
		if s.status != tc.status {
			t.Errorf("stream %d of the merchant: %d, want %d", i+1, s.status, tc.status)
		}
	}
	r := openStream(t, api, sh.merchantID, one, "")
	if r.status != 429 || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), `"rate-limited"`) {
		t.Errorf("a stream past the bounds: %d %q %s, want 429 rate-limited with Retry-After", r.status, r.header.Get("Retry-After"), r.body)
	}

	// Another kitchen still connects, and its new order rings.
	other := &shop{stack: sh.stack, apis: sh.apis, admin: sh.admin, merchantID: createMerchant(t, sh.stack, api, "Other Kitchen")}
	other.dishes = append(other.dishes, createDish(t, sh.stack, api, sh.admin, other.merchantID, "Other Soup", 1500, 100))
	other.createStaff(t, "other.cook", "correct horse battery")
	board := openStream(t, api, other.merchantID, other.staffLogin(t, api, "other.cook", "correct horse battery").Token, "")
	if board.status != 200 {
		t.Fatalf("another kitchen's board: %d, want 200", board.status)
	}
	id := other.paidOrder(t, "other-kitchen")
	if r := sh.do(t, api, "POST", "/admin/v1/orders/"+id+"/accept", sh.admin, nil); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	if ev := board.next(t, 10*time.Second); ev.Event != "order.accepted" || !strings.Contains(ev.Data, id) {
		t.Errorf("another kitchen's board got %+v, want order %s accepted", ev, id)
	}
}

// Logins racing the account's disabling never leave a working token:
// twenty logins, whose account reads come before their password checks,
// with the disable landing among them. Every login either fails (401, or
// 503 when the password checks cannot all be served within the request's
// deadline, as under the race detector) or gets a token that is refused
// once the disable has answered.
func TestLoginRacingDisable(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, map[string]string{"TAKEOUT_LOGIN_LIMIT_ACCOUNT": "0", "TAKEOUT_LOGIN_LIMIT_ADDRESS": "0"})
	api := sh.apis[0]
	for round := range 3 {
		user := fmt.Sprintf("racing.cook%d", round)
		account := sh.createStaff(t, user, "correct horse battery")
		const logins = 20
		tokens := make([]string, logins)
		var wg sync.WaitGroup
		for i := range logins {
			wg.Go(func() {
				r := sh.do(t, api, "POST", "/admin/v1/auth/login", "", map[string]string{"username": user, "password": "correct horse battery"})
				switch r.status {
				case 200:
					var s staff.Session
					r.json(t, &s)
					tokens[i] = s.Token
				case 401, 503:
				default:
					t.Errorf("login: %d %s", r.status, r.body)
				}
			})
		}
		time.Sleep(time.Duration(20*(round+1)) * time.Millisecond)
		if r := sh.do(t, api, "DELETE", "/admin/v1/staff/"+account.ID, sh.admin, nil); r.status != 200 {
			t.Fatalf("disable: %d %s", r.status, r.body)
		}
		wg.Wait()
		for i, tok := range tokens {
			if tok == "" {
				continue
			}
			if r := sh.do(t, api, "GET", "/admin/v1/merchants/"+sh.merchantID+"/staff", tok, nil); r.status != 401 {
				t.Errorf("round %d: login %d's token answers %d after the account was disabled, want 401", round, i, r.status)
			}
		}
	}
}

// rawRequest sends a request with the given headers (values as raw
// bytes) and returns the answer; a stream's 200 is closed at once.
func (s *stack) rawRequest(t *testing.T, inst *instance, method, path string, headers map[string]string, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, inst.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header[k] = []string{v}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return response{status: resp.StatusCode, header: resp.Header}
	}
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// Bytes that are not UTF-8, or control characters, in a path parameter or
// a header the service reads are 400, never a 500, and change nothing.
func TestInvalidTextInPathsAndHeaders(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	api := ps.apis[0]
	_, paid, _ := ps.paidOrder(t, "bytes")
	auth := "Bearer " + ps.admin
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		body               string
	}{
		{"Last-Event-ID FF FE", "GET", "/admin/v1/merchants/" + ps.merchantID + "/orders/stream", map[string]string{"Last-Event-Id": "\xff\xfe"}, ""},
		{"Last-Event-ID with a bidi override", "GET", "/admin/v1/merchants/" + ps.merchantID + "/orders/stream", map[string]string{"Last-Event-Id": "\u202e1"}, ""},
		{"refund retry %FF", "POST", "/admin/v1/refunds/%FF/retry", nil, `{"note":"n"}`},
		{"refund settle %00", "POST", "/admin/v1/refunds/%00/settle", nil, `{"note":"n"}`},
		{"refund settle %C3", "POST", "/admin/v1/refunds/%C3(/settle", nil, `{"note":"n"}`},
		{"order id %FF", "POST", "/admin/v1/orders/%FF/accept", nil, ``},
		{"idempotency key %FF", "GET", "/admin/v1/idempotency-keys/1/%FF", nil, ``},
		{"Idempotency-Key FF", "POST", "/admin/v1/orders/" + paid + "/refunds", map[string]string{"Idempotency-Key": "k\xff"}, `{"amount_fen":100,"reason":"r"}`},
		{"Authorization FF", "GET", "/admin/v1/orders", map[string]string{"Authorization": "Bearer \xff"}, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Authorization": auth}
			maps.Copy(h, tc.headers)
			r := ps.rawRequest(t, api, tc.method, tc.path, h, tc.body)
			if r.status != 400 || r.problemType() != "invalid-request" {
				t.Errorf("%d %s, want 400 invalid-request", r.status, r.body)
			}
		})
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds"); n != 0 {
		t.Errorf("%d refunds after refused requests", n)
	}
}

// Names need a visible character and hold no zero-width or bidi control
// characters; no text holds a bidi override. Each is refused naming the
// field, and nothing is written.
func TestInvisibleAndReversedTextIsRefused(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10)
	api := sh.apis[0]
	user := sh.login(t, "text")
	cart := func(name, detail string) map[string]any {
		c := sh.cart(1)
		c["address"] = map[string]string{"name": name, "phone": "13900139000", "detail": detail}
		return c
	}
	const rows = "SELECT (SELECT count(*) FROM dishes) + (SELECT count(*) FROM merchants) + (SELECT count(*) FROM categories)"
	before := sh.count(t, rows)
	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		field                     string
	}{
		{"a dish named only U+200B", "POST", "/admin/v1/merchants/" + sh.merchantID + "/dishes", sh.admin, map[string]any{"name": "\u200b", "price_fen": 100, "stock": 1}, "name"},
		{"a dish named with U+202E", "POST", "/admin/v1/merchants/" + sh.merchantID + "/dishes", sh.admin, map[string]any{"name": "Tea\u202eaeT", "price_fen": 100, "stock": 1}, "name"},
		{"a merchant named only a hangul filler", "POST", "/admin/v1/merchants", sh.admin, map[string]any{"name": "\u3164"}, "name"},
		{"a category with a zero-width space", "POST", "/admin/v1/merchants/" + sh.merchantID + "/categories", sh.admin, map[string]any{"name": "No\u200bodles"}, "name"},
		{"an address name with U+202E", "POST", "/v1/orders/confirm", user, cart("\u202eHan", "Unit 3"), "address.name"},
		{"an address name of spaces", "POST", "/v1/orders/confirm", user, cart("   ", "Unit 3"), "address.name"},
		{"an address detail with U+202E", "POST", "/v1/orders/confirm", user, cart("Han", "Unit \u202e3"), "address.detail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sh.do(t, api, tc.method, tc.path, tc.token, tc.body)
			var p struct {
				Field string `json:"field"`
			}
			r.json(t, &p)
			if r.status != 400 || r.problemType() != "invalid-request" || p.Field != tc.field {
				t.Errorf("%d %s, want 400 invalid-request naming %s", r.status, r.body, tc.field)
			}
		})
	}
	if after := sh.count(t, rows); after != before {
		t.Errorf("%d rows written by refused requests", after-before)
	}
	// Text a user needs still goes through: an emoji with a joiner, a
	// Persian word with a non-joiner, an address with an isolate.
	if d := createDish(t, sh.stack, api, sh.admin, sh.merchantID, "Chef 👨\u200d🍳 noodles", 100, 1); d.Name != "Chef 👨\u200d🍳 noodles" {
		t.Errorf("dish name %q", d.Name)
	}
	if r := sh.do(t, api, "POST", "/v1/orders/confirm", user, cart("می\u200cخواهم", "Unit \u20683\u2069")); r.status != 200 {
		t.Errorf("confirm with a Persian name and an isolate: %d %s", r.status, r.body)
	}
}

// An order's total has a ceiling (by default what one WeChat Pay payment
// takes): a cart above it is refused at confirm with above-maximum, and
// nothing is placed.
func TestOrderTotalHasACeiling(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil)
	api := sh.apis[0]
	for i := range 5 {
		sh.dishes = append(sh.dishes, createDish(t, sh.stack, api, sh.admin, sh.merchantID, fmt.Sprintf("Gold %d", i), 100_000_000, 1000))
	}
	user := sh.login(t, "big-spender")
	r := sh.do(t, api, "POST", "/v1/orders/confirm", user, sh.cart(99, 99, 99, 99, 99))
	var p struct {
		TotalFen    int64 `json:"total_fen"`
		MaxTotalFen int64 `json:"max_total_fen"`
	}
	r.json(t, &p)
	if r.status != 409 || r.problemType() != "above-maximum" || p.TotalFen != 49_500_000_500 || p.MaxTotalFen != 1_000_000_000 {
		t.Errorf("a 49,500,000,500 fen cart (with 500 delivery): %d %s, want 409 above-maximum naming both figures", r.status, r.body)
	}
	if r := sh.do(t, api, "POST", "/v1/orders/confirm", user, sh.cart(9)); r.status != 200 {
		t.Errorf("a 900,000,500 fen cart: %d %s, want 200", r.status, r.body)
	}
	if n := sh.count(t, "SELECT count(*) FROM orders"); n != 0 {
		t.Errorf("%d orders", n)
	}

	small := newShop(t, 1, map[string]string{"TAKEOUT_ORDER_MAX_TOTAL_FEN": "5000"}, 100)
	u := small.login(t, "configured")
	if r := small.do(t, small.apis[0], "POST", "/v1/orders/confirm", u, small.cart(5)); r.status != 409 || r.problemType() != "above-maximum" {
		t.Errorf("5500 fen under a 5000 fen ceiling: %d %s", r.status, r.body)
	}
	if r := small.do(t, small.apis[0], "POST", "/v1/orders/confirm", u, small.cart(4)); r.status != 200 {
		t.Errorf("4500 fen under a 5000 fen ceiling: %d %s", r.status, r.body)
	}
}

// WeChat Pay sends some error answers unsigned. Such an answer decides
// only what moves no money: a failed prepay is a 502 to retry (not a
// forgery), a close or query of what the platform never saw ends the
// closing, and a failing refund is retried. A refund's success answered
// unsigned is never applied; the same refund answered signed is, once.
func TestUnsignedErrorAnswers(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_JOB_RETRY_MAX_DELAY": "1s"}, 10)
	api := ps.apis[0]

	// Prepay, then the close and query of what never reached the platform.
	user := ps.login(t, "unsigned-prepay")
	o := ps.place(t, user, "unsigned-prepay", 1)
	ps.simConfig(t, `{"unsigned":"errors","failing":["prepay"]}`)
	if r := ps.do(t, api, "POST", "/v1/orders/"+o.ID+"/pay", user, nil); r.status != 502 || r.problemType() != "upstream-unavailable" {
		t.Fatalf("pay answered an unsigned SYSTEM_ERROR: %d %s, want 502 upstream-unavailable", r.status, r.body)
	}
	if r := ps.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", user, nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	waitUntil(t, "the attempt the platform never saw to be closed", func() bool {
		return ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'CLOSED'", o.ID) == 1
	})
	if logs := api.logs.String(); strings.Contains(logs, "not authentic") {
		t.Errorf("an unsigned error answer was logged as not authentic:\n%s", grepLines(logs, `{"time`))
	}

	// A refund whose API fails unsigned is retried; one whose success
	// comes unsigned is not applied.
	ps.simConfig(t, `{}`)
	_, paid, _ := ps.paidOrder(t, "unsigned-refund")
	ps.simConfig(t, `{"unsigned":"errors","failing":["refund","query_refund"]}`)
	if r := ps.doKey(t, api, "POST", "/admin/v1/orders/"+paid+"/refunds", ps.admin, "u-1", `{"amount_fen":100,"reason":"unsigned"}`); r.status != 201 {
		t.Fatalf("refund: %d %s", r.status, r.body)
	}
	waitUntil(t, "the refund job to have failed twice", func() bool {
		return ps.count(t, "SELECT count(*) FROM river_job WHERE kind = 'payment.refund' AND attempt >= 2") >= 1
	})
	ps.simConfig(t, `{"unsigned":"all","refund_at_once":true,"drop_refund_notifications":true}`)
	time.Sleep(3 * time.Second) // the job's retries meet unsigned SUCCESS answers
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", paid); n != 0 {
		t.Fatalf("a refund applied from an unsigned answer")
	}
	ps.simConfig(t, `{"refund_at_once":true}`)
	waitUntil(t, "the refund to succeed once answered signed", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS' AND amount_fen = 100", paid) == 1
	})
	if n := ps.count(t, "SELECT count(*) FROM river_job WHERE state = 'discarded'"); n != 0 {
		t.Errorf("%d jobs discarded", n)
	}
}

// Each bound on a request's work turns into 503 with Retry-After and
// nothing written, against a running instance, and a retry with the same
// key then succeeds once: the request deadline and lock_timeout while a
// row is held in another session, statement_timeout on a statement that
// runs too long, and idle_in_transaction_session_timeout on a transaction
// the server sees idle (its next statement held up on the way).
func TestTimeoutsAnswer503AndRetriesSucceedOnce(t *testing.T) {
	t.Parallel()
	// Each case sets one bound low and the others well above the 3 s a
	// held row stays held (or a slow link stays slow): without the bound
	// under test the request would succeed once the hold ends.
	generous := map[string]string{
		"TAKEOUT_HTTP_WRITE_TIMEOUT": "60s", "TAKEOUT_HTTP_REQUEST_TIMEOUT": "30s", "TAKEOUT_IDEMPOTENCY_INFLIGHT_TTL": "90s",
		"TAKEOUT_DATABASE_LOCK_TIMEOUT": "20s", "TAKEOUT_DATABASE_STATEMENT_TIMEOUT": "20s", "TAKEOUT_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": "20s",
	}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		holdRow  bool // hold the dish's stock rows in another session for 3 s
		slowLink bool // delay what the instance sends to PostgreSQL for 3 s
	}{
		{"request deadline", map[string]string{"TAKEOUT_HTTP_REQUEST_TIMEOUT": "1s"}, true, false},
		{"lock_timeout", map[string]string{"TAKEOUT_DATABASE_LOCK_TIMEOUT": "300ms"}, true, false},
		{"statement_timeout", map[string]string{"TAKEOUT_DATABASE_STATEMENT_TIMEOUT": "300ms"}, true, false},
		{"idle_in_transaction_session_timeout", map[string]string{"TAKEOUT_DATABASE_IDLE_IN_TRANSACTION_TIMEOUT": "150ms"}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t)
			env := maps.Clone(generous)
			maps.Copy(env, tc.env)
			var link *toxiproxy.Proxy
			if tc.slowLink {
				u, err := url.Parse(s.dbURL)
				if err != nil {
					t.Fatal(err)
				}
				srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
				link = toxiproxy.NewProxy(srv, "postgres", "127.0.0.1:0", u.Host)
				if err := link.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(link.Stop)
				u.Host = link.Listen
				env["TAKEOUT_DATABASE_URL"] = u.String()
			}
			api := s.start(t, env)
			admin := s.staffToken(t, "admin")
			d := createDish(t, s, api, admin, createMerchant(t, s, api, "Slow Kitchen"), "Tea", 500, 10)
			adjust := "/admin/v1/dishes/" + d.ID + "/stock/adjustments"
			onHand := func() int {
				return s.count(t, "SELECT stock FROM dishes_with_stock WHERE id = $1", d.ID)
			}

			ctx := context.Background()
			var release func()
			if tc.holdRow {
				blocker, err := s.pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := blocker.Exec(ctx, "SELECT 1 FROM dish_stock WHERE dish_id = $1 FOR UPDATE", d.ID); err != nil {
					t.Fatal(err)
				}
				release = func() { _ = blocker.Rollback(ctx) }
			}
			if tc.slowLink {
				if _, err := link.Toxics.AddToxicJson(strings.NewReader(`{"name":"slow","type":"latency","stream":"upstream","attributes":{"latency":400}}`)); err != nil {
					t.Fatal(err)
				}
				release = func() { _ = link.Toxics.RemoveToxic(ctx, "slow") }
			}
			held := time.AfterFunc(3*time.Second, release)
			r := s.doKey(t, api, "POST", adjust, admin, "bounded", `{"delta":3}`)
			if held.Stop() {
				release()
			}
			if r.status != 503 || r.header.Get("Retry-After") == "" || r.problemType() != "service-unavailable" {
				t.Errorf("bounded request: %d %s (Retry-After %q), want 503 service-unavailable with Retry-After", r.status, r.body, r.header.Get("Retry-After"))
			}
			// The server side finishes its rollback shortly after.
			time.Sleep(300 * time.Millisecond)
			if got := onHand(); got != 10 {
				t.Errorf("on hand %d after a refused adjustment, want 10", got)
			}
			if n := s.count(t, "SELECT count(*) FROM stock_adjustments WHERE dish_id = $1 AND kind = 'delta'", d.ID); n != 0 {
				t.Errorf("%d adjustments recorded by a refused request", n)
			}
			var retry response
			waitUntil(t, "the retry to be answered", func() bool {
				retry = s.doKey(t, api, "POST", adjust, admin, "bounded", `{"delta":3}`)
				return retry.status != 503
			})
			again := s.doKey(t, api, "POST", adjust, admin, "bounded", `{"delta":3}`)
			if retry.status != 201 || again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" || onHand() != 13 {
				t.Errorf("retries: %d %s, then %d (replayed %q); on hand %d, want 201, a replay, 13", retry.status, retry.body, again.status, again.header.Get("Idempotent-Replayed"), onHand())
			}
		})
	}
}

// Every operation's refusals are in the contract: a query string that
// does not parse (400), a missing token (401), a body that is not JSON
// (415) or is too large (413), each sent to every operation of
// api/openapi.yaml through the contract's checker, which fails an answer
// whose status or shape the contract does not document. None is a 5xx.
func TestEveryOperationsRefusalsAreDocumented(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_MAX_BODY_BYTES": "4096"}, 10)
	api := ps.apis[0]
	user := ps.login(t, "refusals")
	doc := testenv.OpenAPIDoc(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			t.Run(method+" "+path, func(t *testing.T) {
				target := pathParam.ReplaceAllLiteralString(path, "1")
				token := ""
				security := doc.Security
				if op.Security != nil {
					security = *op.Security
				}
				for _, req := range security {
					switch {
					case req["userToken"] != nil:
						token = user
					case req["staffToken"] != nil:
						token = ps.admin
					}
				}
				send := func(what, query, contentType, body, auth string, want ...int) {
					t.Helper()
					req, err := http.NewRequest(method, api.url+target+query, strings.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					if contentType != "" {
						req.Header.Set("Content-Type", contentType)
					}
					if auth != "" {
						req.Header.Set("Authorization", "Bearer "+auth)
					}
					req.Header.Set("Idempotency-Key", "refusals")
					resp, err := ps.client.Do(req) // the contract checks the answer
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					resp.Body.Close()
					if resp.StatusCode >= 500 || (len(want) > 0 && !slices.Contains(want, resp.StatusCode)) {
						t.Errorf("%s: %d, want one of %v", what, resp.StatusCode, want)
					}
				}
				if strings.HasSuffix(path, "/orders/stream") {
					// A stream that opened would not end: only what it refuses.
					send("a malformed query", "?x=%zz", "", "", token, 400)
					send("no token", "", "", "", "", 401)
					return
				}
				send("a malformed query", "?x=%zz", "application/json", "{}", token, 400)
				if token != "" {
					send("no token", "", "application/json", "{}", "", 401)
				}
				switch {
				case strings.HasPrefix(path, "/v1/payments/"):
					// Signature first: the v3 callback refuses these as
					// unsigned (401), the v2 one by what they are.
					send("a body that is not JSON", "", "text/plain", "x", token)
					send("a body too large", "", "application/json", `{"x":"`+strings.Repeat("x", 5000)+`"}`, token, 413, 415)
				case strings.HasPrefix(path, "/v1/couriers/"):
					// The provider first (404 while it is off here), then
					// what it sends: the body's size, then its signature.
					send("a body that is not JSON", "", "text/plain", "x", token, 401, 404)
					send("a body too large", "", "application/json", `{"x":"`+strings.Repeat("x", 5000)+`"}`, token, 413, 404)
				case op.RequestBody != nil && op.RequestBody.Value.Content.Get("application/json") != nil:
					send("a body that is not JSON", "", "text/plain", "x", token, 415)
					send("a body too large", "", "application/json", `{"x":"`+strings.Repeat("x", 5000)+`"}`, token, 413)
				}
			})
		}
	}
}
