package order_test

import (
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/testenv"
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
