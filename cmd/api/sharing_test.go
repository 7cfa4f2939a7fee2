package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/bill"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/sharing"
	"github.com/takeout/takeout/internal/wxsim"
)

const testSubMchID = "1900000222"

// newPartnerShop is a pay shop in the service-provider mode: quick
// shares (wxsim's minute is 250ms here; the API waits 1.3s, as WeChat
// Pay's success_time, which paid_at is, is whole seconds) and a quick
// sweep; the shop's merchant is not onboarded yet.
func newPartnerShop(t *testing.T, extra map[string]string, stocks ...int32) *payShop {
	t.Helper()
	env := map[string]string{
		"TAKEOUT_WXPAY_MODE":             "partner",
		"TAKEOUT_SHARING_AFTER_PAY":      "1300ms",
		"TAKEOUT_SHARING_POLL":           "50ms",
		"TAKEOUT_SHARING_SWEEP_INTERVAL": "200ms",
	}
	for k, v := range extra {
		env[k] = v
	}
	ps := newPayShop(t, env, stocks...)
	ps.sharingConfig(t, wxsim.SharingConfig{MinAgeMS: 250})
	return ps
}

// sharingConfig sets wxsim's profit-sharing knobs.
func (ps *payShop) sharingConfig(t *testing.T, c wxsim.SharingConfig) {
	t.Helper()
	b, _ := json.Marshal(c)
	resp, err := http.Post(ps.sim.URL+"/sim/sharing", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sim sharing: %d", resp.StatusCode)
	}
}

// simSharing reads wxsim's view of the sharing money.
func (ps *payShop) simSharing(t *testing.T) wxsim.SharingState {
	t.Helper()
	resp, err := http.Get(ps.sim.URL + "/sim/sharing")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st wxsim.SharingState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// simTxn is wxsim's view of one trade's sharing money.
func (ps *payShop) simTxn(t *testing.T, outTradeNo string) wxsim.SharingTxn {
	t.Helper()
	for _, tx := range ps.simSharing(t).Transactions {
		if tx.OutTradeNo == outTradeNo {
			return tx
		}
	}
	t.Fatalf("wxsim has no sharing transaction %s", outTradeNo)
	return wxsim.SharingTxn{}
}

// onboard gives the shop's merchant its sub-merchant account.
func (ps *payShop) onboard(t *testing.T, admin string) {
	t.Helper()
	if r := ps.do(t, ps.apis[0], "PUT", "/admin/v1/merchants/"+ps.merchantID+"/sub-merchant", admin, map[string]any{"sub_mchid": testSubMchID}); r.status != 200 {
		t.Fatalf("onboard: %d %s", r.status, r.body)
	}
}

// completedOrder pays, accepts and completes an order of 5500; it
// returns the order and its out_trade_no.
func (ps *payShop) completedOrder(t *testing.T, user, key, staff string) (orderID, outTradeNo string) {
	t.Helper()
	orderID = ps.paidAccepted(t, user, key, staff)
	for _, step := range []string{"dispatch", "complete"} {
		if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+orderID+"/"+step, staff, nil); r.status != 200 {
			t.Fatalf("%s: %d %s", step, r.status, r.body)
		}
	}
	return orderID, payment.OutTradeNo(mustID(t, orderID), 1)
}

// sharingRows reads an order's profit-sharing requests as operators do.
func (ps *payShop) sharingRows(t *testing.T, admin, orderID string) []sharing.Request {
	t.Helper()
	r := ps.do(t, ps.apis[0], "GET", "/admin/v1/profit-sharing?status=all&order_id="+orderID, admin, nil)
	if r.status != 200 {
		t.Fatalf("list sharing: %d %s", r.status, r.body)
	}
	var out sharing.Requests
	r.json(t, &out)
	return out.Requests
}

// ledgerOf is an order's ledger balances by account.
func (ps *payShop) ledgerOf(t *testing.T, orderID string) map[string]int64 {
	t.Helper()
	rows, err := ps.pool.Query(t.Context(), "SELECT account, sum(amount_fen)::bigint FROM ledger_entries WHERE order_id = $1 GROUP BY account HAVING sum(amount_fen) <> 0", orderID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var a string
		var v int64
		if err := rows.Scan(&a, &v); err != nil {
			t.Fatal(err)
		}
		out[a] = v
	}
	return out
}

