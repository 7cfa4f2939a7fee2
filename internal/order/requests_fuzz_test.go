package order_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/testenv"
	"github.com/takeout/takeout/internal/web"
)

func FuzzConfirmRequest(f *testing.F) {
	testenv.FuzzBody(f, []string{
		`{"merchant_id":"1","items":[{"dish_id":"2","qty":1}],"address":{"name":"a","phone":"13800000000","detail":"d"}}`,
		`{"merchant_id":"1","items":[{"dish_id":"2","qty":1},{"dish_id":"2","qty":1}],"address":{"name":"a","phone":"1","detail":"d"},"repeat":true}`,
		`{"merchant_id":1}`,
	}, func(t *testing.T, r order.ConfirmRequest) {
		if id, err := strconv.ParseInt(r.MerchantID, 10, 64); err != nil || id <= 0 {
			t.Fatalf("accepted merchant_id %q", r.MerchantID)
		}
		if len(r.Items) < 1 || len(r.Items) > 50 {
			t.Fatalf("accepted %d items", len(r.Items))
		}
		seen := map[string]bool{}
		for _, it := range r.Items {
			if it.Qty < 1 || it.Qty > 99 || seen[it.DishID] {
				t.Fatalf("accepted item %+v", it)
			}
			seen[it.DishID] = true
		}
		if r.Address == nil {
			t.Fatal("accepted no address")
		}
		a := r.Address.Normalize()
		if a.Name == "" || a.Detail == "" || len(a.Phone) < 5 || utf8.RuneCountInString(r.Remark) > 200 {
			t.Fatalf("accepted address %+v remark %q", r.Address, r.Remark)
		}
	})
}

func FuzzSubmitRequest(f *testing.F) {
	testenv.FuzzBody(f, []string{`{"confirm_token":"v1.x.y"}`, `{"confirm_token":""}`, `{}`},
		func(t *testing.T, r order.SubmitRequest) {
			if r.ConfirmToken == "" {
				t.Fatal("accepted an empty token")
			}
		})
}

// DecodeSubmit's fast path reads a body exactly as web.Decode does: the
// same request, or the same problem.
func FuzzDecodeSubmitMatchesDecode(f *testing.F) {
	for _, s := range []string{`{"confirm_token":"v1.eyJ4IjoxfQ.c2ln"}`, `{"confirm_token":""}`, `{"confirm_token":"a\u0062"}`,
		`{"confirm_token":"a"} `, `{"confirm_token":"a","x":1}`, `{"confirm_token":"a"}{}`, `{"confirm_token":"a b"}`, `{}`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := func() *http.Request {
			r := httptest.NewRequestWithContext(t.Context(), "POST", "/v1/orders", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return r
		}
		fast, fastErr := order.DecodeSubmit(req())
		slow, slowErr := web.Decode[order.SubmitRequest](req())
		if fast != slow {
			t.Fatalf("body %q: DecodeSubmit %+v, web.Decode %+v", body, fast, slow)
		}
		if (fastErr == nil) != (slowErr == nil) {
			t.Fatalf("body %q: DecodeSubmit error %v, web.Decode error %v", body, fastErr, slowErr)
		}
		if fastErr != nil {
			fp, _ := problem.As(fastErr)
			sp, _ := problem.As(slowErr)
			if fp == nil || sp == nil || fp.Type != sp.Type || fp.Detail != sp.Detail {
				t.Fatalf("body %q: DecodeSubmit %v, web.Decode %v", body, fastErr, slowErr)
			}
		}
	})
}
