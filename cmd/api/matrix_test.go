package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/testenv"
)

// The callers of the authorization matrix, in order.
var matrixCallers = []string{"anonymous", "user A", "user B", "merchant A staff", "merchant B staff", "admin", "expired token", "tampered token"}

// cells builds a row: one expected status per caller, in matrixCallers order.
func cells(anon, userA, userB, staffA, staffB, admin, expired, tampered int) []int {
	return []int{anon, userA, userB, staffA, staffB, admin, expired, tampered}
}

func everyone(code int) []int { return cells(code, code, code, code, code, code, code, code) }

// userOnly: only user session tokens get in.
func userOnly(userA, userB int) []int { return cells(401, userA, userB, 401, 401, 401, 401, 401) }

// staffOnly: only staff tokens get in.
func staffOnly(staffA, staffB, admin int) []int {
	return cells(401, 401, 401, staffA, staffB, admin, 401, 401)
}

// Every route of api/openapi.yaml against every kind of caller; a route
// without a row here fails the test, so new routes must declare who may
// reach them.
func TestAuthorizationMatrixCoversEveryRoute(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 50)
	api := sh.apis[0]
	userA, userB := sh.login(t, "matrix-a"), sh.login(t, "matrix-b")
	staffA := sh.staffToken(t, "merchant:"+sh.merchantID)
	otherMerchant := createMerchant(t, sh.stack, api, "Matrix B")
	staffB := sh.staffToken(t, "merchant:"+otherMerchant)
	expired, _, _ := auth.NewTokens([]byte(sh.env["TAKEOUT_SESSION_SECRET"]), []byte(sh.env["TAKEOUT_STAFF_SECRET"]), time.Hour,
		func() time.Time { return time.Now().Add(-48 * time.Hour) }).IssueStaff("old", auth.Role{Admin: true}, time.Hour)
	tokens := map[string]string{
		"anonymous": "", "user A": userA, "user B": userB, "merchant A staff": staffA, "merchant B staff": staffB,
		"admin": sh.admin, "expired token": expired, "tampered token": tamper(userA),
	}
	orderA := sh.place(t, userA, "matrix-1", 1)
	cancelMe := sh.place(t, userA, "matrix-2", 2)
	// Before the confirm: a promotion's create moves the merchant's quote.
	promo := sh.promotionOf(t, sh.admin, map[string]any{"name": "Matrix"})
	confirm := sh.confirm(t, api, userA, sh.cart(3))
	dish := sh.dishes[0]
	uid := orderA.UserID
	var category catalog.Category
	if r := sh.do(t, api, "POST", "/admin/v1/merchants/"+sh.merchantID+"/categories", sh.admin, map[string]any{"name": "Matrix"}); r.status != 201 {
		t.Fatalf("create category: %d %s", r.status, r.body)
	} else {
		r.json(t, &category)
	}

	var tpl struct {
		ID string `json:"id"`
	}
	if r := sh.do(t, api, "POST", "/admin/v1/voucher-templates", sh.admin, map[string]any{
		"merchant_id": sh.merchantID, "name": "Matrix", "amount_fen": 100, "funded_by": "merchant",
		"claim_from": time.Now().Add(-time.Hour).Format(time.RFC3339), "claim_until": time.Now().Add(time.Hour).Format(time.RFC3339),
		"valid_days": 1, "budget": 10,
	}); r.status != 201 {
		t.Fatalf("create voucher template: %d %s", r.status, r.body)
	} else {
		r.json(t, &tpl)
	}
	var printer struct {
		ID string `json:"id"`
	}
	if r := sh.do(t, api, "POST", "/admin/v1/merchants/"+sh.merchantID+"/printers", sh.admin,
		map[string]any{"name": "Matrix", "provider": "feie", "device": "MATRIX1", "role": "receipt"}); r.status != 201 {
		t.Fatalf("create printer: %d %s", r.status, r.body)
	} else {
		r.json(t, &printer)
	}
	promoBody := `{"kind":"spend_save","name":"Matrix","funded_by":"merchant","tiers":[{"threshold_fen":3000,"off_fen":500}]}`
	otherTemplate := `{"merchant_id":"` + otherMerchant + `","name":"Matrix","amount_fen":100,"funded_by":"merchant","claim_from":"2026-01-01T00:00:00Z","claim_until":"2026-01-02T00:00:00Z","valid_days":1,"budget":1}`

	cart := `{"merchant_id":"` + sh.merchantID + `","items":[{"dish_id":"` + dish.ID + `","qty":4}],"address":{"name":"M","phone":"13800000000","detail":"d"}}`
	type row struct {
		path, body string
		headers    map[string]string
		want       []int
	}
	// Bodies and targets keep allowed callers from changing anything that
	// later cells rely on: stale versions, invalid names, pending orders.
	rows := map[string]row{
		"GET /healthz":                        {"/healthz", "", nil, everyone(200)},
		"GET /readyz":                         {"/readyz", "", nil, everyone(200)},
		"POST /v1/auth/wx-login":              {"/v1/auth/wx-login", `{"code":"matrix-login"}`, nil, everyone(200)},
		"GET /v1/merchants":                   {"/v1/merchants", "", nil, everyone(200)},
		"GET /v1/merchants/{id}/menu":         {"/v1/merchants/" + sh.merchantID + "/menu", "", nil, everyone(200)},
		"GET /v1/merchants/{id}/slots":        {"/v1/merchants/" + sh.merchantID + "/slots", "", nil, everyone(200)},
		"POST /v1/orders/confirm":             {"/v1/orders/confirm", cart, nil, userOnly(200, 200)},
		"POST /v1/auth/logout":                {"/v1/auth/logout", "", nil, userOnly(204, 204)},
		"POST /v1/orders":                     {"/v1/orders", `{"confirm_token":"` + confirm.ConfirmToken + `"}`, map[string]string{"Idempotency-Key": "matrix-submit"}, userOnly(201, 403)},
		"GET /v1/orders":                      {"/v1/orders", "", nil, userOnly(200, 200)},
		"GET /v1/orders/{id}":                 {"/v1/orders/" + orderA.ID, "", nil, userOnly(200, 404)},
		"POST /v1/orders/{id}/cancel":         {"/v1/orders/" + cancelMe.ID + "/cancel", "", nil, userOnly(200, 404)},
		"POST /v1/orders/{id}/pay":            {"/v1/orders/" + orderA.ID + "/pay", "", nil, userOnly(503, 503)},    // payments off in this stack
		"POST /v1/payments/wechat/notify":     {"/v1/payments/wechat/notify", `{}`, nil, everyone(503)},             // signature, not tokens; off here
		"POST /v1/payments/wechat/notify/v2":  {"/v1/payments/wechat/notify/v2", `<xml></xml>`, nil, everyone(200)}, // XML FAIL reply
		"POST /admin/v1/merchants":            {"/admin/v1/merchants", `{"name":""}`, nil, staffOnly(403, 403, 400)},
		"PATCH /admin/v1/merchants/{id}":      {"/admin/v1/merchants/" + sh.merchantID, `{"version":99,"status":"closed"}`, nil, staffOnly(409, 403, 409)},
		"GET /admin/v1/merchants/{id}/dishes": {"/admin/v1/merchants/" + sh.merchantID + "/dishes", "", nil, staffOnly(200, 403, 200)},
		"POST /admin/v1/merchants/{id}/dishes": {"/admin/v1/merchants/" + sh.merchantID + "/dishes", `{"name":"` + dish.Name + `","price_fen":1,"stock":1}`, nil,
			staffOnly(409, 403, 409)},
		"GET /admin/v1/merchants/{id}/categories":  {"/admin/v1/merchants/" + sh.merchantID + "/categories", "", nil, staffOnly(200, 403, 200)},
		"POST /admin/v1/merchants/{id}/categories": {"/admin/v1/merchants/" + sh.merchantID + "/categories", `{"name":"Matrix"}`, nil, staffOnly(409, 403, 409)},
		"PATCH /admin/v1/categories/{id}":          {"/admin/v1/categories/" + category.ID, `{"version":99,"name":"x"}`, nil, staffOnly(409, 403, 409)},
		"DELETE /admin/v1/categories/{id}":         {"/admin/v1/categories/" + category.ID + "?version=99", "", nil, staffOnly(409, 403, 409)},
		"PUT /admin/v1/dishes/{id}/options":        {"/admin/v1/dishes/" + dish.ID + "/options", `{"version":99,"groups":[]}`, nil, staffOnly(409, 403, 409)},
		"POST /admin/v1/orders/{id}/refunds": {"/admin/v1/orders/" + orderA.ID + "/refunds", `{"amount_fen":1,"reason":"r"}`, map[string]string{"Idempotency-Key": "matrix-refund"},
			staffOnly(503, 503, 503)}, // payments off in this stack
		"POST /admin/v1/orders/{id}/ready":   {"/admin/v1/orders/" + orderA.ID + "/ready", "", nil, staffOnly(409, 404, 409)},
		"POST /admin/v1/orders/{id}/pick-up": {"/admin/v1/orders/" + orderA.ID + "/pick-up", "", nil, staffOnly(409, 404, 409)},
		"POST /v1/orders/{id}/complete":      {"/v1/orders/" + orderA.ID + "/complete", "", nil, userOnly(409, 404)},
		"POST /v1/orders/{id}/urge":          {"/v1/orders/" + orderA.ID + "/urge", "", nil, userOnly(409, 404)},
		"POST /v1/orders/{id}/reorder":       {"/v1/orders/" + orderA.ID + "/reorder", "", nil, userOnly(200, 404)},
		"GET /admin/v1/dishes/{id}":          {"/admin/v1/dishes/" + dish.ID, "", nil, staffOnly(200, 403, 200)},
		"PATCH /admin/v1/dishes/{id}":        {"/admin/v1/dishes/" + dish.ID, `{"version":99,"price_fen":1}`, nil, staffOnly(409, 403, 409)},
		"PUT /admin/v1/dishes/{id}/stock":    {"/admin/v1/dishes/" + dish.ID + "/stock", `{"on_hand":0,"if_on_hand":99}`, nil, staffOnly(409, 403, 409)},
		"POST /admin/v1/dishes/{id}/stock/adjustments": {"/admin/v1/dishes/" + dish.ID + "/stock/adjustments", `{"delta":-1000000}`, map[string]string{"Idempotency-Key": "matrix-adjust"},
			staffOnly(409, 403, 409)},
		"GET /admin/v1/orders": {"/admin/v1/orders", "", nil, staffOnly(200, 200, 200)},
		"POST /admin/v1/merchants/{id}/printers": {"/admin/v1/merchants/" + sh.merchantID + "/printers", `{"name":"","provider":"feie","device":"X","role":"receipt"}`, nil,
			staffOnly(400, 403, 400)},
		"GET /admin/v1/merchants/{id}/printers": {"/admin/v1/merchants/" + sh.merchantID + "/printers", "", nil, staffOnly(200, 403, 200)},
		"PATCH /admin/v1/printers/{id}":         {"/admin/v1/printers/" + printer.ID, `{"version":99}`, nil, staffOnly(409, 404, 409)},
		"GET /admin/v1/prints":                  {"/admin/v1/prints", "", nil, staffOnly(200, 200, 200)},
		"POST /admin/v1/prints/{id}/reprint":    {"/admin/v1/prints/999999/reprint", "", map[string]string{"Idempotency-Key": "matrix-reprint"}, staffOnly(404, 404, 404)},
		"POST /v1/printers/{provider}/callback": {"/v1/printers/feie/callback", "orderId=x", nil, everyone(404)}, // no provider configured here
		"POST /v1/couriers/{provider}/callback": {"/v1/couriers/dada/callback", `{}`, nil, everyone(404)},        // no courier configured here
		"GET /v1/orders/{id}/delivery":          {"/v1/orders/" + orderA.ID + "/delivery", "", nil, userOnly(404, 404)},
		"PUT /admin/v1/merchants/{id}/courier":  {"/admin/v1/merchants/" + sh.merchantID + "/courier", `{"dispatch":"x"}`, nil, staffOnly(400, 403, 400)},
		"GET /admin/v1/deliveries":              {"/admin/v1/deliveries", "", nil, staffOnly(200, 200, 200)},
		"POST /admin/v1/orders/{id}/accept":     {"/admin/v1/orders/" + orderA.ID + "/accept", "", nil, staffOnly(409, 404, 409)},
		"POST /admin/v1/orders/{id}/reject":     {"/admin/v1/orders/" + orderA.ID + "/reject", "", nil, staffOnly(409, 404, 409)},
		"POST /admin/v1/orders/{id}/dispatch":   {"/admin/v1/orders/" + orderA.ID + "/dispatch", "", nil, staffOnly(409, 404, 409)},
		"POST /admin/v1/orders/{id}/complete":   {"/admin/v1/orders/" + orderA.ID + "/complete", "", nil, staffOnly(409, 404, 409)},
		"POST /admin/v1/orders/{id}/refund":     {"/admin/v1/orders/" + orderA.ID + "/refund", "", nil, staffOnly(409, 404, 409)},
		"GET /admin/v1/jobs/dead":               {"/admin/v1/jobs/dead", "", nil, staffOnly(403, 403, 200)},
		// Payments are off here: after-sales requests answer 503.
		"POST /v1/orders/{id}/after-sales": {"/v1/orders/" + orderA.ID + "/after-sales", `{"amount_fen":1,"reason":"r"}`, map[string]string{"Idempotency-Key": "matrix-after"},
			userOnly(503, 503)},
		"GET /v1/orders/{id}/after-sales":           {"/v1/orders/" + orderA.ID + "/after-sales", "", nil, userOnly(503, 503)},
		"POST /v1/after-sales/{id}/escalate":        {"/v1/after-sales/1/escalate", `{"note":"n"}`, nil, userOnly(503, 503)},
		"GET /admin/v1/after-sales":                 {"/admin/v1/after-sales", "", nil, staffOnly(503, 503, 503)},
		"POST /admin/v1/after-sales/{id}/agree":     {"/admin/v1/after-sales/1/agree", "", nil, staffOnly(503, 503, 503)},
		"POST /admin/v1/after-sales/{id}/reject":    {"/admin/v1/after-sales/1/reject", `{"note":"n"}`, nil, staffOnly(503, 503, 503)},
		"POST /admin/v1/after-sales/{id}/decide":    {"/admin/v1/after-sales/1/decide", `{"agree":true,"note":"n"}`, nil, staffOnly(403, 403, 503)},
		"GET /admin/v1/reconciliations/{date}":      {"/admin/v1/reconciliations/2020-01-01", "", nil, staffOnly(403, 403, 503)},
		"POST /admin/v1/reconciliations/{date}/run": {"/admin/v1/reconciliations/2020-01-01/run", "", nil, staffOnly(403, 403, 503)},
		"GET /admin/v1/merchants/{id}/statement":    {"/admin/v1/merchants/" + sh.merchantID + "/statement", "", nil, staffOnly(200, 403, 200)},
		"GET /admin/v1/orders/{id}/ledger":          {"/admin/v1/orders/" + orderA.ID + "/ledger", "", nil, staffOnly(200, 404, 200)},
		"PUT /admin/v1/merchants/{id}/commission": {"/admin/v1/merchants/" + sh.merchantID + "/commission", `{"commission_bps":9999}`, nil,
			staffOnly(403, 403, 400)},
		"PUT /admin/v1/merchants/{id}/sub-merchant": {"/admin/v1/merchants/" + sh.merchantID + "/sub-merchant", `{"sub_mchid":"x"}`, nil,
			staffOnly(403, 403, 400)},
		// Payments are off here, so is profit sharing: 503.
		"GET /admin/v1/profit-sharing":                 {"/admin/v1/profit-sharing", "", nil, staffOnly(403, 403, 503)},
		"POST /admin/v1/profit-sharing/{out_no}/retry": {"/admin/v1/profit-sharing/S1-1/retry", "", nil, staffOnly(403, 403, 503)},
		"GET /admin/v1/shipping":                       {"/admin/v1/shipping", "", nil, staffOnly(403, 403, 200)},
		"POST /admin/v1/shipping/{id}/retry":           {"/admin/v1/shipping/" + orderA.ID + "/retry", "", nil, staffOnly(403, 403, 404)},
		"POST /admin/v1/tokens/revoke":                 {"/admin/v1/tokens/revoke", `{"token":"not-a-token"}`, nil, staffOnly(403, 403, 400)},
		// Payments are not configured here: the refunds routes answer 503.
		"GET /admin/v1/refunds":                          {"/admin/v1/refunds", "", nil, staffOnly(403, 403, 503)},
		"POST /admin/v1/refunds/{out_refund_no}/retry":   {"/admin/v1/refunds/RX/retry", `{"note":"n"}`, nil, staffOnly(403, 403, 503)},
		"POST /admin/v1/refunds/{out_refund_no}/settle":  {"/admin/v1/refunds/RX/settle", `{"note":"n"}`, nil, staffOnly(403, 403, 503)},
		"POST /admin/v1/jobs/{id}/retry":                 {"/admin/v1/jobs/999999/retry", "", nil, staffOnly(403, 403, 404)},
		"GET /admin/v1/idempotency-keys/{user_id}/{key}": {"/admin/v1/idempotency-keys/" + uid + "/matrix-1", "", nil, staffOnly(403, 403, 200)},
		"DELETE /admin/v1/idempotency-keys/{user_id}/{key}": {"/admin/v1/idempotency-keys/" + uid + "/no-such-key", "", nil,
			staffOnly(403, 403, 404)},
		"POST /admin/v1/auth/login":           {"/admin/v1/auth/login", `{"username":"nobody.here","password":"not a password"}`, nil, everyone(401)},
		"POST /admin/v1/auth/logout":          {"/admin/v1/auth/logout", "", nil, staffOnly(204, 204, 204)},
		"POST /admin/v1/merchants/{id}/staff": {"/admin/v1/merchants/" + sh.merchantID + "/staff", `{"username":"x","password":"short"}`, nil, staffOnly(403, 403, 400)},
		"GET /admin/v1/merchants/{id}/staff":  {"/admin/v1/merchants/" + sh.merchantID + "/staff", "", nil, staffOnly(200, 403, 200)},
		"DELETE /admin/v1/staff/{id}":         {"/admin/v1/staff/999999", "", nil, staffOnly(403, 403, 404)},
		// A stream that is let in never ends: the row names no merchant
		// (404 once past authentication); TestOrderStreamAcrossInstances
		// checks a merchant's staff and another's.
		"GET /admin/v1/merchants/{id}/orders/stream": {"/admin/v1/merchants/0/orders/stream", "", nil, staffOnly(404, 404, 404)},
		"PUT /v1/orders/{id}/subscriptions":          {"/v1/orders/" + orderA.ID + "/subscriptions", `{"template_ids":["none"]}`, nil, userOnly(400, 404)},
		"GET /board/":                                {"/board/", "", nil, everyone(200)},
		// Merchant B's template: its staff create it, and the admin's
		// create after theirs finds the name taken.
		"POST /admin/v1/voucher-templates":       {"/admin/v1/voucher-templates", otherTemplate, nil, staffOnly(403, 201, 409)},
		"GET /admin/v1/voucher-templates":        {"/admin/v1/voucher-templates?merchant_id=" + sh.merchantID, "", nil, staffOnly(200, 403, 200)},
		"GET /admin/v1/voucher-templates/{id}":   {"/admin/v1/voucher-templates/" + tpl.ID, "", nil, staffOnly(200, 403, 200)},
		"PATCH /admin/v1/voucher-templates/{id}": {"/admin/v1/voucher-templates/" + tpl.ID, `{"version":99,"status":"paused"}`, nil, staffOnly(409, 403, 409)},
		"GET /v1/voucher-templates":              {"/v1/voucher-templates?merchant_id=" + sh.merchantID, "", nil, everyone(200)},
		// Merchant A's promotion named Matrix exists: a create of the name
		// is 409 once let in.
		"POST /admin/v1/merchants/{id}/promotions": {"/admin/v1/merchants/" + sh.merchantID + "/promotions", promoBody, nil, staffOnly(409, 403, 409)},
		"GET /admin/v1/merchants/{id}/promotions":  {"/admin/v1/merchants/" + sh.merchantID + "/promotions", "", nil, staffOnly(200, 403, 200)},
		"GET /admin/v1/promotions/{id}":            {"/admin/v1/promotions/" + promo.ID, "", nil, staffOnly(200, 403, 200)},
		"PATCH /admin/v1/promotions/{id}":          {"/admin/v1/promotions/" + promo.ID, `{"version":99,"status":"paused"}`, nil, staffOnly(409, 403, 409)},
		"POST /v1/vouchers/claim":                  {"/v1/vouchers/claim", `{"template_id":"` + tpl.ID + `"}`, nil, userOnly(201, 201)},
		"GET /v1/vouchers":                         {"/v1/vouchers", "", nil, userOnly(200, 200)},
		"GET /board/{file}":                        {"/board/board.js", "", nil, everyone(200)},
	}

	var routes []string
	for path, item := range testenv.OpenAPIDoc(t).Paths.Map() {
		for method := range item.Operations() {
			routes = append(routes, method+" "+path)
		}
	}
	slices.Sort(routes)
	// Logging out revokes the callers' tokens: those rows go last.
	for _, last := range []string{"POST /admin/v1/auth/logout", "POST /v1/auth/logout"} {
		if i := slices.Index(routes, last); i >= 0 {
			routes = append(slices.Delete(routes, i, i+1), last)
		}
	}
	for _, route := range routes {
		r, ok := rows[route]
		if !ok {
			t.Errorf("%s has no row in the authorization matrix: say who may reach it", route)
			continue
		}
		method := strings.Fields(route)[0]
		for i, caller := range matrixCallers {
			var body io.Reader
			if r.body != "" {
				body = strings.NewReader(r.body)
			}
			req, err := http.NewRequest(method, api.url+r.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if r.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if tok := tokens[caller]; tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			for k, v := range r.headers {
				req.Header.Set(k, v)
			}
			got := sh.send(t, req)
			if got.status != r.want[i] {
				t.Errorf("%s as %s: %d, want %d (%s)", route, caller, got.status, r.want[i], truncate(string(got.body), 160))
			}
		}
	}
	for route := range rows {
		if !slices.Contains(routes, route) {
			t.Errorf("matrix row %s matches no route of api/openapi.yaml", route)
		}
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return fmt.Sprintf("%s...", s[:n])
	}
	return s
}

