package courier_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/courier"
	"github.com/takeout/takeout/internal/couriersim"
)

const simSecret = "sim-secret"

func newSim(t *testing.T) (*couriersim.Server, string) {
	t.Helper()
	sim := couriersim.New(couriersim.Options{DadaAppKey: "dk", DadaAppSecret: simSecret, MeituanAppKey: "mk", MeituanAppSecret: simSecret})
	srv := httptest.NewServer(sim)
	t.Cleanup(func() { srv.Close(); sim.Close() })
	return sim, srv.URL
}

// The Dada client against the simulator's reading of Dada's rules: a
// quote places once, a repeat is "already placed", an expired quote is
// told apart, a cancel after a rider took it costs 2 yuan and a second
// one is refused, and a wrong secret is refused.
func TestDadaClient(t *testing.T) {
	t.Parallel()
	sim, base := newSim(t)
	ctx := context.Background()
	d := &courier.Dada{Base: base + "/dada", AppKey: "dk", AppSecret: simSecret, SourceID: "1", ShopNo: "s", CityCode: "0755", HTTP: http.DefaultClient, Now: time.Now}
	r := courier.Request{OutNo: "TK1-1", Name: "Han", Phone: "13900139000", Address: "1 Road", Lat: 22.5, Lng: 113.9, ValueFen: 3000}
	q, err := d.Quote(ctx, r)
	if err != nil || q.Token == "" || q.FeeFen <= 0 {
		t.Fatalf("quote: %+v %v", q, err)
	}
	p, err := d.Place(ctx, r, q)
	if err != nil || p.FeeFen != q.FeeFen {
		t.Fatalf("place: %+v %v", p, err)
	}
	if _, err := d.Place(ctx, r, q); !errors.Is(err, courier.ErrAlreadyPlaced) {
		t.Errorf("placed again: %v, want already placed", err)
	}
	r2 := r
	r2.OutNo = "TK2-1"
	q2, err := d.Quote(ctx, r2)
	if err != nil {
		t.Fatal(err)
	}
	sim.Expire()
	if _, err := d.Place(ctx, r2, q2); !errors.Is(err, courier.ErrQuoteExpired) {
		t.Errorf("an expired quote: %v", err)
	}
	if _, err := sim.Advance("TK1-1"); err != nil {
		t.Fatal(err)
	}
	u, err := d.Query(ctx, "TK1-1")
	if err != nil || u.Status != courier.Assigned || u.RiderName == "" || u.Lat == nil || u.TipFen == nil {
		t.Fatalf("query: %+v %v", u, err)
	}
	fee, err := d.Cancel(ctx, "TK1-1", "changed my mind")
	if err != nil || fee != 200 {
		t.Errorf("cancel after a rider took it: %d %v", fee, err)
	}
	var refused *courier.RefusedError
	if _, err := d.Cancel(ctx, "TK1-1", "again"); !errors.As(err, &refused) {
		t.Errorf("cancel again: %v, want a refusal", err)
	}
	wrong := *d
	wrong.AppSecret = "not-the-secret"
	if _, err := wrong.Quote(ctx, r2); !errors.As(err, &refused) || refused.Code != "2001" {
		t.Errorf("a wrong secret: %v", err)
	}
}

// Dada's callback signature covers the order and the time, not the
// status: a changed status still verifies, so the callback is never
// trusted; a changed order id does not verify.
func TestDadaCallbackSignature(t *testing.T) {
	t.Parallel()
	d := &courier.Dada{}
	body := `{"client_id":"C1","order_id":"TK1-1","order_status":%s,"update_time":1800000000,"signature":"` +
		courier.DadaCallbackSign("C1", "TK1-1", "1800000000") + `"}`
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"as signed", strings.Replace(body, "%s", "2", 1), true},
		{"another status", strings.Replace(body, "%s", "4", 1), true},
		{"another order", strings.Replace(strings.Replace(body, "%s", "2", 1), `"order_id":"TK1-1"`, `"order_id":"TK9-1"`, 1), false},
	} {
		cb, err := d.Callback(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body)))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err == nil && cb.Trusted {
			t.Errorf("%s: a Dada callback trusted", tc.name)
		}
	}
}

// Meituan signs every field: a changed status does not verify.
func TestMeituanCallbackSignature(t *testing.T) {
	t.Parallel()
	m := &courier.Meituan{AppKey: "mk", AppSecret: simSecret}
	f := url.Values{"delivery_id": {"TK1-1"}, "status": {"20"}, "courier_id": {"7"}, "courier_name": {"Li"}, "appkey": {"mk"}, "timestamp": {"1800000000"}}
	f.Set("sign", courier.MeituanSign(f, simSecret))
	post := func(form url.Values) (courier.Callback, error) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return m.Callback(r)
	}
	cb, err := post(f)
	if err != nil || !cb.Trusted || cb.Update.Status != courier.Assigned || cb.Update.RiderID != "7" {
		t.Fatalf("as signed: %+v %v", cb, err)
	}
	f.Set("status", "50")
	if _, err := post(f); err == nil {
		t.Error("a changed status verified")
	}
}

func TestMaskPhone(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"13800138000": "138****8000", "12345": "****", "": "****"} {
		if got := courier.MaskPhone(in); got != want {
			t.Errorf("MaskPhone(%q) = %q, want %q", in, got, want)
		}
	}
}
