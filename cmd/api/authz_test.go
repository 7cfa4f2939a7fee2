package main

import (
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/auth"
)

// Every admin route against every kind of caller. Nothing changes unless
// the caller may do it: anonymous callers, user session tokens, forged,
// tampered and expired staff tokens never get in, and merchant staff
// reach only their own merchant.
func TestAdminAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, nil)
	admin := s.staffToken(t, "admin")
	midA := createMerchant(t, s, api, "Merchant A")
	midB := createMerchant(t, s, api, "Merchant B")
	dishA := createDish(t, s, api, admin, midA, "A dish", 1000, 10)
	dishB := createDish(t, s, api, admin, midB, "B dish", 1000, 10)

	var login struct {
		Token string `json:"token"`
	}
	s.do(t, api, "POST", "/v1/auth/wx-login", "", map[string]string{"code": "matrix-user"}).json(t, &login)
	expired, _, err := auth.NewTokens([]byte(s.env["TAKEOUT_SESSION_SECRET"]), []byte(s.env["TAKEOUT_STAFF_SECRET"]), time.Hour,
		func() time.Time { return time.Now().Add(-48 * time.Hour) }).IssueStaff("old", auth.Role{Admin: true}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	forged, _, _ := auth.NewTokens([]byte(strings.Repeat("x", 32)), []byte(strings.Repeat("y", 32)), time.Hour, time.Now).
		IssueStaff("mallory", auth.Role{Admin: true}, time.Hour)
	tampered := tamper(s.staffToken(t, "merchant:"+midA))

	callers := []struct {
		name  string
		token string
	}{
		{"anonymous", ""},
		{"user", login.Token},
		{"expired admin", expired},
		{"forged admin", forged},
		{"tampered staff", tampered},
		{"merchant B staff", s.staffToken(t, "merchant:"+midB)},
		{"merchant A staff", s.staffToken(t, "merchant:"+midA)},
		{"admin", admin},
	}
	type route struct {
		method, path string
		body         any
		// want is the status per caller name; unlisted callers get 401.
		want map[string]int
	}
	// Bodies carry a stale version where they change something, so that
	// an allowed caller gets 409 and nothing changes: the matrix proves who
	// gets past authorization, not what the change does.
	staleMerchant := map[string]any{"version": 99, "status": "closed"}
	staleDish := map[string]any{"version": 99, "price_fen": 1}
	staleStock := map[string]any{"on_hand": 0, "if_on_hand": 99}
	routes := []route{
		{"POST", "/admin/v1/merchants", map[string]any{"name": ""}, map[string]int{"merchant B staff": 403, "merchant A staff": 403, "admin": 400}},
		{"PATCH", "/admin/v1/merchants/" + midA, staleMerchant, map[string]int{"merchant B staff": 403, "merchant A staff": 409, "admin": 409}},
		{"GET", "/admin/v1/merchants/" + midA + "/dishes", nil, map[string]int{"merchant B staff": 403, "merchant A staff": 200, "admin": 200}},
		{"POST", "/admin/v1/merchants/" + midA + "/dishes", map[string]any{"name": "A dish", "price_fen": 1, "stock": 1}, map[string]int{"merchant B staff": 403, "merchant A staff": 409, "admin": 409}},
		{"GET", "/admin/v1/dishes/" + dishA.ID, nil, map[string]int{"merchant B staff": 403, "merchant A staff": 200, "admin": 200}},
		{"PATCH", "/admin/v1/dishes/" + dishA.ID, staleDish, map[string]int{"merchant B staff": 403, "merchant A staff": 409, "admin": 409}},
		{"PUT", "/admin/v1/dishes/" + dishA.ID + "/stock", staleStock, map[string]int{"merchant B staff": 403, "merchant A staff": 409, "admin": 409}},
		{"PATCH", "/admin/v1/dishes/" + dishB.ID, staleDish, map[string]int{"merchant B staff": 409, "merchant A staff": 403, "admin": 409}},
		{"GET", "/admin/v1/idempotency-keys/1/nokey", nil, map[string]int{"merchant B staff": 403, "merchant A staff": 403, "admin": 404}},
		{"GET", "/admin/v1/orders", nil, map[string]int{"merchant B staff": 200, "merchant A staff": 200, "admin": 200}},
		{"GET", "/admin/v1/orders?merchant_id=" + midA, nil, map[string]int{"merchant B staff": 403, "merchant A staff": 200, "admin": 200}},
		{"POST", "/admin/v1/orders/999999/accept", nil, map[string]int{"merchant B staff": 404, "merchant A staff": 404, "admin": 404}},
		{"POST", "/admin/v1/orders/999999/refund", nil, map[string]int{"merchant B staff": 404, "merchant A staff": 404, "admin": 404}},
		{"GET", "/admin/v1/jobs/dead", nil, map[string]int{"merchant B staff": 403, "merchant A staff": 403, "admin": 200}},
		{"POST", "/admin/v1/jobs/999999/retry", nil, map[string]int{"merchant B staff": 403, "merchant A staff": 403, "admin": 404}},
		{"DELETE", "/admin/v1/idempotency-keys/1/nokey", nil, map[string]int{"merchant B staff": 403, "merchant A staff": 403, "admin": 404}},
	}
	before := snapshot(t, s)
	for _, rt := range routes {
		for _, c := range callers {
			want, ok := rt.want[c.name]
			if !ok {
				want = 401
			}
			r := s.do(t, api, rt.method, rt.path, c.token, rt.body)
			if r.status != want {
				t.Errorf("%s %s as %s: %d %s, want %d", rt.method, rt.path, c.name, r.status, r.body, want)
			}
		}
	}
	if after := snapshot(t, s); after != before {
		t.Errorf("the catalog changed:\nbefore %s\nafter  %s", before, after)
	}
}

// snapshot renders the whole catalog, to show that nothing changed.
func snapshot(t *testing.T, s *stack) string {
	t.Helper()
	pool := s.db(t)
	var out string
	err := pool.QueryRow(t.Context(), `SELECT
		(SELECT coalesce(string_agg(format('%s:%s:%s:%s', id, name, status, version), ',' ORDER BY id), '') FROM merchants) || '|' ||
		(SELECT coalesce(string_agg(format('%s:%s:%s:%s:%s:%s:%s:%s:%s:%s:%s', id, name, price_fen, stock, on_sale, version,
			category_id, position, image_url, packaging_fee_fen, options_version), ',' ORDER BY id), '') FROM dishes_with_stock) || '|' ||
		(SELECT coalesce(string_agg(format('%s:%s:%s:%s', id, merchant_id, name, version), ',' ORDER BY id), '') FROM categories) || '|' ||
		(SELECT coalesce(string_agg(format('%s:%s:%s:%s:%s', g.id, g.dish_id, g.name, c.id, c.name), ',' ORDER BY c.id), '')
		 FROM option_groups g JOIN option_choices c ON c.group_id = g.id)`).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tamper flips one character of the token's payload (its middle part).
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	p := []byte(parts[1])
	if p[5] == 'A' {
		p[5] = 'B'
	} else {
		p[5] = 'A'
	}
	parts[1] = string(p)
	return strings.Join(parts, ".")
}
