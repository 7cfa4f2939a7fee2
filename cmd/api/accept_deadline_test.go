package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/order"
)

// setAcceptRule sets the shop's merchant's accept deadline.
func (sh *shop) setAcceptRule(t *testing.T, within int, then string) catalog.Merchant {
	t.Helper()
	var version int64
	if err := sh.pool.QueryRow(t.Context(), "SELECT version FROM merchants WHERE id = $1", sh.merchantID).Scan(&version); err != nil {
		t.Fatal(err)
	}
	r := sh.do(t, sh.apis[0], "PATCH", "/admin/v1/merchants/"+sh.merchantID, sh.admin,
		map[string]any{"version": version, "accept_within_seconds": within, "accept_timeout_action": then})
	if r.status != 200 {
		t.Fatalf("set the accept rule: %d %s", r.status, r.body)
	}
	var m catalog.Merchant
	r.json(t, &m)
	if m.AcceptWithinSeconds != int32(within) || m.AcceptTimeoutAction != then {
		t.Fatalf("merchant after the change: %d s, %q", m.AcceptWithinSeconds, m.AcceptTimeoutAction)
	}
	return m
}

// orderOf reads an order as its customer sees it.
func (sh *shop) orderOf(t *testing.T, user, id string) order.Order {
	t.Helper()
	r := sh.do(t, sh.apis[0], "GET", "/v1/orders/"+id, user, nil)
	if r.status != 200 {
		t.Fatalf("get order: %d %s", r.status, r.body)
	}
	var o order.Order
	r.json(t, &o)
	return o
}

// makeDue moves an order's accept deadline (its due row, and what the
// order says) to a moment ago, as if its time had run out.
func (sh *shop) makeDue(t *testing.T, id string) {
	t.Helper()
	if n := sh.count(t, `WITH due AS (UPDATE order_accept_deadlines SET accept_by = now() - interval '1 second'
		    WHERE order_id = $1 RETURNING order_id, accept_by),
		o AS (UPDATE orders SET accept_by = due.accept_by FROM due WHERE id = due.order_id RETURNING 1)
		SELECT count(*) FROM o`, id); n != 1 {
		t.Fatalf("order %s has no accept deadline to move", id)
	}
}