// Over the limits, public and user routes answer 429 with Retry-After;
// payment callbacks are never limited.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, map[string]string{"TAKEOUT_RATE_LIMIT_IP": "20", "TAKEOUT_RATE_LIMIT_USER": "5"})
	var login struct {
		Token string `json:"token"`
	}
	s.do(t, api, "POST", "/v1/auth/wx-login", "", map[string]string{"code": "limited"}).json(t, &login)
	// Per user: the sixth request of the minute is refused.
	statuses := []int{}
	for range 6 {
		statuses = append(statuses, s.do(t, api, "GET", "/v1/orders", login.Token, nil).status)
	}
	if !slices.Equal(statuses, []int{200, 200, 200, 200, 200, 429}) {
		t.Errorf("per-user statuses %v", statuses)
	}
	r := s.do(t, api, "GET", "/v1/orders", login.Token, nil)
	if r.status != 429 || r.problemType() != "rate-limited" || r.header.Get("Retry-After") == "" {
		t.Errorf("limited answer: %d %s, Retry-After %q", r.status, r.body, r.header.Get("Retry-After"))
	}
	// Per address: the public routes stop after 20 requests a minute
	// (8 spent above), whoever asks.
	limited := 0
	for range 15 {
		if s.do(t, api, "GET", "/v1/merchants", "", nil).status == 429 {
			limited++
		}
	}
	if limited != 3 {
		t.Errorf("%d of 15 public requests limited, want 3", limited)
	}
	// Callbacks are not limited (payments are off here: 503, not 429).
	if r := s.do(t, api, "POST", "/v1/payments/wechat/notify", "", "{}"); r.status == 429 {
		t.Error("a payment callback was rate limited")
	}
}

// A client that sends its headers slowly (slowloris) is cut off after
// TAKEOUT_HTTP_READ_HEADER_TIMEOUT instead of holding a connection.
func TestSlowClientIsCutOff(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, map[string]string{"TAKEOUT_HTTP_READ_HEADER_TIMEOUT": "500ms"})
	conn, err := net.Dial("tcp", strings.TrimPrefix(api.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	for {
		if _, err := conn.Read(buf); err != nil {
			break // closed by the server
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the connection stayed open %v", d)
	}
}
