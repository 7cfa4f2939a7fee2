package main

import (
	"fmt"
	"strings"
	"testing"
)

// Bad input gets a clear 4xx problem naming what is wrong, never a 500,
// and changes nothing.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	api := s.start(t, map[string]string{"TAKEOUT_MAX_BODY_BYTES": "4096"})
	admin := s.staffToken(t, "admin")
	mid := createMerchant(t, s, api, "Strict Kitchen")
	d := createDish(t, s, api, admin, mid, "Tea", 500, 10)
	dishes := "/admin/v1/merchants/" + mid + "/dishes"
	dish := "/admin/v1/dishes/" + d.ID
	v := d.Version

	tests := []struct {
		name, method, path string
		body               string
		contentType        string
		wantStatus         int
		wantType           string
		wantField          string
	}{
		{"malformed JSON", "POST", dishes, `{"name": "x",`, "", 400, "invalid-request", ""},
		{"not an object", "POST", dishes, `[1,2]`, "", 400, "invalid-request", ""},
		{"empty body", "POST", dishes, ``, "", 400, "invalid-request", ""},
		{"trailing data", "POST", dishes, `{"name":"x","price_fen":1,"stock":1} {}`, "", 400, "invalid-request", ""},
		{"unknown field", "POST", dishes, `{"name":"x","price_fen":1,"stock":1,"colour":"red"}`, "", 400, "invalid-request", "colour"},
		{"wrong type", "POST", dishes, `{"name":"x","price_fen":"cheap","stock":1}`, "", 400, "invalid-request", "price_fen"},
		{"float price", "POST", dishes, `{"name":"x","price_fen":1.5,"stock":1}`, "", 400, "invalid-request", "price_fen"},
		{"missing name", "POST", dishes, `{"price_fen":1,"stock":1}`, "", 400, "invalid-request", "name"},
		{"missing price", "POST", dishes, `{"name":"x","stock":1}`, "", 400, "invalid-request", "price_fen"},
		{"missing stock", "POST", dishes, `{"name":"x","price_fen":1}`, "", 400, "invalid-request", "stock"},
		{"zero price", "POST", dishes, `{"name":"x","price_fen":0,"stock":1}`, "", 400, "invalid-request", "price_fen"},
		{"huge price", "POST", dishes, `{"name":"x","price_fen":100000001,"stock":1}`, "", 400, "invalid-request", "price_fen"},
		{"negative stock", "POST", dishes, `{"name":"x","price_fen":1,"stock":-1}`, "", 400, "invalid-request", "stock"},
		{"stock overflows int32", "POST", dishes, `{"name":"x","price_fen":1,"stock":4294967296}`, "", 400, "invalid-request", "stock"},
		{"long name", "POST", dishes, fmt.Sprintf(`{"name":%q,"price_fen":1,"stock":1}`, strings.Repeat("面", 101)), "", 400, "invalid-request", "name"},
		{"form content type", "POST", dishes, `name=x`, "application/x-www-form-urlencoded", 415, "unsupported-media-type", ""},
		{"oversized body", "POST", dishes, `{"name":"` + strings.Repeat("x", 5000) + `","price_fen":1,"stock":1}`, "", 413, "body-too-large", ""},
		{"update without version", "PATCH", dish, `{"price_fen":2}`, "", 400, "invalid-request", "version"},
		{"update with nothing", "PATCH", dish, fmt.Sprintf(`{"version":%d}`, v), "", 400, "invalid-request", ""},
		{"update null name", "PATCH", dish, fmt.Sprintf(`{"version":%d,"name":""}`, v), "", 400, "invalid-request", "name"},
		{"stock without value", "PUT", dish + "/stock", `{"if_on_hand":3}`, "", 400, "invalid-request", "on_hand"},
		{"stock too high", "PUT", dish + "/stock", `{"on_hand":1000001}`, "", 400, "invalid-request", "on_hand"},
		{"stock with the old body", "PUT", dish + "/stock", fmt.Sprintf(`{"version":%d,"stock":3}`, v), "", 400, "invalid-request", "version"},
		{"merchant bad status", "PATCH", "/admin/v1/merchants/" + mid, `{"version":1,"status":"maybe"}`, "", 400, "invalid-request", "status"},
		{"merchant fulfilling no way", "PATCH", "/admin/v1/merchants/" + mid, `{"version":1,"fulfilment":{"delivery":false,"pickup":false,"scheduled":null}}`, "", 400, "invalid-request", "fulfilment.delivery"},
		{"merchant slots too short", "PATCH", "/admin/v1/merchants/" + mid, `{"version":1,"fulfilment":{"delivery":true,"pickup":true,"scheduled":{"slot_minutes":5,"lead_minutes":0,"days_ahead":0,"capacity":1,"print_before_minutes":0}}}`, "", 400, "invalid-request", "fulfilment.scheduled.slot_minutes"},
		{"merchant cut-off not a time", "PATCH", "/admin/v1/merchants/" + mid, `{"version":1,"fulfilment":{"delivery":true,"pickup":false,"scheduled":{"slot_minutes":30,"lead_minutes":0,"days_ahead":0,"capacity":1,"same_day_cutoff":"25:00","print_before_minutes":0}}}`, "", 400, "invalid-request", "fulfilment.scheduled.same_day_cutoff"},
		{"merchant negative fee", "POST", "/admin/v1/merchants", `{"name":"y","delivery_fee_fen":-1}`, "", 400, "invalid-request", "delivery_fee_fen"},
		{"dish of unknown merchant", "POST", "/admin/v1/merchants/999999/dishes", `{"name":"x","price_fen":1,"stock":1}`, "", 404, "not-found", ""},
		{"unknown dish", "PATCH", "/admin/v1/dishes/999999", `{"version":1,"price_fen":2}`, "", 404, "not-found", ""},
		{"NUL in a dish name", "POST", dishes, `{"name":"a\u0000b","price_fen":1,"stock":1}`, "", 400, "invalid-request", "name"},
		{"escape character in a merchant name", "PATCH", "/admin/v1/merchants/" + mid, `{"version":1,"name":"a\u001b[2Jb"}`, "", 400, "invalid-request", "name"},
		{"newline in a dish name", "PATCH", dish, fmt.Sprintf(`{"version":%d,"name":"a\nb"}`, v), "", 400, "invalid-request", "name"},
	}
	before := snapshot(t, s)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.doRaw(t, api, tt.method, tt.path, admin, tt.body, tt.contentType)
			if r.status != tt.wantStatus || r.problemType() != tt.wantType {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, tt.wantStatus, tt.wantType)
			}
			var p struct {
				Detail string `json:"detail"`
				Field  string `json:"field"`
			}
			r.json(t, &p)
			if p.Field != tt.wantField {
				t.Errorf("field = %q, want %q (detail %q)", p.Field, tt.wantField, p.Detail)
			}
			if p.Detail == "" || (tt.wantField != "" && !strings.Contains(p.Detail, tt.wantField)) {
				t.Errorf("detail %q does not name %q", p.Detail, tt.wantField)
			}
		})
	}
	if after := snapshot(t, s); after != before {
		t.Errorf("bad input changed the catalog:\nbefore %s\nafter  %s", before, after)
	}
}
