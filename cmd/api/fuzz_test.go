package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"

	"github.com/takeout/takeout/internal/testenv"
)

// FuzzEveryRoute sends arbitrary path parameters (as raw bytes, escaped
// into the path), query strings, values of the headers the service reads
// as text (Idempotency-Key, Last-Event-ID) and bodies to every route of
// api/openapi.yaml as every kind of caller, against one running API: no
// input may be answered with a 5xx, and every refusal outside the payment
// callbacks (which answer in WeChat's shapes) is an RFC 9457 problem.
// `make test` runs it for 500 inputs; `make fuzz` for longer.
// pathParam is a path parameter of a route template: {id}, {key}, ...
var pathParam = regexp.MustCompile(`\{[a-z_]+\}`)

func FuzzEveryRoute(f *testing.F) {
	sh := newPayShop(f, nil, 50, 5).shop
	api := sh.apis[0]
	user := sh.login(f, "fuzz-user")
	merchant := sh.staffToken(f, "merchant:"+sh.merchantID)
	callers := []string{"", user, merchant, sh.admin}

	type route struct{ method, path string }
	var routes []route
	for path, item := range testenv.OpenAPIDoc(f).Paths.Map() {
		for method := range item.Operations() {
			routes = append(routes, route{method, path})
		}
	}
	slices.SortFunc(routes, func(a, b route) int { return strings.Compare(a.method+a.path, b.method+b.path) })

	for i, seed := range []struct {
		arg, query, header, body string
	}{
		{"1", "", "", `{}`},
		{sh.dishes[0].ID, "limit=1", "k-1", `{"name":"a\u0000b","price_fen":1,"stock":1}`},
		{sh.merchantID, "user_id=1;x", "\xff\xfe", `{"code":"x\u0000"}`},
		{"%00", "cursor=%%%", "", `{"merchant_id":"` + sh.merchantID + `","items":[{"dish_id":"` + sh.dishes[0].ID + `","qty":1}],"address":{"name":"n\u0000","phone":"13900000000","detail":"d"},"remark":"\u0000"}`},
		{"99999999999999999999", "status=PAID&status=x", "\u202e1", `{"on_hand":-1}`},
		{"0", "", "", `{"delta":5}`},
		{"\xff\xfe", "", "\xc3", `{"note":"n"}`},
		{"\x00", "x=%FF", "", `{"note":"n"}`},
	} {
		for r := range routes {
			f.Add(uint8(r), uint8(i), seed.arg, seed.query, seed.header, []byte(seed.body))
		}
	}
	client := &http.Client{}
	f.Fuzz(func(t *testing.T, routeN, callerN uint8, arg, query, header string, body []byte) {
		rt := routes[int(routeN)%len(routes)]
		if arg == "" {
			arg = "1"
		}
		// Every path parameter, whatever its name, gets arg's bytes.
		path := pathParam.ReplaceAllLiteralString(rt.path, url.PathEscape(arg))
		if strings.ContainsFunc(query, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '#' }) {
			return // not a request line HTTP allows: net/http refuses it before any route
		}
		target := api.url + path
		if query != "" {
			target += "?" + query
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, strings.ToUpper(rt.method), target, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "fuzz-"+url.QueryEscape(arg))
		if header != "" {
			if !httpguts.ValidHeaderFieldValue(header) {
				return // not a header HTTP allows: net/http refuses to send it
			}
			req.Header.Set("Idempotency-Key", header)
			req.Header.Set("Last-Event-ID", header)
		}
		if tok := callers[int(callerN)%len(callers)]; tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", req.Method, target, err)
		}
		if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == "text/event-stream" {
			resp.Body.Close() // an order stream never ends: its answer began well
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s %q answered %d: %s", req.Method, target, body, resp.StatusCode, b)
		}
		callback := strings.HasPrefix(rt.path, "/v1/payments/")
		if resp.StatusCode >= 400 && !callback && resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %s answered %d without a problem: %s", req.Method, target, resp.StatusCode, b)
		}
	})
}