// A paid order gets its merchant's accept deadline in the statement that
// makes it PAID, on the one-statement path (no webhook: payment_settle)
// and on the transaction path (a webhook configured) alike; a later
// change of the merchant's rule does not move it. At the deadline the
// system rejects it: one history row by the system, a full refund
// through wxsim, the stock back, the customer told; the merchant's tap
// after that is refused with the status it found.
func TestAcceptDeadlineRejectsAndRefunds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, notPath string // the path the payment must not take
		env           map[string]string
	}{
		{name: "one statement", notPath: "transaction", env: map[string]string{"TAKEOUT_WEBHOOK_URL": ""}},
		{name: "transaction", notPath: "one_statement", env: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ps := newPayShop(t, tc.env, 10)
			ps.setAcceptRule(t, 120, "reject")
			before := ps.stock(t, 0)
			user, id, _ := ps.paidOrder(t, "deadline-"+strings.ReplaceAll(tc.name, " ", "-"))
			if m := ps.metrics(t, ps.apis[0]); !strings.Contains(m, fmt.Sprintf(`takeout_payment_success_paths_total{path=%q} 0`, tc.notPath)) {
				t.Fatalf("the payment took the %s path:\n%s", tc.notPath, grepLines(m, "takeout_payment_success_paths_total"))
			}
			var paidAt time.Time
			if err := ps.pool.QueryRow(t.Context(), "SELECT updated_at FROM orders WHERE id = $1", id).Scan(&paidAt); err != nil {
				t.Fatal(err)
			}
			o := ps.orderOf(t, user, id)
			d := o.AcceptDeadline
			if d == nil || d.Then != "reject" || d.Applied || !d.AcceptBy.Equal(paidAt.Add(120*time.Second)) {
				t.Fatalf("accept deadline %+v, want reject at %s (paid at %s + 120 s)", d, paidAt.Add(120*time.Second), paidAt)
			}

			// The merchant changes its rule: this order keeps its deadline.
			ps.setAcceptRule(t, 600, "accept")
			if again := ps.orderOf(t, user, id).AcceptDeadline; again == nil || *again != *d {
				t.Fatalf("after the merchant's change the deadline is %+v, was %+v", again, d)
			}

			ps.makeDue(t, id)
			waitUntil(t, "the order rejected and refunded at its deadline", func() bool {
				return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDED'", id) == 1
			})
			ps.expectOnce(t, id,
				`SELECT count(*) FROM order_status_history WHERE order_id = $1 AND from_status = 'PAID' AND to_status = 'REFUNDING' AND actor = 'system:accept-deadline'`,
				`SELECT count(*) FROM order_status_history WHERE order_id = $1 AND from_status = 'PAID'`,
				`SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.order_id = $1 AND r.amount_fen = p.amount_fen AND r.status = 'SUCCESS'`)
			if after := ps.stock(t, 0); after != before {
				t.Errorf("stock %d after the reject, %d before the order", after, before)
			}
			got := ps.orderOf(t, user, id)
			if got.AcceptDeadline == nil || !got.AcceptDeadline.Applied || got.AcceptDeadline.Then != "reject" {
				t.Errorf("the customer sees %+v, want the deadline applied", got.AcceptDeadline)
			}

			// The merchant taps accept a moment too late.
			r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/accept", ps.admin, nil)
			if r.status != 409 || !strings.Contains(string(r.body), `"current_status":"REFUNDED"`) {
				t.Errorf("a late accept: %d %s", r.status, r.body)
			}
			if m := ps.metrics(t, ps.apis[0]); !strings.Contains(m, `takeout_accept_deadline_total{outcome="applied",then="reject"} 1`+"\n") {
				t.Errorf("the metric does not count one applied reject:\n%s", grepLines(m, "takeout_accept_deadline"))
			}
		})
	}
}

// A merchant whose rule is to accept gets the order accepted at its
// deadline; its own tap afterwards answers as a replay (200, the order
// as it is), a reject is refused, nothing is refunded, and an order of a
// merchant without a deadline has none and is left waiting.
func TestAcceptDeadlineAccepts(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10)
	ps.setAcceptRule(t, 60, "accept")
	user, id, _ := ps.paidOrder(t, "deadline-accept")
	ps.makeDue(t, id)
	waitUntil(t, "the order accepted at its deadline", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'ACCEPTED'", id) == 1
	})
	ps.expectOnce(t, id,
		`SELECT count(*) FROM order_status_history WHERE order_id = $1 AND from_status = 'PAID' AND to_status = 'ACCEPTED' AND actor = 'system:accept-deadline'`)
	if d := ps.orderOf(t, user, id).AcceptDeadline; d == nil || !d.Applied || d.Then != "accept" {
		t.Errorf("the customer sees %+v, want the deadline applied", d)
	}
	r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/accept", ps.admin, nil)
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the merchant's accept after the system's: %d %v %s", r.status, r.header, r.body)
	}
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/reject", ps.admin, nil); r.status != 409 {
		t.Errorf("a reject after the automatic accept: %d %s", r.status, r.body)
	}
	if n := ps.count(t, `SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.order_id = $1`, id); n != 0 {
		t.Errorf("%d refunds of an accepted order", n)
	}

	// No deadline: the order has none, and waits for the merchant.
	ps.setAcceptRule(t, 0, "reject")
	user2, id2, _ := ps.paidOrder(t, "deadline-none")
	if d := ps.orderOf(t, user2, id2).AcceptDeadline; d != nil {
		t.Errorf("an order of a merchant without a deadline has %+v", d)
	}
	time.Sleep(1500 * time.Millisecond) // three sweeps
	if n := ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", id2); n != 1 {
		t.Errorf("the order without a deadline moved on")
	}
}

