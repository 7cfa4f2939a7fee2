package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/takeout/takeout/internal/voucher"
)

// voucherTemplate issues a template as token and returns it; fields
// override the defaults (a merchant voucher of 5 yuan off 30, claimable
// now for a day, valid 7 days, a budget of 100, one per customer).
func (sh *shop) voucherTemplate(t testing.TB, token string, fields map[string]any) voucher.Template {
	t.Helper()
	body := map[string]any{
		"merchant_id": sh.merchantID, "name": "5 off 30", "amount_fen": 500, "threshold_fen": 3000, "funded_by": "merchant",
		"claim_from": time.Now().Add(-time.Minute).Format(time.RFC3339), "claim_until": time.Now().Add(24 * time.Hour).Format(time.RFC3339),
		"valid_days": 7, "budget": 100,
	}
	for k, v := range fields {
		if v == nil {
			delete(body, k)
		} else {
			body[k] = v
		}
	}
	r := sh.do(t, sh.apis[0], "POST", "/admin/v1/voucher-templates", token, body)
	if r.status != 201 {
		t.Fatalf("create voucher template: %d %s", r.status, r.body)
	}
	var tpl voucher.Template
	r.json(t, &tpl)
	return tpl
}

// claim claims a voucher of templateID as user, with key unless empty.
func (sh *shop) claim(t *testing.T, api *instance, user, key, templateID string) response {
	t.Helper()
	return sh.doKey(t, api, "POST", "/v1/vouchers/claim", user, key, fmt.Sprintf(`{"template_id":%q}`, templateID))
}

// A budget of 100 claimed by 300 customers at once, over two instances:
// exactly 100 vouchers, one each, the budget's every shard emptied and
// none below zero; everyone else is told the budget is spent.
func TestVoucherClaimStormGivesExactlyTheBudget(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 10)
	tpl := sh.voucherTemplate(t, sh.admin, map[string]any{"budget": 100})
	const customers = 300
	users := make([]string, customers)
	var wg sync.WaitGroup
	for i := range users {
		wg.Go(func() { users[i] = sh.login(t, fmt.Sprintf("storm-%d", i)) })
	}
	wg.Wait()

	answers := make([]response, customers)
	start := make(chan struct{})
	for i := range users {
		wg.Go(func() {
			<-start
			answers[i] = sh.claim(t, sh.apis[i%2], users[i], "", tpl.ID)
		})
	}
	close(start)
	wg.Wait()

	got := map[string]int{}
	for _, r := range answers {
		got[fmt.Sprint(r.status, " ", r.problemType())]++
	}
	if diff := cmp.Diff(map[string]int{"201 ": 100, "409 voucher-budget-spent": 200}, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if n := sh.count(t, "SELECT count(*) FROM vouchers WHERE template_id = $1", tpl.ID); n != 100 {
		t.Errorf("%d vouchers in the database, want 100", n)
	}
	if n := sh.count(t, "SELECT count(*) FROM (SELECT user_id FROM vouchers GROUP BY user_id HAVING count(*) > 1) x"); n != 0 {
		t.Errorf("%d customers hold two vouchers, want none", n)
	}
	if n := sh.count(t, "SELECT coalesce(sum(remaining), -1) FROM voucher_budget WHERE template_id = $1", tpl.ID); n != 0 {
		t.Errorf("%d left in the budget, want 0", n)
	}
	// The budget was spread (no hot row): eight shards, each emptied.
	if n := sh.count(t, "SELECT count(*) FROM voucher_budget WHERE template_id = $1 AND remaining = 0", tpl.ID); n != voucher.DefaultBudgetShards {
		t.Errorf("%d empty budget shards, want %d", n, voucher.DefaultBudgetShards)
	}
	var read voucher.Template
	sh.do(t, sh.apis[1], "GET", "/admin/v1/voucher-templates/"+tpl.ID, sh.admin, nil).json(t, &read)
	if read.Remaining != 0 || read.Budget != 100 {
		t.Errorf("template reads budget %d remaining %d, want 100 and 0", read.Budget, read.Remaining)
	}
	metrics := sh.metrics(t, sh.apis[0]) + sh.metrics(t, sh.apis[1])
	if !strings.Contains(metrics, `takeout_voucher_claims_total{result="claimed"}`) {
		t.Error("no takeout_voucher_claims_total{result=\"claimed\"} in the metrics")
	}
}

