package order

import (
	"errors"
	"testing"

	"github.com/takeout/takeout/internal/problem"
)

// A cart's way of fulfilment and slot are checked before anything is
// read: an unknown way or a slot that is not a time is a 400 naming the
// field; a pickup cart needs no address detail, a delivery cart does.
func TestConfirmRequestFulfilment(t *testing.T) {
	t.Parallel()
	cart := func(way, slot, detail string) *ConfirmRequest {
		return &ConfirmRequest{MerchantID: "1", Items: []ConfirmItem{{DishID: "2", Qty: 1}}, Fulfilment: way, SlotStart: slot,
			Address: &Address{Name: "Li Lei", Phone: "13800138000", Detail: detail}}
	}
	tests := []struct {
		name  string
		req   *ConfirmRequest
		field string // "" for valid
	}{
		{"delivery by default", cart("", "", "1 Road"), ""},
		{"pickup without a detail", cart("pickup", "", ""), ""},
		{"delivery without a detail", cart("delivery", "", ""), "address.detail"},
		{"an unknown way", cart("drone", "", "1 Road"), "fulfilment"},
		{"a slot that is not a time", cart("pickup", "noon", ""), "slot_start"},
		{"a slot", cart("pickup", "2026-12-07T04:00:00Z", ""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.req.Validate()
			var p *problem.Error
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v, want valid", err)
			case tt.field != "" && (!errors.As(err, &p) || p.Extra["field"] != tt.field):
				t.Errorf("Validate() = %v, want a problem naming %s", err, tt.field)
			}
		})
	}
}
