package order_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/problem"
)

// The confirm token carries its slot's cut-off: a cart confirmed for a
// slot and submitted after the slot stopped taking orders is refused
// (slot-unavailable) and writes nothing; before the cut-off it is placed
// and holds the slot.
func TestSubmitAfterTheSlotsCutOffIsRefused(t *testing.T) {
	t.Parallel()
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Pointer[time.Time]
	set := func(s string) {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, shanghai)
		if err != nil {
			t.Fatal(err)
		}
		clock.Store(&v)
	}
	set("2026-12-07 10:00")
	e := newEnvAt(t, func() time.Time { return *clock.Load() })
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `UPDATE merchants SET fulfilment = '{"delivery": true, "pickup": false, "scheduled":
		{"slot_minutes": 30, "lead_minutes": 60, "days_ahead": 0, "capacity": 5, "print_before_minutes": 0}}' WHERE id = $1`, e.merchant); err != nil {
		t.Fatal(err)
	}
	confirm := func(slot string) order.ConfirmResponse {
		t.Helper()
		addr := e.base.Address
		req := order.ConfirmRequest{MerchantID: strconv.FormatInt(e.merchant, 10), Address: &addr, SlotStart: slot, Remark: slot,
			Items: []order.ConfirmItem{{DishID: strconv.FormatInt(e.dishes[0], 10), Qty: 1}}}
		if err := req.Validate(); err != nil {
			t.Fatal(err)
		}
		c, err := e.svc.Confirm(ctx, e.user, req)
		if err != nil {
			t.Fatalf("confirm for %s: %v", slot, err)
		}
		return c
	}
	late := confirm("2026-12-07T03:30:00Z")   // 11:30 in Shanghai, cut off at 10:30
	inTime := confirm("2026-12-07T04:00:00Z") // 12:00, cut off at 11:00
	set("2026-12-07 10:31")
	_, err = e.svc.Submit(ctx, e.user, "late", late.ConfirmToken, order.PlacedReply)
	var p *problem.Error
	if !errors.As(err, &p) || p.Type != problem.SlotUnavailable {
		t.Fatalf("submit after the cut-off: %v, want slot-unavailable", err)
	}
	var orders, booked int
	if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM slot_bookings)`).Scan(&orders, &booked); err != nil {
		t.Fatal(err)
	}
	if orders != 0 || booked != 0 {
		t.Errorf("the refused submit wrote %d orders and %d slot bookings", orders, booked)
	}
	out, err := e.svc.Submit(ctx, e.user, "in-time", inTime.ConfirmToken, order.PlacedReply)
	if err != nil || out.Response.Status != 201 {
		t.Fatalf("submit before the cut-off: %v %d", err, out.Response.Status)
	}
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM slot_holds h JOIN slot_bookings b USING (merchant_id, slot_start)
		WHERE b.taken = 1 AND h.slot_start = '2026-12-07T04:00:00Z'`).Scan(&booked); err != nil || booked != 1 {
		t.Errorf("the placed order holds %d slots (%v), want its one", booked, err)
	}
}
