package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/bill"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/wxsim"
)

// billConfig sets wxsim's bills: their clock and faults.
func (ps *payShop) billConfig(t *testing.T, c wxsim.BillConfig) {
	t.Helper()
	b, _ := json.Marshal(c)
	resp, err := http.Post(ps.sim.URL+"/sim/bills/config", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sim bills config: %d", resp.StatusCode)
	}
}

// reconcile runs a date's reconciliation as admin.
func (ps *payShop) reconcile(t *testing.T, admin, date string) (bill.Reconciliation, response) {
	t.Helper()
	r := ps.do(t, ps.apis[0], "POST", "/admin/v1/reconciliations/"+date+"/run", admin, nil)
	var rec bill.Reconciliation
	if r.status == 200 {
		r.json(t, &rec)
	}
	return rec, r
}

func kindsOf(rec bill.Reconciliation) []string {
	var out []string
	for _, a := range rec.Anomalies {
		out = append(out, a.Kind+" "+a.Ref)
	}
	return out
}

// The day's bills from WeChat Pay (wxsim's, from its own records):
// not out before 10:00 the next day; then matched with no anomaly, its
// fees posted to the ledger once however many runs race; each kind of
// disagreement provoked and found, with its reference; a bill whose hash
// or URL fails is no answer; a run after the fault replaces what the
// last one found.
func TestDailyBillReconciled(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 100, 100)
	admin := ps.staffToken(t, "admin")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	// Three customers (one's same cart would be the same order).
	kept := ps.paidAccepted(t, ps.login(t, "billed-1"), "bill-kept", staff)
	part := ps.paidAccepted(t, ps.login(t, "billed-2"), "bill-part", staff)
	gone := ps.paidAccepted(t, ps.login(t, "billed-3"), "bill-gone", staff)
	for _, r := range []struct{ order, body string }{{part, `{"amount_fen":1000,"reason":"short"}`}, {gone, `{"amount_fen":5500,"reason":"all of it"}`}} {
		if resp := ps.refundPart(t, staff, r.order, "bill-"+r.order, r.body); resp.status != 201 {
			t.Fatalf("refund: %d %s", resp.status, resp.body)
		}
	}
	waitUntil(t, "the refunds to succeed", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE status = 'SUCCESS'") == 2
	})
	now := time.Now().In(bill.Shanghai)
	date := now.Format(time.DateOnly)
	ready := bill.Day(now).AddDate(0, 0, 1).Add(10*time.Hour + 5*time.Minute).Format(time.RFC3339)
	keptTrade := payment.OutTradeNo(mustID(t, kept), 1)
	partRefund := payment.OutRefundNo(payment.OutTradeNo(mustID(t, part), 1)) + "-P1"

	// Before 10:00 tomorrow: not out.
	if _, r := ps.reconcile(t, admin, date); r.status != 409 || r.problemType() != "bill-not-ready" {
		t.Fatalf("a bill not out yet: %d %s", r.status, r.body)
	}
	for name, path := range map[string]string{"not a date": "/admin/v1/reconciliations/2026-13-01/run", "the future": "/admin/v1/reconciliations/2099-01-01/run",
		"older than three months": "/admin/v1/reconciliations/2020-01-01/run"} {
		if r := ps.do(t, ps.apis[0], "POST", path, admin, nil); r.status != 400 {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}

	ps.billConfig(t, wxsim.BillConfig{Now: ready})
	rec, r := ps.reconcile(t, admin, date)
	if r.status != 200 || rec.Status != "done" || len(rec.Anomalies) != 0 || rec.Summary.TradeRows != 5 || rec.Summary.FeesPosted != 5 || rec.TradeHash == "" {
		t.Fatalf("a day that adds up: %d %s\n%s", r.status, r.body, lastLines(ps.apis[0].logs.String(), 5))
	}
	fees := ps.count(t, "SELECT count(*) FROM ledger_entries WHERE kind = 'fee'")
	if fees != 10 {
		t.Errorf("%d fee entries, want 10 (two for each of 3 payments and 2 refunds)", fees)
	}
	for _, o := range []string{kept, part, gone} {
		ps.ledgerHolds(t, o)
	}

	// Five runs at once: the same answer, the fees posted once.
	for _, r := range storm(5, func() response { _, r := ps.reconcile(t, admin, date); return r }) {
		var got bill.Reconciliation
		r.json(t, &got)
		if r.status != 200 || len(got.Anomalies) != 0 {
			t.Errorf("a racing run: %d %s", r.status, r.body)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM ledger_entries WHERE kind = 'fee'"); n != fees {
		t.Errorf("racing runs: %d fee entries, want %d", n, fees)
	}

	// Each kind of disagreement, one at a time.
	for _, tc := range []struct {
		name  string
		fault wxsim.BillConfig
		plant []string
		want  string
	}{
		{"a payment left out of the bill", wxsim.BillConfig{Drop: []string{keptTrade}}, nil, "missing_there " + keptTrade},
		{"a payment we never had", wxsim.BillConfig{Extra: true}, nil, "missing_here T-EXTRA-" + date},
		{"an amount off by a fen", wxsim.BillConfig{AmountOff: map[string]int64{keptTrade: 1}}, nil, "amount " + keptTrade},
		{"a fee not at the rate", wxsim.BillConfig{FeeOff: map[string]int64{keptTrade: 1}}, nil, "fee " + keptTrade},
		{"a refund in another state", wxsim.BillConfig{RefundStatus: map[string]string{partRefund: "PROCESSING"}}, nil, "status " + partRefund},
		{"a fund bill that does not add up", wxsim.BillConfig{FundOff: 100}, nil, "fund 交易/收入"},
		{"a ledger that is not the bill", wxsim.BillConfig{}, []string{
			`UPDATE ledger_entries SET amount_fen = amount_fen + 1 WHERE account = 'wechat_clearing' AND kind = 'sale' AND ref = '` + keptTrade + `'`,
			`UPDATE ledger_entries SET amount_fen = amount_fen - 1 WHERE account = 'merchant_sales' AND ref = '` + keptTrade + `'`,
		}, "ledger " + keptTrade},
	} {
		tc.fault.Now = ready
		ps.billConfig(t, tc.fault)
		for _, q := range tc.plant {
			ps.count(t, q+" RETURNING 1")
		}
		rec, r := ps.reconcile(t, admin, date)
		if r.status != 200 || !slices.Equal(kindsOf(rec), []string{tc.want}) {
			t.Errorf("%s: %d, anomalies %v, want [%s]", tc.name, r.status, kindsOf(rec), tc.want)
		}
		for _, q := range tc.plant { // undone
			ps.count(t, strings.NewReplacer("+ 1", "- 1", "- 1 W", "+ 1 W").Replace(q)+" RETURNING 1")
		}
	}

	// A bill that is not what WeChat Pay hashed, a URL that expired
	// again: no answer, and the date says why.
	for name, fault := range map[string]wxsim.BillConfig{"wrong hash": {WrongHash: true}, "expired URLs": {ExpiredURLs: true}} {
		fault.Now = ready
		ps.billConfig(t, fault)
		if _, r := ps.reconcile(t, admin, date); r.status != 502 || r.problemType() != "upstream-unavailable" {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	got := ps.do(t, ps.apis[0], "GET", "/admin/v1/reconciliations/"+date, admin, nil)
	if got.status != 200 || !strings.Contains(string(got.body), "expired") && !strings.Contains(string(got.body), "SHA1") {
		t.Errorf("the date after failed runs: %d %s", got.status, got.body)
	}

	// Faults gone: the next run finds nothing, replacing what the last
	// ones found.
	ps.billConfig(t, wxsim.BillConfig{Now: ready})
	if rec, r := ps.reconcile(t, admin, date); r.status != 200 || len(rec.Anomalies) != 0 || rec.Error != "" {
		t.Errorf("after the faults: %d %s", r.status, r.body)
	}
	if r := ps.do(t, ps.apis[0], "GET", "/admin/v1/reconciliations/"+date, staff, nil); r.status != 403 {
		t.Errorf("merchant staff read the reconciliation: %d", r.status)
	}
}

// lastLines is the end of a log, for a failure's message.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