// In the service-provider mode: a shop pays only once onboarded; its
// payment is the sub-merchant's, frozen; completion shares the platform's
// commission once and unfreezes the rest, however many copies of the
// share's job race; refunds after that first get the commission's part
// back from the platform's account, to the fen, and the ledger and
// WeChat's books agree at each step.
func TestProfitSharing(t *testing.T) {
	t.Parallel()
	ps := newPartnerShop(t, nil, 100, 100)
	admin := ps.staffToken(t, "admin")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	user := ps.login(t, "sharing")

	// Not onboarded: no payment, and nothing written.
	o := ps.place(t, user, "early", 1)
	r := ps.do(t, ps.apis[0], "POST", "/v1/orders/"+o.ID+"/pay", user, nil)
	if r.status != 409 || !strings.Contains(string(r.body), "merchant-not-onboarded") {
		t.Fatalf("pay before onboarding: %d %s", r.status, r.body)
	}
	if n := ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1", o.ID); n != 0 {
		t.Errorf("a refused pay wrote %d payments", n)
	}
	path := "/admin/v1/merchants/" + ps.merchantID + "/sub-merchant"
	for name, tt := range map[string]struct {
		token  string
		body   any
		status int
	}{
		"letters":          {admin, map[string]any{"sub_mchid": "19000abc"}, 400},
		"too short":        {admin, map[string]any{"sub_mchid": "1234"}, 400},
		"missing":          {admin, map[string]any{}, 400},
		"bad app id":       {admin, map[string]any{"sub_mchid": testSubMchID, "sub_appid": "app"}, 400},
		"the merchant own": {staff, map[string]any{"sub_mchid": testSubMchID}, 403},
	} {
		if r := ps.do(t, ps.apis[0], "PUT", path, tt.token, tt.body); r.status != tt.status {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, tt.status)
		}
	}
	if n := ps.count(t, "SELECT count(*) FROM merchants WHERE sub_mchid IS NOT NULL"); n != 0 {
		t.Fatalf("refused requests onboarded %d merchants", n)
	}
	ps.onboard(t, admin)
	other := createMerchant(t, ps.stack, ps.apis[0], "Other Kitchen")
	if r := ps.do(t, ps.apis[0], "PUT", "/admin/v1/merchants/"+other+"/sub-merchant", admin, map[string]any{"sub_mchid": testSubMchID}); r.status != 409 {
		t.Errorf("a second merchant with the same sub_mchid: %d %s", r.status, r.body)
	}
	if r := ps.do(t, ps.apis[0], "PUT", "/admin/v1/merchants/"+ps.merchantID+"/commission", admin, map[string]any{"commission_bps": 800}); r.status != 200 {
		t.Fatalf("commission: %d %s", r.status, r.body)
	}

	// Paid: five concurrent copies of the partner callback apply once,
	// and the payment is the sub-merchant's, frozen for sharing.
	c := ps.confirm(t, ps.apis[0], user, ps.cart(3, 1))
	sr := ps.submit(t, ps.apis[0], user, "shared", c.ConfirmToken)
	if sr.status != 201 {
		t.Fatalf("submit: %d %s", sr.status, sr.body)
	}
	id := placedOrder(t, sr).ID
	ps.pay(t, user, id)
	trade := payment.OutTradeNo(mustID(t, id), 1)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: trade, Copies: 5, Concurrent: true, Retries: 10, RetryMS: 20})
	waitUntil(t, "the order to be paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", id) == 1
	})
	ps.expectOnce(t, id, "SELECT count(*) FROM payments WHERE order_id = $1 AND sub_mchid = '"+testSubMchID+"' AND profit_sharing AND status = 'SUCCESS'",
		"SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'",
		"SELECT count(DISTINCT journal) FROM ledger_entries WHERE order_id = $1")
	if got := ps.simTxn(t, trade); got.SubMchID != testSubMchID || got.Frozen != 5500 {
		t.Fatalf("at WeChat: %+v, want 5500 frozen for %s", got, testSubMchID)
	}

	// Completed (twice at once: one transition): the share is recorded
	// with the completion. Copies of its job race its sending; one
	// sharing order goes out, one journal is posted.
	for _, step := range []string{"accept", "dispatch"} {
		if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/"+step, staff, nil); r.status != 200 {
			t.Fatalf("%s: %d %s", step, r.status, r.body)
		}
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/complete", staff, nil) })
	}
	wg.Wait()
	shareNo := sharing.ShareNo(trade, 1)
	for range 6 {
		if _, err := ps.pool.Exec(t.Context(), `INSERT INTO river_job (kind, args, state, scheduled_at, max_attempts)
			SELECT 'sharing.share', jsonb_build_object('out_no', $1::text), 'scheduled', paid_at + interval '1300 milliseconds', 5
			FROM payments WHERE out_trade_no = $2`, shareNo, trade); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the share to end", func() bool {
		return ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND kind = 'share' AND status = 'SUCCESS'", id) == 1
	})
	ps.expectOnce(t, id, "SELECT count(*) FROM profit_sharings WHERE order_id = $1",
		"SELECT count(DISTINCT journal) FROM ledger_entries WHERE order_id = $1 AND kind = 'share'")
	rows := ps.sharingRows(t, admin, id)
	if len(rows) != 1 || rows[0].OutNo != shareNo || rows[0].AmountFen != 440 || rows[0].UnfrozenFen != 5060 || rows[0].Cause != sharing.CauseCompleted {
		t.Errorf("the share: %+v, want %s: 440 (8%% of 5500) to the platform, 5060 unfrozen, for completion", rows, shareNo)
	}
	want := map[string]int64{"platform_shared": 440, "merchant_settled": 5060, "merchant_sales": -5500, "merchant_commission": 440, "platform_commission": -440}
	if diff := cmp.Diff(want, ps.ledgerOf(t, id)); diff != "" {
		t.Errorf("the ledger after the share (-want +got):\n%s", diff)
	}
	if got := ps.simTxn(t, trade); got.Frozen != 0 || got.Shared != 440 || got.Unfrozen != 5060 {
		t.Errorf("at WeChat after the share: %+v", got)
	}
	ps.ledgerHolds(t, id)

	// A fifth refunded: a fifth of the commission (88) comes back from
	// the platform first; then the rest: the other 352.
	for i, step := range []struct {
		key    string
		amount int64
		back   int64
	}{{"fifth", 1100, 88}, {"rest", 4400, 352}} {
		body := `{"amount_fen":` + itoa(step.amount) + `,"reason":"cold"}`
		if r := ps.refundPart(t, staff, id, step.key, body); r.status != 201 {
			t.Fatalf("refund %s: %d %s", step.key, r.status, r.body)
		}
		waitUntil(t, "the refund to succeed", func() bool {
			return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", id) == i+1
		})
		if n := ps.count(t, `SELECT count(*) FROM profit_sharings s JOIN refunds f ON f.id = s.refund_id
			WHERE s.order_id = $1 AND s.kind = 'return' AND s.status = 'SUCCESS' AND s.amount_fen = `+itoa(step.back)+` AND s.finished_at <= f.sent_at`, id); n != 1 {
			t.Errorf("refund %s: %d returns of %d finished before it was sent, want 1; all: %+v", step.key, n, step.back, ps.sharingRows(t, admin, id))
		}
		ps.ledgerHolds(t, id)
	}
	waitUntil(t, "the order to be refunded", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDED'", id) == 1
	})
	for acct, v := range ps.ledgerOf(t, id) {
		if acct == "wechat_clearing" || acct == "platform_shared" || acct == "merchant_settled" || strings.Contains(acct, "commission") {
			t.Errorf("after everything was refunded, %s holds %d", acct, v)
		}
	}
	got := ps.simTxn(t, trade)
	if got.Refunded != 5500 || got.Returned != 440 || got.FromBalance != 5500 {
		t.Errorf("at WeChat after the refunds: %+v", got)
	}
	if bal := ps.simSharing(t).Balances; bal[testMchID] != 0 || bal[testSubMchID] != 0 {
		t.Errorf("balances at WeChat: %v, want the platform and the merchant at 0", bal)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// A return WeChat Pay refuses for lack of balance (the platform withdrew
// its commission) holds its refund, unsent, and says so to operators; a
// retry before the account is topped up is refused the same way, after
// it the return's next attempt goes through and then the refund.
func TestProfitSharingFailedReturn(t *testing.T) {
	t.Parallel()
	ps := newPartnerShop(t, nil, 100, 100)
	admin := ps.staffToken(t, "admin")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	ps.onboard(t, admin)
	if r := ps.do(t, ps.apis[0], "PUT", "/admin/v1/merchants/"+ps.merchantID+"/commission", admin, map[string]any{"commission_bps": 1000}); r.status != 200 {
		t.Fatalf("commission: %d %s", r.status, r.body)
	}
	id, trade := ps.completedOrder(t, ps.login(t, "returns"), "returns", staff)
	waitUntil(t, "the share to end", func() bool {
		return ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND status = 'SUCCESS'", id) == 1
	})
	empty := int64(0)
	ps.sharingConfig(t, wxsim.SharingConfig{MinAgeMS: 250, ProviderBalance: &empty})

	if r := ps.refundPart(t, staff, id, "all", `{"amount_fen":5500,"reason":"never came"}`); r.status != 201 {
		t.Fatalf("refund: %d %s", r.status, r.body)
	}
	waitUntil(t, "the return to fail", func() bool {
		return ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND kind = 'return' AND status = 'FAILED' AND fail_reason = 'BALANCE_NOT_ENOUGH'", id) == 1
	})
	failed := ps.sharingRows(t, admin, id)[0]
	var refundNo string
	if err := ps.pool.QueryRow(t.Context(), "SELECT out_refund_no FROM refunds WHERE order_id = $1", id).Scan(&refundNo); err != nil {
		t.Fatal(err)
	}
	if failed.Kind != sharing.KindReturn || failed.AmountFen != 550 || failed.OutNo != sharing.ReturnNo(refundNo, 1) || failed.Cause != refundNo {
		t.Fatalf("the failed return: %+v, want %s: 550 (10%% of 5500) for %s", failed, sharing.ReturnNo(refundNo, 1), refundNo)
	}
	if n := ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'PENDING' AND sent_at IS NULL", id); n != 1 {
		t.Errorf("the refund went on without its return: %d unsent pending refunds, want 1", n)
	}
	if !strings.Contains(ps.metrics(t, ps.apis[0]), `takeout_profit_sharing_failed{kind="return"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(ps.metrics(t, ps.apis[0]), "takeout_profit_sharing"))
	}
	r := ps.do(t, ps.apis[0], "GET", "/admin/v1/profit-sharing", admin, nil)
	if r.status != 200 || !strings.Contains(string(r.body), failed.OutNo) {
		t.Errorf("the operators' list of failed requests: %d %s", r.status, r.body)
	}
	for name, tt := range map[string]struct {
		path   string
		token  string
		status int
	}{
		"unknown":   {"/admin/v1/profit-sharing/B0-1/retry", admin, 404},
		"the shop":  {"/admin/v1/profit-sharing/" + failed.OutNo + "/retry", staff, 403},
		"bad query": {"/admin/v1/profit-sharing/" + failed.OutNo + "/retry?now=1", admin, 400},
	} {
		if r := ps.do(t, ps.apis[0], "POST", tt.path, tt.token, nil); r.status != tt.status {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, tt.status)
		}
	}

	// Retried before the top-up: the next attempt fails the same way.
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/profit-sharing/"+failed.OutNo+"/retry", admin, nil); r.status != 200 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/profit-sharing/"+failed.OutNo+"/retry", admin, nil); r.status != 409 {
		t.Errorf("a superseded request retried: %d %s", r.status, r.body)
	}
	waitUntil(t, "the second attempt to fail", func() bool {
		return ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND kind = 'return' AND attempt = 2 AND status = 'FAILED'", id) == 1
	})
	topUp := int64(550)
	ps.sharingConfig(t, wxsim.SharingConfig{MinAgeMS: 250, ProviderBalance: &topUp})
	if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/profit-sharing/"+sharing.ReturnNo(refundNo, 2)+"/retry", admin, nil); r.status != 200 {
		t.Fatalf("retry the second attempt: %d %s", r.status, r.body)
	}
	waitUntil(t, "the refund to succeed", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", id) == 1
	})
	if n := ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND kind = 'return' AND status = 'SUCCESS' AND attempt = 3 AND amount_fen = 550", id); n != 1 {
		t.Errorf("returns: %+v, want the third attempt of 550 to succeed", ps.sharingRows(t, admin, id))
	}
	ps.expectOnce(t, id, "SELECT count(DISTINCT journal) FROM ledger_entries WHERE order_id = $1 AND kind = 'share_return'")
	ps.ledgerHolds(t, id)
	if got := ps.simTxn(t, trade); got.Returned != 550 || got.Refunded != 5500 {
		t.Errorf("at WeChat: %+v", got)
	}
}

// An order nobody completes is shared at its deadline all the same
// (with no commission: unfrozen whole to the merchant), once; completing
// it later shares nothing more. A callback naming another sub-merchant
// is an anomaly and moves nothing.
func TestProfitSharingDeadline(t *testing.T) {
	t.Parallel()
	ps := newPartnerShop(t, map[string]string{"TAKEOUT_SHARING_FINISH_AFTER": "2s", "TAKEOUT_WXPAY_RECONCILE_INTERVAL": "1h"}, 100, 100)
	admin := ps.staffToken(t, "admin")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	ps.onboard(t, admin)
	user := ps.login(t, "deadline")
	id := ps.paidAccepted(t, user, "deadline", staff)
	trade := payment.OutTradeNo(mustID(t, id), 1)
	waitUntil(t, "the deadline's share to end", func() bool {
		return ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND cause = 'deadline' AND status = 'SUCCESS' AND amount_fen = 0 AND unfrozen_fen = 5500", id) == 1
	})
	for _, step := range []string{"dispatch", "complete"} {
		if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/"+step, staff, nil); r.status != 200 {
			t.Fatalf("%s: %d %s", step, r.status, r.body)
		}
	}
	ps.expectOnce(t, id, "SELECT count(*) FROM profit_sharings WHERE order_id = $1")
	if got := ps.simTxn(t, trade); got.Frozen != 0 || got.Unfrozen != 5500 || got.Shared != 0 {
		t.Errorf("at WeChat: %+v", got)
	}
	want := map[string]int64{"merchant_settled": 5500, "merchant_sales": -5500}
	if diff := cmp.Diff(want, ps.ledgerOf(t, id)); diff != "" {
		t.Errorf("the ledger (-want +got):\n%s", diff)
	}

	// Another order's callback claiming another sub-merchant.
	o := ps.place(t, user, "other-sub", 1)
	ps.pay(t, user, o.ID)
	other := payment.OutTradeNo(mustID(t, o.ID), 1)
	forged := map[string]any{"sp_appid": testAppID, "sp_mchid": testMchID, "sub_mchid": "1900000333", "out_trade_no": other,
		"transaction_id": "4200000000OTHERSUB", "trade_state": "SUCCESS", "amount": map[string]any{"total": 1000, "payer_total": 1000, "currency": "CNY"},
		"payer": map[string]string{"sp_openid": "o-1"}}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { ps.notify(t, ps.apis[0], "n-other-sub", "TRANSACTION.SUCCESS", "transaction", forged) })
	}
	wg.Wait()
	if n := ps.count(t, "SELECT count(*) FROM payment_anomalies WHERE out_trade_no = $1 AND kind = 'sub_mchid'", other); n != 1 {
		t.Errorf("%d sub_mchid anomalies recorded, want 1", n)
	}
	if n := ps.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'SUCCESS'", o.ID); n != 0 {
		t.Errorf("a callback for another sub-merchant paid the order")
	}
}

// In the service-provider mode the daily reconciliation reads WeChat
// Pay's profit-sharing bill too: a share (its commission and what it
// unfroze) and a return match their requests; a share missing from the
// bill, and a return of another amount, are found by their numbers.
func TestProfitSharingBill(t *testing.T) {
	t.Parallel()
	ps := newPartnerShop(t, nil, 100, 100)
	admin := ps.staffToken(t, "admin")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	ps.onboard(t, admin)
	if r := ps.do(t, ps.apis[0], "PUT", "/admin/v1/merchants/"+ps.merchantID+"/commission", admin, map[string]any{"commission_bps": 500}); r.status != 200 {
		t.Fatalf("commission: %d %s", r.status, r.body)
	}
	id, trade := ps.completedOrder(t, ps.login(t, "billed"), "billed", staff)
	waitUntil(t, "the share to end", func() bool {
		return ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND status = 'SUCCESS'", id) == 1
	})
	if r := ps.refundPart(t, staff, id, "half", `{"amount_fen":2750,"reason":"half cold"}`); r.status != 201 {
		t.Fatalf("refund: %d %s", r.status, r.body)
	}
	waitUntil(t, "the refund to succeed", func() bool {
		return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", id) == 1
	})
	var returnNo string
	if err := ps.pool.QueryRow(t.Context(), "SELECT out_no FROM profit_sharings WHERE order_id = $1 AND kind = 'return' AND status = 'SUCCESS'", id).Scan(&returnNo); err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(bill.Shanghai)
	date := now.Format(time.DateOnly)
	ready := bill.Day(now).AddDate(0, 0, 1).Add(10*time.Hour + 5*time.Minute).Format(time.RFC3339)
	ps.billConfig(t, wxsim.BillConfig{Now: ready})
	rec, r := ps.reconcile(t, admin, date)
	if r.status != 200 || len(rec.Anomalies) != 0 {
		t.Fatalf("the day's bills: %d %s", r.status, r.body)
	}
	s := rec.Summary
	if s.SharingRows != 3 || s.SharedFen != 275 || s.UnfrozenFen != 5225 || s.ReturnedFen != 137 || s.SharingHash == "" {
		t.Errorf("the profit-sharing bill as read: %+v; want 3 lines: 275 (5%%) shared, 5225 unfrozen, 137 returned", s)
	}

	share := sharing.ShareNo(trade, 1)
	ps.billConfig(t, wxsim.BillConfig{Now: ready, Drop: []string{share}, AmountOff: map[string]int64{returnNo: 1}})
	rec, r = ps.reconcile(t, admin, date)
	want := []string{"amount " + returnNo, "missing_there " + share}
	got := kindsOf(rec)
	slices.Sort(got)
	if r.status != 200 || !slices.Equal(got, want) || !strings.Contains(string(r.body), "5500") {
		t.Errorf("with the share dropped (both its lines, 5500) and the return off by a fen: %v, want %v (%d %s)", got, want, r.status, r.body)
	}
}

// Refunds racing the share of their payment: asked for as the order
// completes, while the share is at WeChat Pay, and after it, they take
// turns with it on the payment's row; whatever the order, the platform
// and the merchant keep what the order owes each, in our ledger and in
// WeChat's books alike.
func TestProfitSharingRacesRefunds(t *testing.T) {
	t.Parallel()
	ps := newPartnerShop(t, nil, 100, 100)
	admin := ps.staffToken(t, "admin")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	ps.onboard(t, admin)
	if r := ps.do(t, ps.apis[0], "PUT", "/admin/v1/merchants/"+ps.merchantID+"/commission", admin, map[string]any{"commission_bps": 700}); r.status != 200 {
		t.Fatalf("commission: %d %s", r.status, r.body)
	}
	// Shares stay PROCESSING at WeChat for 400ms.
	ps.sharingConfig(t, wxsim.SharingConfig{MinAgeMS: 250, DelayMS: 400})
	type race struct {
		id, trade string
	}
	var races []race
	for i, wait := range []time.Duration{0, 450 * time.Millisecond, 1200 * time.Millisecond} {
		key := "race-" + strconv.Itoa(i)
		id := ps.paidAccepted(t, ps.login(t, key), key, staff)
		if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/dispatch", staff, nil); r.status != 200 {
			t.Fatalf("dispatch: %d %s", r.status, r.body)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+id+"/complete", staff, nil); r.status != 200 {
				t.Errorf("complete: %d %s", r.status, r.body)
			}
		})
		wg.Go(func() {
			time.Sleep(wait)
			for j, amount := range []string{"1300", "700"} {
				if r := ps.refundPart(t, staff, id, key+"-"+strconv.Itoa(j), `{"amount_fen":`+amount+`,"reason":"race"}`); r.status != 201 {
					t.Errorf("refund: %d %s", r.status, r.body)
				}
			}
		})
		wg.Wait()
		races = append(races, race{id, payment.OutTradeNo(mustID(t, id), 1)})
	}
	for _, r := range races {
		ended := func() bool {
			return ps.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND status = 'SUCCESS'", r.id) == 2 &&
				ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND status IN ('PENDING', 'PROCESSING')", r.id) == 0 &&
				ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND kind = 'share' AND status = 'SUCCESS'", r.id) == 1
		}
		for deadline := time.Now().Add(30 * time.Second); !ended(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("order %s: the refunds and the share did not end: refunds %v; sharing %+v; jobs %v", r.id,
					ps.strs(t, "SELECT out_refund_no || ' ' || status || ' sent ' || coalesce(sent_at::text, '-') || ' ' || coalesce(last_error, '') FROM refunds WHERE order_id = $1", r.id),
					ps.sharingRows(t, admin, r.id),
					ps.strs(t, "SELECT kind || ' ' || state || ' ' || attempt || ' ' || coalesce(errors[array_length(errors, 1)]->>'error', '') FROM river_job WHERE kind LIKE 'sharing%' OR kind = 'payment.refund'"))
			}
		}
		ps.ledgerHolds(t, r.id)
		l := ps.ledgerOf(t, r.id)
		// 7% of what is kept (5500 - 2000 = 3500): 245.
		if l["platform_shared"] != 245 || l["platform_shared"]+l["merchant_settled"] != 3500 || l["wechat_clearing"] != 0 {
			t.Errorf("order %s: the ledger %v, want the platform to keep 245 and the merchant 3255", r.id, l)
		}
		got := ps.simTxn(t, r.trade)
		if got.Frozen != 0 || got.Shared-got.Returned != 245 || got.Unfrozen+got.Returned-got.FromBalance != 3255 {
			t.Errorf("order %s at WeChat: %+v", r.id, got)
		}
	}
}

// strs reads a query's one text column.
func (sh *shop) strs(t *testing.T, query string, args ...any) []string {
	t.Helper()
	rows, err := sh.pool.Query(t.Context(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// A share whose receiver WeChat Pay closes moves nothing: it is FAILED,
// the money stays frozen, and operators see it; retried once the
// receiver is fixed, its next attempt shares the order once.
func TestProfitSharingFailedShare(t *testing.T) {
	t.Parallel()
	ps := newPartnerShop(t, nil, 100, 100)
	admin := ps.staffToken(t, "admin")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	ps.onboard(t, admin)
	if r := ps.do(t, ps.apis[0], "PUT", "/admin/v1/merchants/"+ps.merchantID+"/commission", admin, map[string]any{"commission_bps": 500}); r.status != 200 {
		t.Fatalf("commission: %d %s", r.status, r.body)
	}
	ps.sharingConfig(t, wxsim.SharingConfig{MinAgeMS: 250, FailReceivers: true})
	id, trade := ps.completedOrder(t, ps.login(t, "closed"), "closed", staff)
	waitUntil(t, "the share to fail", func() bool {
		return ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND status = 'FAILED' AND fail_reason = 'ACCOUNT_ABNORMAL'", id) == 1
	})
	if got := ps.simTxn(t, trade); got.Frozen != 5500 || got.Shared != 0 {
		t.Errorf("at WeChat after the failed share: %+v, want all 5500 frozen", got)
	}
	if n := ps.count(t, "SELECT count(*) FROM ledger_entries WHERE order_id = $1 AND kind = 'share'", id); n != 0 {
		t.Errorf("a failed share posted %d ledger entries", n)
	}
	m := ps.metrics(t, ps.apis[0])
	if !strings.Contains(m, `takeout_profit_sharing_failed{kind="share"} 1`) || !strings.Contains(m, `takeout_profit_sharing_total{kind="share",outcome="failed"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(m, "takeout_profit_sharing"))
	}
	ps.sharingConfig(t, wxsim.SharingConfig{MinAgeMS: 250})
	r := ps.do(t, ps.apis[0], "POST", "/admin/v1/profit-sharing/"+sharing.ShareNo(trade, 1)+"/retry", admin, nil)
	var next sharing.Request
	r.json(t, &next)
	if r.status != 200 || next.OutNo != sharing.ShareNo(trade, 2) || next.Attempt != 2 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	waitUntil(t, "the second attempt to succeed", func() bool {
		return ps.count(t, "SELECT count(*) FROM profit_sharings WHERE order_id = $1 AND attempt = 2 AND status = 'SUCCESS' AND amount_fen = 275", id) == 1
	})
	ps.expectOnce(t, id, "SELECT count(DISTINCT journal) FROM ledger_entries WHERE order_id = $1 AND kind = 'share'")
	if got := ps.simTxn(t, trade); got.Frozen != 0 || got.Shared != 275 || got.Unfrozen != 5225 {
		t.Errorf("at WeChat after the retry: %+v", got)
	}
	ps.ledgerHolds(t, id)
}
