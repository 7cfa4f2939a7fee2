package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/takeout/takeout/internal/wxsim"
)

const testTemplates = "ACCEPTED=tplAccepted,DELIVERING=tplDelivering,COMPLETED=tplCompleted,CANCELLED=tplCancelled,REFUNDED=tplRefunded"

// wx posts to the stack's WeChat simulator.
func (s *stack) wx(t *testing.T, path string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(s.env["TAKEOUT_WECHAT_API_BASE"]+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("wxsim %s: %d", path, resp.StatusCode)
	}
}

// wxMessages reads what the simulator delivered.
func (s *stack) wxMessages(t *testing.T) wxsim.MessageLog {
	t.Helper()
	resp, err := http.Get(s.env["TAKEOUT_WECHAT_API_BASE"] + "/sim/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l wxsim.MessageLog
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l
}

// messagesFor counts the delivered messages of one order with one
// template.
func messagesFor(l wxsim.MessageLog, orderID, template string) int {
	n := 0
	for _, m := range l.Messages {
		if m.TemplateID == template && strings.HasSuffix(m.Page, "id="+orderID) {
			n++
		}
	}
	return n
}

// outcome reads what became of an order's subscription.
func (sh *shop) outcome(t *testing.T, orderID, template string) string {
	t.Helper()
	var o *string
	if err := sh.pool.QueryRow(t.Context(), `SELECT outcome FROM order_subscriptions WHERE order_id = $1 AND template_id = $2`, orderID, template).Scan(&o); err != nil {
		t.Fatal(err)
	}
	if o == nil {
		return ""
	}
	return *o
}

// subscribedOrder places and pays an order for customer code, reports
// the templates to the API and lets WeChat allow those in quota.
func (sh *shop) subscribedOrder(t *testing.T, code string, granted, quota []string) string {
	t.Helper()
	user := sh.login(t, code)
	p := sh.place(t, user, code, 1)
	sh.markPaid(t, p.ID)
	if r := sh.do(t, sh.apis[0], "PUT", "/v1/orders/"+p.ID+"/subscriptions", user, map[string]any{"template_ids": granted}); r.status != 200 {
		t.Fatalf("subscriptions: %d %s", r.status, r.body)
	}
	if len(quota) > 0 {
		sh.wx(t, "/sim/subscribe", map[string]any{"openid": "sim-" + code, "template_ids": quota})
	}
	return p.ID
}

// Each status change the customer subscribed to sends one message, with
// WeChat's faults: duplicate taps on two instances, an access token that
// stopped working, a refusal, WeChat down, slow, and slower than our
// timeout.
func TestSubscribeMessagesOncePerStatus(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, map[string]string{
		"TAKEOUT_WECHAT_SUBSCRIBE_TEMPLATES": testTemplates, "TAKEOUT_WECHAT_TIMEOUT": "1s",
		"TAKEOUT_JOB_POLL_INTERVAL": "50ms", "TAKEOUT_JOB_RETRY_MAX_DELAY": "1s",
	}, 1000)
	admin := sh.admin
	act := func(api *instance, id, action string) response {
		return sh.do(t, api, "POST", "/admin/v1/orders/"+id+"/"+action, admin, nil)
	}

	t.Run("bad template ids change nothing", func(t *testing.T) {
		user := sh.login(t, "bad-tpl")
		p := sh.place(t, user, "bad-tpl", 1)
		for _, body := range []any{
			map[string]any{"template_ids": []string{"tplAccepted", "not-ours"}},
			map[string]any{"template_ids": []string{}},
			map[string]any{"template_ids": "tplAccepted"},
		} {
			if r := sh.do(t, sh.apis[0], "PUT", "/v1/orders/"+p.ID+"/subscriptions", user, body); r.status != 400 && r.status != 422 {
				t.Errorf("%v: %d %s", body, r.status, r.body)
			}
		}
		other := sh.login(t, "not-the-customer")
		if r := sh.do(t, sh.apis[0], "PUT", "/v1/orders/"+p.ID+"/subscriptions", other, map[string]any{"template_ids": []string{"tplAccepted"}}); r.status != 404 {
			t.Errorf("someone else's order: %d", r.status)
		}
		if n := sh.count(t, `SELECT count(*) FROM order_subscriptions WHERE order_id = $1`, p.ID); n != 0 {
			t.Errorf("%d subscriptions stored", n)
		}
	})

	id := sh.subscribedOrder(t, "msg-a", []string{"tplAccepted", "tplDelivering", "tplCompleted"}, []string{"tplAccepted", "tplDelivering"})

	t.Run("a report sent again, at once on two instances, changes nothing", func(t *testing.T) {
		user := sh.login(t, "msg-a")
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				r := sh.do(t, sh.apis[i%2], "PUT", "/v1/orders/"+id+"/subscriptions", user, map[string]any{"template_ids": []string{"tplAccepted", "tplDelivering"}})
				if r.status != 200 {
					t.Errorf("report again: %d %s", r.status, r.body)
				}
			})
		}
		wg.Wait()
		if n := sh.count(t, `SELECT count(*) FROM order_subscriptions WHERE order_id = $1 AND used_for IS NULL AND outcome IS NULL`, id); n != 3 {
			t.Errorf("%d open subscriptions after the repeats, want the 3 first reported", n)
		}
	})

	t.Run("double taps on two instances send one message", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() { act(sh.apis[i%2], id, "accept") })
		}
		wg.Wait()
		waitUntil(t, "the accepted message", func() bool { return sh.outcome(t, id, "tplAccepted") != "" })
		l := sh.wxMessages(t)
		if n := messagesFor(l, id, "tplAccepted"); n != 1 || sh.outcome(t, id, "tplAccepted") != "sent" {
			t.Fatalf("accepted: %d messages, outcome %q", n, sh.outcome(t, id, "tplAccepted"))
		}
		m := l.Messages[0]
		if m.ToUser != "sim-msg-a" || m.Data["phrase2"]["value"] != "商家已接单" || m.Data["character_string1"]["value"] != id || m.Data["thing3"]["value"] != "Order Kitchen" || m.State != "formal" {
			t.Errorf("message %+v", m)
		}
		if l.PlainCalls != 1 || l.ForcedCalls != 0 {
			t.Errorf("stable_token calls: plain %d forced %d, want 1 and 0", l.PlainCalls, l.ForcedCalls)
		}
	})

	t.Run("a token WeChat stopped taking is refreshed once", func(t *testing.T) {
		sh.wx(t, "/sim/messages/config", wxsim.MessageConfig{ExpireToken: true})
		act(sh.apis[1], id, "dispatch")
		waitUntil(t, "the delivering message", func() bool { return sh.outcome(t, id, "tplDelivering") != "" })
		l := sh.wxMessages(t)
		if n := messagesFor(l, id, "tplDelivering"); n != 1 || sh.outcome(t, id, "tplDelivering") != "sent" {
			t.Errorf("delivering: %d messages, outcome %q", n, sh.outcome(t, id, "tplDelivering"))
		}
		if l.PlainCalls+l.ForcedCalls != 2 {
			t.Errorf("stable_token calls: plain %d forced %d, want one more call", l.PlainCalls, l.ForcedCalls)
		}
	})

	t.Run("a refusal is final", func(t *testing.T) {
		act(sh.apis[0], id, "complete")
		waitUntil(t, "the completed message settled", func() bool { return sh.outcome(t, id, "tplCompleted") != "" })
		if o := sh.outcome(t, id, "tplCompleted"); o != "refused" {
			t.Errorf("outcome %q, want refused", o)
		}
		waitUntil(t, "the refused message's job completed after one attempt", func() bool {
			return sh.count(t, `SELECT count(*) FROM river_job WHERE kind = 'subscribemsg.send' AND args->>'order_id' = $1
				AND args->>'status' = 'COMPLETED' AND attempt = 1 AND state = 'completed'`, id) == 1
		})
		if n := messagesFor(sh.wxMessages(t), id, "tplCompleted"); n != 0 {
			t.Errorf("%d completed messages delivered", n)
		}
	})

	t.Run("WeChat down, then back: one message", func(t *testing.T) {
		down := sh.subscribedOrder(t, "msg-b", []string{"tplAccepted"}, []string{"tplAccepted"})
		sh.wx(t, "/sim/messages/config", wxsim.MessageConfig{Down: true})
		act(sh.apis[0], down, "accept")
		waitUntil(t, "failed attempts", func() bool {
			return sh.count(t, `SELECT count(*) FROM river_job WHERE kind = 'subscribemsg.send' AND args->>'order_id' = $1 AND attempt >= 2`, down) == 1
		})
		sh.wx(t, "/sim/messages/config", wxsim.MessageConfig{})
		waitUntil(t, "the message after WeChat is back", func() bool { return sh.outcome(t, down, "tplAccepted") != "" })
		if n := messagesFor(sh.wxMessages(t), down, "tplAccepted"); n != 1 || sh.outcome(t, down, "tplAccepted") != "sent" {
			t.Errorf("%d messages, outcome %q", n, sh.outcome(t, down, "tplAccepted"))
		}
	})

	t.Run("slow WeChat: one message", func(t *testing.T) {
		o := sh.subscribedOrder(t, "msg-slow", []string{"tplAccepted"}, []string{"tplAccepted"})
		sh.wx(t, "/sim/messages/config", wxsim.MessageConfig{SlowMS: 400})
		act(sh.apis[1], o, "accept")
		waitUntil(t, "the slow message", func() bool { return sh.outcome(t, o, "tplAccepted") != "" })
		if n := messagesFor(sh.wxMessages(t), o, "tplAccepted"); n != 1 || sh.outcome(t, o, "tplAccepted") != "sent" {
			t.Errorf("slow: %d messages, outcome %q", n, sh.outcome(t, o, "tplAccepted"))
		}
	})

	t.Run("WeChat answers after our timeout: one message", func(t *testing.T) {
		o := sh.subscribedOrder(t, "msg-slower", []string{"tplAccepted"}, []string{"tplAccepted"})
		sh.wx(t, "/sim/messages/config", wxsim.MessageConfig{SlowMS: 1500})
		act(sh.apis[1], o, "accept")
		waitUntil(t, "an attempt timed out", func() bool {
			return sh.count(t, `SELECT count(*) FROM river_job WHERE kind = 'subscribemsg.send' AND args->>'order_id' = $1 AND cardinality(errors) >= 1`, o) == 1
		})
		sh.wx(t, "/sim/messages/config", wxsim.MessageConfig{})
		// Whichever reaches WeChat first uses the one-time subscription:
		// the timed-out send (then the retry finds it used, 43101, and
		// stops: refused) or, when the retry comes before WeChat's slow
		// answer, the retry (sent). Either way the customer gets one.
		waitUntil(t, "the retried message settled", func() bool { return sh.outcome(t, o, "tplAccepted") != "" })
		if n, out := messagesFor(sh.wxMessages(t), o, "tplAccepted"), sh.outcome(t, o, "tplAccepted"); n != 1 || (out != "refused" && out != "sent") {
			t.Errorf("%d messages, outcome %q, want 1 and refused or sent", n, out)
		}
	})

	t.Run("no subscription, no message", func(t *testing.T) {
		user := sh.login(t, "msg-none")
		p := sh.place(t, user, "msg-none", 1)
		sh.markPaid(t, p.ID)
		act(sh.apis[0], p.ID, "accept")
		if n := sh.count(t, `SELECT count(*) FROM river_job WHERE kind = 'subscribemsg.send' AND args->>'order_id' = $1`, p.ID); n != 0 {
			t.Errorf("%d message jobs for an order nobody subscribed to", n)
		}
	})
}