// One customer racing twenty claims, each with its own key, holds exactly
// the per-user limit; twenty retries of one key claim once and all get
// the same voucher.
func TestVoucherClaimsOfOneCustomerRacing(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 10)
	tpl := sh.voucherTemplate(t, sh.admin, map[string]any{"per_user_limit": 2, "budget": 50})
	user := sh.login(t, "racer")

	t.Run("distinct keys", func(t *testing.T) {
		answers := make([]response, 20)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() { answers[i] = sh.claim(t, sh.apis[i%2], user, fmt.Sprintf("race-%d", i), tpl.ID) })
		}
		wg.Wait()
		got := map[string]int{}
		for _, r := range answers {
			got[fmt.Sprint(r.status, " ", r.problemType())]++
		}
		if diff := cmp.Diff(map[string]int{"201 ": 2, "409 voucher-limit-reached": 18}, got); diff != "" {
			t.Errorf("answers (-want +got):\n%s", diff)
		}
		if n := sh.count(t, "SELECT count(*) FROM vouchers WHERE template_id = $1", tpl.ID); n != 2 {
			t.Errorf("%d vouchers, want 2", n)
		}
		if n := sh.count(t, "SELECT sum(remaining) FROM voucher_budget WHERE template_id = $1", tpl.ID); n != 48 {
			t.Errorf("budget left %d, want 48: a refused claim took budget", n)
		}
	})

	t.Run("one key", func(t *testing.T) {
		other := sh.login(t, "retrier")
		answers := make([]response, 20)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				for {
					answers[i] = sh.claim(t, sh.apis[i%2], other, "one-key", tpl.ID)
					if answers[i].problemType() != "request-in-progress" {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		fresh := 0
		for _, r := range answers {
			if r.status != 201 || string(r.body) != string(answers[0].body) {
				t.Fatalf("answer %d %s, want 201 %s", r.status, r.body, answers[0].body)
			}
			if r.header.Get("Idempotent-Replayed") != "true" {
				fresh++
			}
		}
		if fresh != 1 {
			t.Errorf("%d fresh answers, want 1", fresh)
		}
		if n := sh.count(t, "SELECT count(*) FROM vouchers v JOIN users u ON u.id = v.user_id WHERE u.openid LIKE '%retrier%'"); n != 1 {
			t.Errorf("%d vouchers of the retrier, want 1", n)
		}
		// The same key with another template is another request: 422.
		tpl2 := sh.voucherTemplate(t, sh.admin, map[string]any{"name": "other"})
		if r := sh.claim(t, sh.apis[0], other, "one-key", tpl2.ID); r.status != 422 || r.problemType() != "idempotency-key-mismatch" {
			t.Errorf("same key, other template: %d %s", r.status, r.body)
		}
	})
}

// Issuing templates: who may issue what, what is refused (nothing
// changes), and the changes staff make to a template.
func TestVoucherTemplates(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10)
	api := sh.apis[0]
	staffA := sh.staffToken(t, "merchant:"+sh.merchantID)
	otherMerchant := createMerchant(t, sh.stack, api, "Voucher B")
	past := time.Now().Add(-48 * time.Hour).Format(time.RFC3339)
	future := time.Now().Add(48 * time.Hour).Format(time.RFC3339)

	refusals := []struct {
		name   string
		token  string
		fields map[string]any
		status int
		field  string // of a 400
	}{
		{"no name", sh.admin, map[string]any{"name": ""}, 400, "name"},
		{"zero amount", sh.admin, map[string]any{"amount_fen": 0}, 400, "amount_fen"},
		{"amount at the threshold", sh.admin, map[string]any{"amount_fen": 3000}, 400, "amount_fen"},
		{"negative threshold", sh.admin, map[string]any{"threshold_fen": -1}, 400, "threshold_fen"},
		{"unknown funder", sh.admin, map[string]any{"funded_by": "customer"}, 400, "funded_by"},
		{"platform voucher funded by a merchant", sh.admin, map[string]any{"merchant_id": nil}, 400, "funded_by"},
		{"window backwards", sh.admin, map[string]any{"claim_from": future, "claim_until": past}, 400, "claim_until"},
		{"no validity", sh.admin, map[string]any{"valid_days": 0}, 400, "valid_days"},
		{"no budget", sh.admin, map[string]any{"budget": 0}, 400, "budget"},
		{"limit above 100", sh.admin, map[string]any{"per_user_limit": 101}, 400, "per_user_limit"},
		{"bad merchant id", sh.admin, map[string]any{"merchant_id": "x1"}, 400, "merchant_id"},
		{"no such merchant", sh.admin, map[string]any{"merchant_id": "999999"}, 404, "merchant_id"},
		{"staff issue a platform voucher", staffA, map[string]any{"merchant_id": nil, "funded_by": "platform"}, 403, ""},
		{"staff spend the platform's money", staffA, map[string]any{"funded_by": "platform"}, 403, ""},
		{"staff of another merchant", sh.staffToken(t, "merchant:"+otherMerchant), nil, 403, ""},
		{"customer", sh.login(t, "not-staff"), nil, 401, ""},
	}
	for _, tc := range refusals {
		body := map[string]any{
			"merchant_id": sh.merchantID, "name": "ok", "amount_fen": 500, "threshold_fen": 3000, "funded_by": "merchant",
			"claim_from": past, "claim_until": future, "valid_days": 7, "budget": 10,
		}
		for k, v := range tc.fields {
			if v == nil {
				delete(body, k)
			} else {
				body[k] = v
			}
		}
		r := sh.do(t, api, "POST", "/admin/v1/voucher-templates", tc.token, body)
		var p struct {
			Field string `json:"field"`
		}
		if r.problemType() != "" {
			r.json(t, &p)
		}
		if r.status != tc.status || p.Field != tc.field {
			t.Errorf("%s: %d field %q, want %d field %q (%s)", tc.name, r.status, p.Field, tc.status, tc.field, r.body)
		}
	}
	if n := sh.count(t, "SELECT count(*) FROM voucher_templates"); n != 0 {
		t.Fatalf("%d templates after refusals, want none", n)
	}

	own := sh.voucherTemplate(t, staffA, map[string]any{"budget": 3})
	want := voucher.Template{ID: own.ID, MerchantID: &sh.merchantID, Name: "5 off 30", AmountFen: 500, ThresholdFen: 3000, FundedBy: "merchant",
		ValidDays: 7, Budget: 3, Remaining: 3, PerUserLimit: 1, Status: "active", Version: 1, CreatedBy: "test-merchant:" + sh.merchantID}
	if diff := cmp.Diff(want, own, cmpopts.IgnoreFields(voucher.Template{}, "ClaimFrom", "ClaimUntil", "CreatedAt", "UpdatedAt")); diff != "" {
		t.Errorf("merchant's template (-want +got):\n%s", diff)
	}
	if r := sh.do(t, api, "POST", "/admin/v1/voucher-templates", staffA, map[string]any{
		"merchant_id": sh.merchantID, "name": "5 off 30", "amount_fen": 100, "funded_by": "merchant",
		"claim_from": past, "claim_until": future, "valid_days": 1, "budget": 1,
	}); r.status != 409 || r.problemType() != "already-exists" {
		t.Errorf("same name twice: %d %s", r.status, r.body)
	}
	platform := sh.voucherTemplate(t, sh.admin, map[string]any{"merchant_id": nil, "funded_by": "platform", "name": "new here", "threshold_fen": 0})
	if platform.MerchantID != nil {
		t.Errorf("platform template has merchant %v", *platform.MerchantID)
	}

	// Lists: staff see their merchant's; the platform's are the admins'.
	var list voucher.TemplateList
	if r := sh.do(t, api, "GET", "/admin/v1/voucher-templates?merchant_id="+sh.merchantID, staffA, nil); r.status != 200 {
		t.Fatalf("list: %d %s", r.status, r.body)
	} else {
		r.json(t, &list)
	}
	if len(list.Templates) != 1 || list.Templates[0].ID != own.ID {
		t.Errorf("merchant's list %+v, want its one template", list.Templates)
	}
	if r := sh.do(t, api, "GET", "/admin/v1/voucher-templates", staffA, nil); r.status != 403 {
		t.Errorf("staff list the platform's: %d", r.status)
	}
	if r := sh.do(t, api, "GET", "/admin/v1/voucher-templates/"+platform.ID, staffA, nil); r.status != 403 {
		t.Errorf("staff read a platform template: %d", r.status)
	}

	// Customers see what they may claim: the platform's and the merchant's.
	user := sh.login(t, "customer")
	offers := func() []string {
		t.Helper()
		var l voucher.OfferList
		sh.do(t, api, "GET", "/v1/voucher-templates?merchant_id="+sh.merchantID, "", nil).json(t, &l)
		var ids []string
		for _, o := range l.Offers {
			ids = append(ids, o.TemplateID)
		}
		return ids
	}
	if diff := cmp.Diff([]string{own.ID, platform.ID}, offers()); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}

	// Paused: not offered, not claimable; a stale version changes nothing.
	patch := func(token string, body map[string]any) response {
		return sh.do(t, api, "PATCH", "/admin/v1/voucher-templates/"+own.ID, token, body)
	}
	if r := patch(staffA, map[string]any{"version": 1, "status": "paused"}); r.status != 200 {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if r := patch(staffA, map[string]any{"version": 1, "status": "active"}); r.status != 409 || r.problemType() != "version-conflict" {
		t.Errorf("stale version: %d %s", r.status, r.body)
	}
	if r := patch(staffA, map[string]any{"version": 2}); r.status != 400 {
		t.Errorf("nothing to change: %d %s", r.status, r.body)
	}
	if r := patch(staffA, map[string]any{"version": 2, "claim_until": time.Now().Add(3 * 366 * 24 * time.Hour).Format(time.RFC3339)}); r.status != 400 {
		t.Errorf("a window of three years: %d %s", r.status, r.body)
	}
	if diff := cmp.Diff([]string{platform.ID}, offers()); diff != "" {
		t.Errorf("offers while paused (-want +got):\n%s", diff)
	}
	r := sh.claim(t, api, user, "", own.ID)
	var p struct {
		Reason string `json:"reason"`
	}
	r.json(t, &p)
	if r.status != 409 || r.problemType() != "voucher-not-claimable" || p.Reason != "paused" {
		t.Errorf("claim while paused: %d %s", r.status, r.body)
	}

	// Resumed with more budget: claimable, the budget grown.
	var resumed voucher.Template
	if r := patch(staffA, map[string]any{"version": 2, "status": "active", "add_budget": 5}); r.status != 200 {
		t.Fatalf("resume: %d %s", r.status, r.body)
	} else {
		r.json(t, &resumed)
	}
	if resumed.Budget != 8 || resumed.Remaining != 8 || resumed.Version != 3 {
		t.Errorf("resumed: budget %d remaining %d version %d, want 8, 8, 3", resumed.Budget, resumed.Remaining, resumed.Version)
	}
	if r := sh.claim(t, api, user, "", own.ID); r.status != 201 {
		t.Fatalf("claim: %d %s", r.status, r.body)
	}
	if r := sh.claim(t, api, user, "", own.ID); r.status != 409 || r.problemType() != "voucher-limit-reached" {
		t.Errorf("second claim: %d %s", r.status, r.body)
	}

	// Windows: not yet open, and closed.
	later := sh.voucherTemplate(t, sh.admin, map[string]any{"name": "later", "claim_from": future, "claim_until": time.Now().Add(72 * time.Hour).Format(time.RFC3339)})
	ended := sh.voucherTemplate(t, sh.admin, map[string]any{"name": "ended", "claim_from": past, "claim_until": time.Now().Add(-time.Hour).Format(time.RFC3339)})
	for tpl, reason := range map[string]string{later.ID: "not_started", ended.ID: "ended"} {
		r := sh.claim(t, api, user, "", tpl)
		var p struct {
			Reason string `json:"reason"`
		}
		r.json(t, &p)
		if r.status != 409 || p.Reason != reason {
			t.Errorf("claim %s: %d %s, want 409 reason %s", reason, r.status, r.body, reason)
		}
	}
	if r := sh.claim(t, api, user, "", "999999"); r.status != 404 {
		t.Errorf("claim of no template: %d %s", r.status, r.body)
	}
	if r := sh.claim(t, api, user, "", "abc"); r.status != 400 {
		t.Errorf("claim of a bad id: %d %s", r.status, r.body)
	}
	if n := sh.count(t, "SELECT count(*) FROM vouchers"); n != 1 {
		t.Errorf("%d vouchers after refused claims, want 1", n)
	}
}

