package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/wxsim"
)

// span is what the console exporter writes of a span.
type span struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Links       []struct {
		SpanContext struct{ TraceID, SpanID string }
	}
	Attributes []struct {
		Key   string
		Value struct{ Value any }
	}
	InstrumentationScope struct{ Name string }
}

func (s span) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return fmt.Sprint(a.Value.Value)
		}
	}
	return ""
}

// spans reads every span an instance exported so far.
func spans(t *testing.T, inst *instance) []span {
	t.Helper()
	var out []span
	dec := json.NewDecoder(strings.NewReader(inst.stdout.String()))
	for dec.More() {
		var s span
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("console spans: %v", err)
		}
		out = append(out, s)
	}
	return out
}

// waitSpans waits until the instance exported spans that satisfy ok.
func waitSpans(t *testing.T, inst *instance, what string, ok func([]span) bool) []span {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := spans(t, inst)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			t.Fatalf("no %s among %d spans: %v", what, len(got), names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// traceOf returns the spans of one trace, and fails unless they form one
// tree: a single root, every other span's parent among them.
func traceOf(t *testing.T, all []span, traceID string) (root span, members []span) {
	t.Helper()
	ids := map[string]bool{}
	for _, s := range all {
		if s.SpanContext.TraceID == traceID {
			members = append(members, s)
			ids[s.SpanContext.SpanID] = true
		}
	}
	roots := 0
	for _, s := range members {
		if !ids[s.Parent.SpanID] {
			roots++
			root = s
		}
	}
	if roots != 1 {
		t.Fatalf("trace %s has %d roots among %d spans, want one connected tree", traceID, roots, len(members))
	}
	return root, members
}

func has(members []span, pred func(span) bool) bool {
	for _, s := range members {
		if pred(s) {
			return true
		}
	}
	return false
}

// linkedTo finds a span that links to a span of traceID and is named name.
func linkedTo(all []span, traceID, name string) bool {
	for _, s := range all {
		for _, l := range s.Links {
			if l.SpanContext.TraceID == traceID && s.Name == name {
				return true
			}
		}
	}
	return false
}

var tracedEnv = map[string]string{
	"OTEL_TRACES_EXPORTER":       "console",
	"OTEL_BSP_SCHEDULE_DELAY":    "50",
	"TAKEOUT_TRACE_TRUSTED_NETS": "127.0.0.1/32,::1",
	"TAKEOUT_ORDER_PAY_WINDOW":   "2s",
}

// One submit is one trace: the HTTP span (continuing the caller's
// traceparent, which the answer names), the Redis claim, the placement's
// one statement; the request's log lines name it; and the span says which
// idempotency layer answered. The order's payment timeout, queued by the
// sweep past its deadline, runs in a trace that links back to the
// sweep's run.
func TestASubmitIsOneTrace(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, tracedEnv, 10)
	api := ps.apis[0]
	user := ps.login(t, "traced")
	c := ps.confirm(t, api, user, ps.cart(1))
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest("POST", api.url+"/v1/orders", strings.NewReader(fmt.Sprintf(`{"confirm_token":%q}`, c.ConfirmToken)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+user)
	req.Header.Set("Idempotency-Key", "traced-1")
	req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	r := ps.send(t, req)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	if tp := r.header.Get("Traceparent"); !strings.HasPrefix(tp, "00-"+traceID+"-") {
		t.Errorf("answer's traceparent %q does not continue trace %s", tp, traceID)
	}

	var sweepTrace string
	all := waitSpans(t, api, "the payment timeout's run, linked to the sweep's", func(all []span) bool {
		for _, s := range all {
			if s.Name == "river.work/order.payment_timeout_sweep" && linkedTo(all, s.SpanContext.TraceID, "river.work/order.payment_timeout") {
				sweepTrace = s.SpanContext.TraceID
				return true
			}
		}
		return false
	})
	if sweepTrace == traceID {
		t.Error("the sweep ran in the submit's trace")
	}
	root, members := traceOf(t, all, traceID)
	if root.Name != "POST /v1/orders" || root.attr("http.route") != "/v1/orders" {
		t.Errorf("root span %q (route %q), want POST /v1/orders", root.Name, root.attr("http.route"))
	}
	if got := root.attr("takeout.idempotency.redis"); got != "claimed" {
		t.Errorf("takeout.idempotency.redis = %q, want claimed (the span says which layer answered)", got)
	}
	for what, pred := range map[string]func(span) bool{
		"a Redis claim": func(s span) bool {
			return strings.Contains(s.InstrumentationScope.Name, "redisotel") && strings.HasPrefix(s.Name, "eval")
		},
		// One statement writes the order and its stock.
		"the placement's statement": func(s span) bool {
			return strings.Contains(s.InstrumentationScope.Name, "otelpgx") && strings.Contains(s.attr("db.query.text")+s.Name, "OrderPlace")
		},
	} {
		if !has(members, pred) {
			t.Errorf("the submit's trace has no span for %s", what)
		}
	}

	// Every log line of the request names its trace.
	found := false
	sc := bufio.NewScanner(bytes.NewReader([]byte(api.logs.String())))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var raw map[string]any
		if json.Unmarshal(sc.Bytes(), &raw) != nil || raw["route"] != "/v1/orders" || raw["msg"] != "http request" {
			continue
		}
		found = true
		if raw["trace_id"] != traceID || raw["span_id"] == nil {
			t.Errorf("access log line of the submit: trace_id %v span_id %v, want trace %s", raw["trace_id"], raw["span_id"], traceID)
		}
	}
	if !found {
		t.Error("no access log line of the submit")
	}
}

// A payment callback is one trace of its own (WeChat Pay sends no
// traceparent): its HTTP span, the SQL that applies it and the insert of
// the merchant's webhook, whose later run links back to it and calls the
// merchant with a traceparent of its own trace.
func TestACallbackIsOneTrace(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, tracedEnv, 10)
	user := ps.login(t, "traced-payer")
	o := ps.place(t, user, "traced-pay", 1)
	ps.pay(t, user, o.ID)
	res := ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1), Retries: 5, RetryMS: 20})
	if len(res.Answers) != 1 || res.Answers[0] != 204 && res.Answers[0] != 200 {
		t.Fatalf("callback answered %v", res.Answers)
	}
	api := ps.apis[0]
	var callback span
	all := waitSpans(t, api, "the callback and its webhook's run", func(all []span) bool {
		for _, s := range all {
			if s.Name == "POST /v1/payments/wechat/notify" {
				callback = s
				return linkedTo(all, s.SpanContext.TraceID, "river.work/webhook.deliver")
			}
		}
		return false
	})
	_, members := traceOf(t, all, callback.SpanContext.TraceID)
	if !has(members, func(s span) bool {
		return strings.Contains(s.InstrumentationScope.Name, "otelpgx") && strings.EqualFold(s.Name, "commit")
	}) {
		t.Error("the callback's trace has no committed transaction")
	}
	if !has(members, func(s span) bool { return s.Name == "river.insert_many" }) {
		t.Error("the callback's trace has no job insert")
	}
	// The webhook's run calls the merchant in a trace of its own, which
	// links back to the callback's.
	for _, s := range all {
		if s.Name != "river.work/webhook.deliver" || len(s.Links) == 0 || s.Links[0].SpanContext.TraceID != callback.SpanContext.TraceID {
			continue
		}
		_, run := traceOf(t, all, s.SpanContext.TraceID)
		if !has(run, func(c span) bool {
			return strings.Contains(c.InstrumentationScope.Name, "otelhttp") && c.attr("http.request.method") == "POST"
		}) {
			t.Error("the webhook's run has no span of its call to the merchant")
		}
	}
}
