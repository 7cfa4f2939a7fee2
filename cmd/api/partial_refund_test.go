package main

import (
	"fmt"
	"sync"
	"testing"

	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/wxsim"
)

// refundPart asks for a partial refund with an Idempotency-Key.
func (ps *payShop) refundPart(t *testing.T, token, orderID, key, body string) response {
	t.Helper()
	return ps.doKey(t, ps.apis[0], "POST", "/admin/v1/orders/"+orderID+"/refunds", token, key, body)
}

// Partial refunds of a paid order: lines (their stock back on sale) and
// amounts, each once per key, several of them, never more than was paid
// however many race; the order becomes REFUNDED when they come to all
// that was paid, and not before.
func TestPartialRefunds(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10, 10)
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	other := ps.staffToken(t, "merchant:"+createMerchant(t, ps.stack, ps.apis[0], "Other Kitchen"))
	user := ps.login(t, "partial")
	c := ps.confirm(t, ps.apis[0], user, ps.cart(3, 1)) // 3 x 1000 + 1 x 2000 + 500 delivery
	r := ps.submit(t, ps.apis[0], user, "partial", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	o := placedOrder(t, r)
	ps.pay(t, user, o.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1)})
	waitUntil(t, "the order to be paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", o.ID) == 1
	})
	line := func(dish int) int16 {
		for _, it := range o.Items {
			if it.DishID == ps.dishes[dish].ID {
				return it.Line
			}
		}
		t.Fatalf("no line of dish %d", dish)
		return 0
	}

	// Refused, and nothing changes.
	for name, tt := range map[string]struct {
		token, key, body string
		status           int
		problem          string
	}{
		"no key":          {staff, "", `{"amount_fen":100,"reason":"r"}`, 400, "idempotency-key-missing"},
		"other merchant":  {other, "k-other", `{"amount_fen":100,"reason":"r"}`, 404, "not-found"},
		"lines and money": {staff, "k-both", fmt.Sprintf(`{"amount_fen":100,"lines":[{"line":%d,"qty":1}],"reason":"r"}`, line(0)), 400, "invalid-request"},
		"too many units":  {staff, "k-units", fmt.Sprintf(`{"lines":[{"line":%d,"qty":4}],"reason":"r"}`, line(0)), 400, "invalid-request"},
		"more than paid":  {staff, "k-more", `{"amount_fen":5501,"reason":"r"}`, 409, "refund-exceeds-paid"},
		"no reason":       {staff, "k-reason", `{"amount_fen":100}`, 400, "invalid-request"},
	} {
		if r := ps.refundPart(t, tt.token, o.ID, tt.key, tt.body); r.status != tt.status || r.problemType() != tt.problem {
			t.Errorf("%s: %d %s, want %d %s", name, r.status, r.body, tt.status, tt.problem)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1", o.ID); n != 0 {
		t.Fatalf("refused requests left %d refunds", n)
	}

	// One unit of dish 0 back, its stock on sale again; a retry is the
	// same refund.
	body := fmt.Sprintf(`{"lines":[{"line":%d,"qty":1}],"reason":"one bowl short","restock":true}`, line(0))
	first := ps.refundPart(t, staff, o.ID, "bowl", body)
	again := ps.refundPart(t, staff, o.ID, "bowl", body)
	var ref payment.Refund
	first.json(t, &ref)
	if first.status != 201 || again.status != 201 || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("line refund: %d %s, retry %d %s", first.status, first.body, again.status, again.body)
	}
	if ref.AmountFen != 1000 || !ref.Partial || ref.OutRefundNo != payment.OutRefundNo(payment.OutTradeNo(mustID(t, o.ID), 1))+"-P1" {
		t.Errorf("line refund: %+v", ref)
	}
	if ps.stock(t, 0) != 8 || ps.count(t, "SELECT qty FROM stock_reservations WHERE order_id = $1 AND dish_id = $2", o.ID, ps.dishes[0].ID) != 2 {
		t.Errorf("after restocking 1 of 3: stock %d (want 8), reservation %d (want 2)", ps.stock(t, 0),
			ps.count(t, "SELECT qty FROM stock_reservations WHERE order_id = $1 AND dish_id = $2", o.ID, ps.dishes[0].ID))
	}

	// One request sent ten times at once: one refund, one answer.
	storm := make([]response, 10)
	var wg sync.WaitGroup
	for i := range storm {
		wg.Go(func() { storm[i] = ps.refundPart(t, staff, o.ID, "storm", `{"amount_fen":100,"reason":"sorry"}`) })
	}
	wg.Wait()
	for _, r := range storm {
		if r.status != 201 || string(r.body) != string(storm[0].body) {
			t.Errorf("a copy of one refund request: %d %s, want 201 %s", r.status, r.body, storm[0].body)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND amount_fen = 100", o.ID); n != 1 {
		t.Errorf("ten copies of one request made %d refunds", n)
	}

	// Twenty requests of 1000 race for the 4400 left: four get it.
	answers := make([]response, 20)
	for i := range answers {
		wg.Go(func() {
			answers[i] = ps.refundPart(t, staff, o.ID, fmt.Sprintf("race-%d", i), `{"amount_fen":1000,"reason":"goodwill"}`)
		})
	}
	wg.Wait()
	got, refused := 0, 0
	for _, r := range answers {
		switch {
		case r.status == 201:
			got++
		case r.status == 409 && r.problemType() == "refund-exceeds-paid":
			refused++
		default:
			t.Errorf("racing refund: %d %s", r.status, r.body)
		}
	}
	if got != 4 || refused != 16 {
		t.Errorf("%d refunds made, %d refused; want 4 and 16", got, refused)
	}
	if n := ps.count(t, "SELECT sum(amount_fen) FROM refunds WHERE order_id = $1", o.ID); n != 5100 {
		t.Errorf("refunds come to %d, want 5100", n)
	}
	waitUntil(t, "the refunds to succeed", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", o.ID) == 6
	})
	if n := ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", o.ID); n != 1 {
		t.Error("the order left PAID with 400 fen still paid")
	}
	if r := ps.refundPart(t, staff, o.ID, "late-restock", fmt.Sprintf(`{"lines":[{"line":%d,"qty":1}],"reason":"r","restock":true}`, line(1))); r.status != 409 {
		t.Errorf("a line worth 2000 with 400 left: %d %s", r.status, r.body)
	}

	// The last 400: the order is refunded in full, once.
	if r := ps.refundPart(t, staff, o.ID, "rest", `{"amount_fen":400,"reason":"the rest"}`); r.status != 201 {
		t.Fatalf("the last 400: %d %s", r.status, r.body)
	}
	waitUntil(t, "the order to be refunded", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDED'", o.ID) == 1
	})
	ps.expectOnce(t, o.ID,
		"SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'REFUNDED'",
		"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'REFUNDED'")
	ps.ledgerHolds(t, o.ID) // seven refunds, the last giving back the last fen of each share
	if n := ps.count(t, "SELECT coalesce(sum(qty), 0) FROM stock_reservations WHERE order_id = $1 AND released_at IS NULL", o.ID); n != 0 || ps.stock(t, 0) != 10 || ps.stock(t, 1) != 10 {
		t.Errorf("after the full refund: %d units held, stock %d and %d (want 0, 10, 10)", n, ps.stock(t, 0), ps.stock(t, 1))
	}
	if r := ps.refundPart(t, staff, o.ID, "after", `{"amount_fen":1,"reason":"r"}`); r.status != 409 || r.problemType() != "order-status-conflict" {
		t.Errorf("a refund of a refunded order: %d %s", r.status, r.body)
	}
}

// A merchant who rejects an order after a partial refund refunds only
// what is left.
func TestRejectAfterPartialRefund(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	user := ps.login(t, "partial-reject")
	o := ps.place(t, user, "partial-reject", 2) // 2000 + 500
	ps.pay(t, user, o.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1)})
	waitUntil(t, "the order to be paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", o.ID) == 1
	})
	if r := ps.refundPart(t, ps.admin, o.ID, "first", `{"amount_fen":700,"reason":"late"}`); r.status != 201 {
		t.Fatalf("partial refund: %d %s", r.status, r.body)
	}
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+o.ID+"/reject", ps.admin, nil); r.status != 200 {
		t.Fatalf("reject: %d %s", r.status, r.body)
	}
	waitUntil(t, "the order to be refunded", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDED'", o.ID) == 1
	})
	if n := ps.count(t, "SELECT sum(amount_fen) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", o.ID); n != 2500 {
		t.Errorf("refunds came to %d, want the 2500 paid", n)
	}
	if n := ps.count(t, "SELECT amount_fen FROM refunds WHERE order_id = $1 AND NOT partial", o.ID); n != 1800 {
		t.Errorf("the reject refunded %d, want the 1800 left", n)
	}
}
