package order_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/problem"
)

// A cart confirmed in an opening and submitted after it ends is
// merchant-closed, naming the next opening; one submitted before it ends
// is placed.
func TestSubmitAfterHoursIsMerchantClosed(t *testing.T) {
	t.Parallel()
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Pointer[time.Time]
	set := func(s string) {
		v, err := time.ParseInLocation("2006-01-02 15:04:05", s, shanghai)
		if err != nil {
			t.Fatal(err)
		}
		clock.Store(&v)
	}
	set("2026-12-07 13:59:00") // a Monday
	e := newEnvAt(t, func() time.Time { return *clock.Load() })
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `UPDATE merchants SET quote_version = quote_version + 1, weekly_hours =
		(SELECT jsonb_agg(jsonb_build_object('day', d, 'open', '10:00', 'close', '14:00')) FROM unnest(ARRAY['mon','tue','wed','thu','fri','sat','sun']) d)
		WHERE id = $1`, e.merchant); err != nil {
		t.Fatal(err)
	}
	cart := func(dish int) order.ConfirmRequest {
		return order.ConfirmRequest{MerchantID: strconv.FormatInt(e.merchant, 10),
			Items:   []order.ConfirmItem{{DishID: strconv.FormatInt(e.dishes[dish], 10), Qty: 1}},
			Address: &order.Address{Name: "Li", Phone: "13800138000", Detail: "Room 1"}}
	}
	early, err := e.svc.Confirm(ctx, e.user, cart(0))
	if err != nil {
		t.Fatal(err)
	}
	late, err := e.svc.Confirm(ctx, e.user, cart(1))
	if err != nil {
		t.Fatal(err)
	}
	set("2026-12-07 13:59:59")
	if _, err := e.svc.Submit(ctx, e.user, "early", early.ConfirmToken, order.PlacedReply); err != nil {
		t.Fatalf("submit a second before the close: %v", err)
	}
	set("2026-12-07 14:00:00")
	wantNext := "2026-12-08T02:00:00Z" // 10:00 in Shanghai
	for name, try := range map[string]func() error{
		"submit": func() error {
			_, err := e.svc.Submit(ctx, e.user, "late", late.ConfirmToken, order.PlacedReply)
			return err
		},
		"confirm": func() error { _, err := e.svc.Confirm(ctx, e.user, cart(2)); return err },
	} {
		p, ok := problem.As(try())
		if !ok || p.Type != problem.MerchantClosed || p.Extra["next_open_at"] != wantNext {
			t.Errorf("%s at the close: %+v, want merchant-closed with next_open_at %s", name, p, wantNext)
		}
	}
	var orders int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&orders); err != nil || orders != 1 {
		t.Errorf("%d orders (%v), want the early one only", orders, err)
	}
	// The retry of the early order after the close still gets its answer.
	if res, err := e.svc.Submit(ctx, e.user, "early", early.ConfirmToken, order.PlacedReply); err != nil || !res.Replayed {
		t.Errorf("retry of the early order after the close: %+v %v, want its replay", res, err)
	}
}
