package main

// End-to-end regressions of issue "Trust, round three", each as the user
// (or the hostile tester) would see it.

import (
	"fmt"
	"maps"
	"testing"

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
// replays under it: the same key and body, sent again to another
// instance, answer the first 201 byte for byte with Idempotent-Replayed:
// true and create nothing more. A creating route added to the contract
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
	cases := map[string]creatingCase{
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
			before := tc.made()
			first := ps.doKey(t, ps.apis[0], "POST", tc.path, tc.token, "walk-"+path, tc.body)
			if first.status != 201 || first.header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("first: %d %s (replayed %q), want a fresh 201", first.status, first.body, first.header.Get("Idempotent-Replayed"))
			}
			for _, api := range []*instance{ps.apis[0], other} {
				r := ps.doKey(t, api, "POST", tc.path, tc.token, "walk-"+path, tc.body)
				if r.status != 201 || string(r.body) != string(first.body) || r.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("retry: %d %s (replayed %q), want the first 201 replayed", r.status, r.body, r.header.Get("Idempotent-Replayed"))
				}
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
