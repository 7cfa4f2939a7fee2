package catalog_test

import (
	"testing"
	"unicode/utf8"

	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/testenv"
)

func validName(t *testing.T, name string) {
	t.Helper()
	if n := utf8.RuneCountInString(name); n < 1 || n > 100 || !utf8.ValidString(name) {
		t.Fatalf("accepted name %q", name)
	}
}

func FuzzCreateMerchantRequest(f *testing.F) {
	testenv.FuzzBody(f, []string{`{"name":"a"}`, `{"name":"a","status":"closed","delivery_fee_fen":300}`, `{"name":""}`, `{}`, `null`},
		func(t *testing.T, r catalog.CreateMerchantRequest) {
			validName(t, r.Name)
			if r.Status != nil && *r.Status != "open" && *r.Status != "closed" {
				t.Fatalf("accepted status %q", *r.Status)
			}
			if r.DeliveryFeeFen != nil && (*r.DeliveryFeeFen < 0 || *r.DeliveryFeeFen > 100_000_000) {
				t.Fatalf("accepted fee %d", *r.DeliveryFeeFen)
			}
		})
}

func FuzzUpdateMerchantRequest(f *testing.F) {
	testenv.FuzzBody(f, []string{`{"version":1,"status":"open"}`, `{"version":0}`, `{"status":"open"}`},
		func(t *testing.T, r catalog.UpdateMerchantRequest) {
			if r.Version == nil || *r.Version < 1 {
				t.Fatal("accepted without a valid version")
			}
			if r.Name == nil && r.Status == nil && r.DeliveryFeeFen == nil {
				t.Fatal("accepted an empty change")
			}
			if r.Name != nil {
				validName(t, *r.Name)
			}
		})
}

func FuzzCreateDishRequest(f *testing.F) {
	testenv.FuzzBody(f, []string{`{"name":"rice","price_fen":100,"stock":5}`, `{"name":"rice","price_fen":100,"stock":5,"on_sale":false}`, `{"name":"x","price_fen":-1,"stock":5}`},
		func(t *testing.T, r catalog.CreateDishRequest) {
			validName(t, r.Name)
			if r.PriceFen == nil || *r.PriceFen < 1 || *r.PriceFen > 100_000_000 {
				t.Fatalf("accepted price %v", r.PriceFen)
			}
			if r.Stock == nil || *r.Stock < 0 || *r.Stock > 1_000_000 {
				t.Fatalf("accepted stock %v", r.Stock)
			}
		})
}

func FuzzUpdateDishRequest(f *testing.F) {
	testenv.FuzzBody(f, []string{`{"version":3,"price_fen":100}`, `{"version":3,"on_sale":true}`, `{"version":3,"name":"n"}`},
		func(t *testing.T, r catalog.UpdateDishRequest) {
			if r.Version == nil || *r.Version < 1 {
				t.Fatal("accepted without a valid version")
			}
			if r.PriceFen != nil && (*r.PriceFen < 1 || *r.PriceFen > 100_000_000) {
				t.Fatalf("accepted price %d", *r.PriceFen)
			}
			if r.Name != nil {
				validName(t, *r.Name)
			}
		})
}

func FuzzSetStockRequest(f *testing.F) {
	testenv.FuzzBody(f, []string{`{"on_hand":0}`, `{"on_hand":1000000,"if_on_hand":7}`, `{"if_on_hand":1}`},
		func(t *testing.T, r catalog.SetStockRequest) {
			if r.OnHand == nil || *r.OnHand < 0 || *r.OnHand > 1_000_000 || (r.IfOnHand != nil && (*r.IfOnHand < 0 || *r.IfOnHand > 1_000_000)) {
				t.Fatalf("accepted %+v", r)
			}
		})
}

func FuzzAdjustStockRequest(f *testing.F) {
	testenv.FuzzBody(f, []string{`{"delta":5}`, `{"delta":-3}`, `{"delta":0}`, `{}`},
		func(t *testing.T, r catalog.AdjustStockRequest) {
			if r.Delta == nil || *r.Delta == 0 || *r.Delta < -1_000_000 || *r.Delta > 1_000_000 {
				t.Fatalf("accepted %+v", r)
			}
		})
}