// A merchant's rule out of range, or an unknown outcome, is 400 naming
// the field and changes nothing; a new merchant starts with the
// platform's default (300 s, reject).
func TestAcceptRuleValidation(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil)
	var m catalog.Merchant
	r := sh.do(t, sh.apis[0], "GET", "/v1/merchants/"+sh.merchantID+"/menu", "", nil)
	if r.status != 200 {
		t.Fatalf("menu: %d %s", r.status, r.body)
	}
	var menu struct {
		Merchant catalog.Merchant `json:"merchant"`
	}
	r.json(t, &menu)
	m = menu.Merchant
	if m.AcceptWithinSeconds != 300 || m.AcceptTimeoutAction != "reject" {
		t.Errorf("a new merchant's rule: %d s, %q; want 300 s, reject", m.AcceptWithinSeconds, m.AcceptTimeoutAction)
	}
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"too short", map[string]any{"accept_within_seconds": 5}, "accept_within_seconds"},
		{"too long", map[string]any{"accept_within_seconds": 7201}, "accept_within_seconds"},
		{"negative", map[string]any{"accept_within_seconds": -1}, "accept_within_seconds"},
		{"not a number", map[string]any{"accept_within_seconds": "5m"}, "accept_within_seconds"},
		{"unknown outcome", map[string]any{"accept_timeout_action": "cancel"}, "accept_timeout_action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["version"] = m.Version
			r := sh.do(t, sh.apis[0], "PATCH", "/admin/v1/merchants/"+sh.merchantID, sh.admin, tc.body)
			if r.status != 400 || !strings.Contains(string(r.body), tc.field) {
				t.Errorf("PATCH %v: %d %s, want 400 naming %s", tc.body, r.status, r.body, tc.field)
			}
			delete(tc.body, "version")
			tc.body["name"] = "Refused " + tc.name
			r = sh.do(t, sh.apis[0], "POST", "/admin/v1/merchants", sh.admin, tc.body)
			if r.status != 400 || !strings.Contains(string(r.body), tc.field) {
				t.Errorf("POST %v: %d %s, want 400 naming %s", tc.body, r.status, r.body, tc.field)
			}
		})
	}
	if n := sh.count(t, "SELECT count(*) FROM merchants WHERE name LIKE 'Refused %' OR (id = $1 AND version <> $2)", sh.merchantID, m.Version); n != 0 {
		t.Errorf("%d merchants created or changed by refused requests", n)
	}
}

// The customer is told what the deadline did: the subscribe message of
// an order rejected at its deadline says it was not accepted in time
// (超时未接单) when its refund lands, and of one accepted there that it
// was accepted automatically (已自动接单).
func TestAcceptDeadlineTellsTheCustomer(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, map[string]string{"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES": testTemplates}, 10)
	// ps.sim plays WeChat for the API: its messages too.
	ps.env["TAKEOUT_WECHAT_API_BASE"] = ps.sim.URL
	for _, tc := range []struct{ then, template, phrase string }{
		{"reject", "tplRefunded", "超时未接单"},
		{"accept", "tplAccepted", "已自动接单"},
	} {
		ps.setAcceptRule(t, 300, tc.then)
		code := "told-" + tc.then
		user, id, _ := ps.paidOrder(t, code)
		if r := ps.do(t, ps.apis[0], "PUT", "/v1/orders/"+id+"/subscriptions", user, map[string]any{"template_ids": []string{tc.template}}); r.status != 200 {
			t.Fatalf("subscriptions: %d %s", r.status, r.body)
		}
		ps.wx(t, "/sim/subscribe", map[string]any{"openid": "sim-" + code, "template_ids": []string{tc.template}})
		ps.makeDue(t, id)
		waitUntil(t, "the "+tc.template+" message of the order "+tc.then+"ed at its deadline", func() bool {
			return messagesFor(ps.wxMessages(t), id, tc.template) == 1
		})
		for _, m := range ps.wxMessages(t).Messages {
			if m.TemplateID == tc.template && strings.HasSuffix(m.Page, "id="+id) && m.Data["phrase2"]["value"] != tc.phrase {
				t.Errorf("the %s message says %q, want %q", tc.template, m.Data["phrase2"]["value"], tc.phrase)
			}
		}
	}
}