// The wallet lists a customer's vouchers, their own only, each available
// until it expires.
func TestVoucherWallet(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10)
	api := sh.apis[0]
	tpl := sh.voucherTemplate(t, sh.admin, map[string]any{"valid_days": 3})
	platform := sh.voucherTemplate(t, sh.admin, map[string]any{"merchant_id": nil, "funded_by": "platform", "name": "welcome", "threshold_fen": 0, "amount_fen": 300})
	alice, bob := sh.login(t, "alice"), sh.login(t, "bob")
	var claimed voucher.Voucher
	if r := sh.claim(t, api, alice, "", tpl.ID); r.status != 201 {
		t.Fatalf("claim: %d %s", r.status, r.body)
	} else {
		r.json(t, &claimed)
	}
	if got := claimed.ValidUntil.Sub(claimed.ClaimedAt); got != 72*time.Hour {
		t.Errorf("valid for %v, want 72h", got)
	}
	if r := sh.claim(t, api, alice, "", platform.ID); r.status != 201 {
		t.Fatalf("claim: %d %s", r.status, r.body)
	}
	// The merchant's voucher expires.
	if _, err := sh.pool.Exec(t.Context(), "UPDATE vouchers SET valid_until = now() - interval '1 second' WHERE id = $1", claimed.ID); err != nil {
		t.Fatal(err)
	}
	var w voucher.WalletList
	sh.do(t, api, "GET", "/v1/vouchers", alice, nil).json(t, &w)
	type row struct{ Template, Name, Status string }
	var got []row
	for _, v := range w.Vouchers {
		got = append(got, row{v.TemplateID, v.Name, v.Status})
	}
	if diff := cmp.Diff([]row{{platform.ID, "welcome", "available"}, {tpl.ID, "5 off 30", "expired"}}, got); diff != "" {
		t.Errorf("alice's wallet (-want +got):\n%s", diff)
	}
	sh.do(t, api, "GET", "/v1/vouchers", bob, nil).json(t, &w)
	if len(w.Vouchers) != 0 {
		t.Errorf("bob's wallet holds %d vouchers, want none", len(w.Vouchers))
	}
	if r := sh.do(t, api, "GET", "/v1/vouchers?status=x", alice, nil); r.status != 400 {
		t.Errorf("unknown parameter: %d", r.status)
	}
}
