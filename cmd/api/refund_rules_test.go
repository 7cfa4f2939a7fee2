package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/wxsim"
)

// refundRules sets wxsim's refund rules.
func (ps *payShop) refundRules(t *testing.T, rules wxsim.RefundRules) {
	t.Helper()
	b, _ := json.Marshal(rules)
	resp, err := http.Post(ps.sim.URL+"/sim/refund-rules", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sim refund rules: %d", resp.StatusCode)
	}
}

// refundsTaken reads the refunds wxsim accepted of a payment, in order.
func (ps *payShop) refundsTaken(t *testing.T, outTradeNo string) []wxsim.RefundTaken {
	t.Helper()
	resp, err := http.Get(ps.sim.URL + "/sim/refunds")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var log wxsim.RefundLog
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil {
		t.Fatal(err)
	}
	return log.Trades[outTradeNo]
}

// WeChat Pay's rules for the refunds of one payment: four asked for at
// once reach it in the order they were asked, each at least its gap
// after the last; its documented errors are each handled as what they
// mean (back off, retry later, an operator's); a payment refunded 50
// times takes no more.
func TestRefundsOfAPaymentTakeTurns(t *testing.T) {
	t.Parallel()
	const gap = time.Second
	ps := newPayShop(t, map[string]string{"TAKEOUT_WXPAY_REFUND_GAP": gap.String()}, 100, 100)
	wxGap := int((gap - 100*time.Millisecond) / time.Millisecond)
	ps.refundRules(t, wxsim.RefundRules{GapMS: &wxGap})
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	admin := ps.staffToken(t, "admin")
	user := ps.login(t, "turns")
	id := ps.paidAccepted(t, user, "turns", staff) // 5500 paid
	trade := payment.OutTradeNo(mustID(t, id), 1)

	var n atomic.Int32
	storm(4, func() response {
		return ps.refundPart(t, staff, id, fmt.Sprintf("turn-%d", n.Add(1)), `{"amount_fen":100,"reason":"turns"}`)
	})
	waitUntil(t, "four refunds to succeed", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", id) == 4
	})
	taken := ps.refundsTaken(t, trade)
	var nos []string
	for i, r := range taken {
		nos = append(nos, r.OutRefundNo)
		if i > 0 && r.At.Sub(taken[i-1].At) < gap-100*time.Millisecond {
			t.Errorf("refund %s reached WeChat %s after the last", r.OutRefundNo, r.At.Sub(taken[i-1].At))
		}
	}
	want := []string{payment.OutRefundNo(trade) + "-P1", payment.OutRefundNo(trade) + "-P2", payment.OutRefundNo(trade) + "-P3", payment.OutRefundNo(trade) + "-P4"}
	if !slices.Equal(nos, want) {
		t.Errorf("WeChat took %v, want %v in that order", nos, want)
	}

	// Each documented error, as what it means.
	for _, tc := range []struct {
		code, status, lastError string
	}{
		{"FREQUENCY_LIMITED", "SUCCESS", "FREQUENCY_LIMITED"}, // backed off, sent again
		{"SYSTEM_ERROR", "SUCCESS", "SYSTEM_ERROR"},           // retried
		{"NOT_ENOUGH", "SUCCESS", "NOT_ENOUGH"},               // the balance short: retried once funds are there
		{"USER_ACCOUNT_ABNORMAL", "FAILED", "USER_ACCOUNT_ABNORMAL"},
		{"PARAM_ERROR", "FAILED", "PARAM_ERROR"},
	} {
		ps.refundRules(t, wxsim.RefundRules{Errors: []wxsim.RefundError{{Code: tc.code, Times: 2}}})
		r := ps.refundPart(t, staff, id, "error-"+tc.code, `{"amount_fen":100,"reason":"errors"}`)
		var ref payment.Refund
		r.json(t, &ref)
		if r.status != 201 {
			t.Fatalf("%s: refund %d %s", tc.code, r.status, r.body)
		}
		waitUntil(t, tc.code+" to end", func() bool {
			return ps.count(t, "SELECT count(*) FROM refunds WHERE out_refund_no = $1 AND status = $2 AND last_error LIKE $3",
				ref.OutRefundNo, tc.status, tc.lastError+"%") == 1
		})
		if tc.status == "FAILED" {
			// Listed for an operator, who settles it outside WeChat.
			l := ps.do(t, ps.apis[0], "GET", "/admin/v1/refunds?status=FAILED", admin, nil)
			if l.status != 200 || !strings.Contains(string(l.body), ref.OutRefundNo) {
				t.Errorf("%s: the refund is not listed for an operator: %d %s", tc.code, l.status, l.body)
			}
			if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/refunds/"+ref.OutRefundNo+"/settle", admin, map[string]any{"note": "paid in cash"}); r.status != 200 {
				t.Errorf("%s: settle: %d %s", tc.code, r.status, r.body)
			}
		}
		ps.refundRules(t, wxsim.RefundRules{Errors: nil})
	}
	ps.ledgerHolds(t, id)
	if n := ps.count(t, "SELECT count(*) FROM ledger_entries WHERE order_id = $1 AND account = 'refunds_outside'", id); n != 2 {
		t.Errorf("two refunds settled outside WeChat: %d entries in refunds_outside", n)
	}

	// Fifty refunds of the payment (the rest made up here): the 51st is
	// refused, and nothing is written.
	var pay int64
	if err := ps.stack.pool.QueryRow(t.Context(), "SELECT id FROM payments WHERE order_id = $1", id).Scan(&pay); err != nil {
		t.Fatal(err)
	}
	have := ps.count(t, "SELECT count(*) FROM refunds WHERE payment_id = $1", pay)
	for i := have; i < payment.MaxRefundsPerPayment; i++ {
		ps.count(t, `INSERT INTO refunds (payment_id, order_id, out_refund_no, amount_fen, reason, status, partial)
			VALUES ($1, $2, $3, 1, 'made up', 'SETTLED', true) RETURNING 1`, pay, id, fmt.Sprintf("R-made-up-%d", i))
	}
	if r := ps.refundPart(t, staff, id, "fifty-first", `{"amount_fen":1,"reason":"one more"}`); r.status != 409 || r.problemType() != "refund-limit-reached" {
		t.Errorf("the 51st refund: %d %s", r.status, r.body)
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE payment_id = $1", pay); n != payment.MaxRefundsPerPayment {
		t.Errorf("%d refunds, want %d", n, payment.MaxRefundsPerPayment)
	}
}
