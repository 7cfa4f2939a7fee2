package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/catalog"
	shopdelivery "github.com/takeout/takeout/internal/delivery"
	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/hours"
)

func TestHealthReadinessMetrics(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, nil)

	if r := s.do(t, api, "GET", "/healthz", "", nil); r.status != 200 {
		t.Fatalf("healthz: %d", r.status)
	}
	var ready struct {
		Ready       bool     `json:"ready"`
		Postgres    string   `json:"postgres"`
		Redis       string   `json:"redis"`
		Breaker     string   `json:"redis_breaker"`
		Constraints []string `json:"constraints"`
		Migrations  struct{ Current, Target int64 }
	}
	// Redis health is probed in the background: wait for the first probe.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := s.do(t, api, "GET", "/readyz", "", nil)
		r.json(t, &ready)
		if ready.Redis == "up" || time.Now().After(deadline) {
			if r.status != 200 {
				t.Fatalf("readyz: %d %s", r.status, r.body)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !ready.Ready || ready.Postgres != "up" || ready.Redis != "up" || ready.Breaker != "closed" || len(ready.Constraints) != 0 ||
		ready.Migrations.Current == 0 || ready.Migrations.Current != ready.Migrations.Target {
		t.Errorf("readyz = %+v", ready)
	}

	s.do(t, api, "GET", "/v1/merchants/123/menu", "", nil)
	if r := s.do(t, api, "GET", "/metrics", "", nil); r.status != 404 {
		t.Errorf("/metrics on the public listener: %d, want 404", r.status)
	}
	r := response{body: []byte(s.metrics(t, api))}
	for _, want := range []string{
		`takeout_http_request_duration_seconds_count{code="200",method="GET",route="/healthz"} 1`,
		`takeout_http_request_duration_seconds_count{code="404",method="GET",route="/v1/merchants/{id}/menu"} 1`,
		`takeout_redis_degraded 0`,
	} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if !strings.Contains(api.logs.String(), `"request_id"`) {
		t.Error("request logs carry no request_id")
	}
}

// Redis is optional: disabled or unreachable, the service starts, is
// ready, says so, and serves the catalog.
func TestRunsWithoutRedis(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]string{"disabled": "", "unreachable": "redis://127.0.0.1:1/0"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t)
			api := s.start(t, map[string]string{"TAKEOUT_REDIS_URL": url})
			want := map[string]string{"disabled": "disabled", "unreachable": "down"}[name]
			var ready struct {
				Ready bool   `json:"ready"`
				Redis string `json:"redis"`
			}
			r := s.do(t, api, "GET", "/readyz", "", nil)
			r.json(t, &ready)
			if r.status != 200 || !ready.Ready || ready.Redis != want {
				t.Errorf("readyz = %d %s, want ready with redis %q", r.status, r.body, want)
			}
			m := response{body: []byte(s.metrics(t, api))}
			if !bytes.Contains(m.body, []byte("takeout_redis_degraded 1")) {
				t.Error("takeout_redis_degraded is not 1")
			}
			mid := createMerchant(t, s, api, "No Redis Diner")
			if r := s.do(t, api, "GET", "/v1/merchants/"+mid+"/menu", "", nil); r.status != 200 {
				t.Errorf("menu: %d %s", r.status, r.body)
			}
		})
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, nil)

	var first, again struct {
		Token     string    `json:"token"`
		UserID    string    `json:"user_id"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	r := s.do(t, api, "POST", "/v1/auth/wx-login", "", map[string]string{"code": "alice"})
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	r.json(t, &first)
	if first.Token == "" || first.UserID == "" || time.Until(first.ExpiresAt) < 23*time.Hour {
		t.Errorf("login answer %+v", first)
	}
	uid, err := s.tokens.VerifyUser(first.Token)
	if err != nil || fmt.Sprint(uid) != first.UserID {
		t.Errorf("token verifies to %d, %v; want user %s", uid, err, first.UserID)
	}
	// The same WeChat user logging in again is the same user.
	s.do(t, api, "POST", "/v1/auth/wx-login", "", map[string]string{"code": "alice"}).json(t, &again)
	if again.UserID != first.UserID {
		t.Errorf("second login: user %s, want %s", again.UserID, first.UserID)
	}
	if n := s.count(t, "SELECT count(*) FROM users WHERE openid = 'sim-alice'"); n != 1 {
		t.Errorf("%d users for sim-alice, want 1", n)
	}

	tests := []struct {
		name       string
		body       any
		wantStatus int
		wantType   string
	}{
		{"rejected code", map[string]string{"code": "invalid"}, 401, "login-failed"},
		{"empty code", map[string]string{"code": ""}, 400, "invalid-request"},
		{"missing code", map[string]string{}, 400, "invalid-request"},
		{"code too long", map[string]string{"code": strings.Repeat("x", 129)}, 400, "invalid-request"},
		{"unknown field", `{"code":"bob","extra":1}`, 400, "invalid-request"},
		{"wrong type", `{"code":42}`, 400, "invalid-request"},
	}
	for _, tt := range tests {
		r := s.do(t, api, "POST", "/v1/auth/wx-login", "", tt.body)
		if r.status != tt.wantStatus || r.problemType() != tt.wantType {
			t.Errorf("%s: %d %s, want %d %s", tt.name, r.status, r.body, tt.wantStatus, tt.wantType)
		}
	}
	if n := s.count(t, "SELECT count(*) FROM users"); n != 1 {
		t.Errorf("%d users after failed logins, want 1", n)
	}
}

func TestLoginWhenWeChatIsDown(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, map[string]string{"TAKEOUT_WECHAT_API_BASE": "http://127.0.0.1:1", "TAKEOUT_WECHAT_TIMEOUT": "1s"})
	r := s.do(t, api, "POST", "/v1/auth/wx-login", "", map[string]string{"code": "carol"})
	if r.status != 502 || r.problemType() != "upstream-unavailable" {
		t.Errorf("login with WeChat down: %d %s", r.status, r.body)
	}
	if strings.Contains(api.logs.String(), testAppSecret) {
		t.Error("the app secret appears in the logs")
	}
}

// A wrong app secret is our misconfiguration, not the user's fault.
func TestLoginWithWrongAppSecret(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, map[string]string{"TAKEOUT_WECHAT_APP_SECRET": "not-the-secret"})
	r := s.do(t, api, "POST", "/v1/auth/wx-login", "", map[string]string{"code": "dave"})
	if r.status != 502 || r.problemType() != "upstream-unavailable" {
		t.Errorf("login with a wrong app secret: %d %s", r.status, r.body)
	}
}

// After a price change through instance 1, instance 2 serves the new price
// once the invalidation arrives (its cache TTL is an hour).
func TestTwoInstancesSeePriceChange(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api1 := s.start(t, nil)
	api2 := s.start(t, nil)
	admin := s.staffToken(t, "admin")
	mid := createMerchant(t, s, api1, "Twin Kitchen")
	d := createDish(t, s, api1, admin, mid, "Wonton Soup", 1800, 20)

	menuPrice := func(api *instance) int64 {
		var m catalog.Menu
		r := s.do(t, api, "GET", "/v1/merchants/"+mid+"/menu", "", nil)
		if r.status != 200 {
			t.Fatalf("menu: %d %s", r.status, r.body)
		}
		r.json(t, &m)
		return m.Dishes[0].PriceFen
	}
	if p := menuPrice(api2); p != 1800 {
		t.Fatalf("instance 2 price %d, want 1800", p)
	}
	r := s.do(t, api1, "PATCH", "/admin/v1/dishes/"+d.ID, admin, map[string]any{"version": d.Version, "price_fen": 2100})
	if r.status != 200 {
		t.Fatalf("price change: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for menuPrice(api2) != 2100 {
		if time.Now().After(deadline) {
			t.Fatal("instance 2 still serves the old price 10s after the change")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Concurrent admin updates through the API never lose one: the loser of
// each race gets 409 with the current version.
func TestConcurrentDishUpdatesOverHTTP(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, nil)
	admin := s.staffToken(t, "admin")
	mid := createMerchant(t, s, api, "Race Kitchen")
	d := createDish(t, s, api, admin, mid, "Fried Rice", 1000, 0)

	const writers = 10
	results := make(chan response, writers)
	for i := range writers {
		go func() {
			results <- s.do(t, api, "PATCH", "/admin/v1/dishes/"+d.ID, admin, map[string]any{"version": d.Version, "price_fen": 1001 + i})
		}()
	}
	ok, conflicts := 0, 0
	for range writers {
		r := <-results
		switch {
		case r.status == 200:
			ok++
		case r.status == 409 && r.problemType() == "version-conflict":
			conflicts++
			var p struct {
				CurrentVersion int64 `json:"current_version"`
			}
			r.json(t, &p)
			if p.CurrentVersion != d.Version+1 {
				t.Errorf("current_version %d, want %d", p.CurrentVersion, d.Version+1)
			}
		default:
			t.Errorf("unexpected answer %d %s", r.status, r.body)
		}
	}
	if ok != 1 || conflicts != writers-1 {
		t.Errorf("%d succeeded, %d conflicted; want 1 and %d", ok, conflicts, writers-1)
	}
	if v := s.count(t, "SELECT version FROM dishes WHERE id = $1", d.ID); v != int(d.Version)+1 {
		t.Errorf("version %d, want %d", v, d.Version+1)
	}
}

func TestMigrateSeedAndTokenCommands(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.env["TAKEOUT_DATABASE_URL"] = testenvEmptyDB(t)
	getenv := func(k string) string { return s.env[k] }
	ctx := context.Background()

	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"migrate"}, getenv, &out, &errOut); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "required constraints valid") {
		t.Errorf("migrate said %q", out.String())
	}
	var ids []string
	for range 2 {
		out.Reset()
		if err := run(ctx, []string{"seed-demo"}, getenv, &out, &errOut); err != nil {
			t.Fatalf("seed-demo: %v", err)
		}
		ids = append(ids, strings.TrimSpace(out.String()))
	}
	if ids[0] == "" || ids[0] != ids[1] {
		t.Errorf("seed-demo ids %q: want one id, twice", ids)
	}

	out.Reset()
	if err := run(ctx, []string{"token", "-role", "merchant:" + ids[0], "-subject", "chef"}, getenv, &out, &errOut); err != nil {
		t.Fatalf("token: %v", err)
	}
	staff, err := s.tokens.VerifyStaff(strings.TrimSpace(out.String()))
	if err != nil || staff.Role.String() != "merchant:"+ids[0] || staff.Subject != "chef" {
		t.Errorf("token verifies to %+v, %v", staff, err)
	}
	if err := run(ctx, []string{"token", "-role", "chef"}, getenv, &out, &errOut); err == nil {
		t.Error("token with a bad role succeeded")
	}

	api := s.start(t, map[string]string{"TAKEOUT_MIGRATE_ON_START": "false"})
	var menu catalog.Menu
	s.do(t, api, "GET", "/v1/merchants/"+ids[0]+"/menu", "", nil).json(t, &menu)
	if menu.Merchant.Name != demoMerchant || len(menu.Dishes) != 5 {
		t.Errorf("demo menu: %+v", menu)
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tests := []struct {
		name string
		set  map[string]string
		want string
	}{
		{"bad duration", map[string]string{"TAKEOUT_HTTP_READ_TIMEOUT": "soon"}, "TAKEOUT_HTTP_READ_TIMEOUT"},
		{"bad number", map[string]string{"TAKEOUT_MAX_BODY_BYTES": "lots"}, "TAKEOUT_MAX_BODY_BYTES"},
		{"small body limit", map[string]string{"TAKEOUT_MAX_BODY_BYTES": "10"}, "TAKEOUT_MAX_BODY_BYTES"},
		{"bad bool", map[string]string{"TAKEOUT_MIGRATE_ON_START": "perhaps"}, "TAKEOUT_MIGRATE_ON_START"},
		{"no session secret", map[string]string{"TAKEOUT_SESSION_SECRET": ""}, "TAKEOUT_SESSION_SECRET"},
		{"short staff secret", map[string]string{"TAKEOUT_STAFF_SECRET": "short"}, "TAKEOUT_STAFF_SECRET"},
		{"bad redis url", map[string]string{"TAKEOUT_REDIS_URL": "http://x"}, "TAKEOUT_REDIS_URL"},
		{"bad log level", map[string]string{"TAKEOUT_LOG_LEVEL": "loud"}, "TAKEOUT_LOG_LEVEL"},
		{"bad addr", map[string]string{"TAKEOUT_HTTP_ADDR": "8080"}, "TAKEOUT_HTTP_ADDR"},
		{"tiny gc percent", map[string]string{"TAKEOUT_GC_PERCENT": "1"}, "TAKEOUT_GC_PERCENT"},
		{"tiny memory limit", map[string]string{"TAKEOUT_MEMORY_LIMIT": "1000"}, "TAKEOUT_MEMORY_LIMIT"},
		{"missing secret file", map[string]string{"TAKEOUT_SESSION_SECRET": "", "TAKEOUT_SESSION_SECRET_FILE": "/nonexistent/secret"}, "TAKEOUT_SESSION_SECRET_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range s.env {
				env[k] = v
			}
			for k, v := range tt.set {
				env[k] = v
			}
			err := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %s", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), s.env["TAKEOUT_STAFF_SECRET"]) {
				t.Error("the error shows a secret")
			}
		})
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, nil)
	if r := s.do(t, api, "GET", "/v1/nothing-here", "", nil); r.status != 404 || r.problemType() != "not-found" {
		t.Errorf("unknown route: %d %s", r.status, r.body)
	}
	if r := s.do(t, api, "DELETE", "/v1/merchants", "", nil); r.status != 405 || r.problemType() != "method-not-allowed" {
		t.Errorf("wrong method: %d %s", r.status, r.body)
	}
	if r := s.do(t, api, "GET", "/v1/merchants/abc/menu", "", nil); r.status != 404 || r.problemType() != "not-found" {
		t.Errorf("non-numeric id: %d %s", r.status, r.body)
	}
}

func TestRequestIDIsEchoed(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, nil)
	req, _ := http.NewRequest("GET", api.url+"/healthz", nil)
	req.Header.Set("X-Request-Id", "trace-abc-123")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Request-Id"); got != "trace-abc-123" {
		t.Errorf("X-Request-Id = %q", got)
	}
	r := s.do(t, api, "GET", "/healthz", "", nil)
	if len(r.header.Get("X-Request-Id")) != 24 {
		t.Errorf("generated request id %q", r.header.Get("X-Request-Id"))
	}
}

// createMerchant creates a merchant as admin and returns its id.
func createMerchant(t testing.TB, s *stack, api *instance, name string) string {
	t.Helper()
	var m catalog.Merchant
	r := s.do(t, api, "POST", "/admin/v1/merchants", s.staffToken(t, "admin"), map[string]any{"name": name, "delivery_fee_fen": 500})
	if r.status != 201 {
		t.Fatalf("create merchant: %d %s", r.status, r.body)
	}
	r.json(t, &m)
	want := catalog.Merchant{Name: name, Status: "open", DeliveryFeeFen: 500, DeliveryBands: []shopdelivery.Band{}, TimeZone: "Asia/Shanghai",
		Hours: []hours.PeriodJSON{}, ClosedDates: []string{}, AcceptWithinSeconds: 300, AcceptTimeoutAction: "reject",
		Fulfilment: fulfilment.Rules{Delivery: true}, Version: 1}
	if diff := cmp.Diff(want, m,
		cmpIgnore("ID", "CreatedAt", "UpdatedAt")); diff != "" {
		t.Errorf("created merchant (-want +got):\n%s", diff)
	}
	return m.ID
}

func createDish(t testing.TB, s *stack, api *instance, token, merchantID, name string, price int64, stock int32) catalog.Dish {
	t.Helper()
	var d catalog.Dish
	r := s.do(t, api, "POST", "/admin/v1/merchants/"+merchantID+"/dishes", token, map[string]any{"name": name, "price_fen": price, "stock": stock})
	if r.status != 201 {
		t.Fatalf("create dish: %d %s", r.status, r.body)
	}
	r.json(t, &d)
	return d
}
