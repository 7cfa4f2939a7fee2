package promotion

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestBest(t *testing.T) {
	t.Parallel()
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	// 12:30 on 2026-12-05 in Shanghai.
	noon := time.Date(2026, 12, 5, 4, 30, 0, 0, time.UTC)
	budget := func(n int64) *int64 { return &n }
	spend := Term{ID: 1, Version: 1, Kind: KindSpendSave, Name: "tiers", FundedBy: FundedByMerchant, Stackable: true,
		Tiers: []Tier{{3000, 500}, {6000, 1200}}}
	free := Term{ID: 2, Version: 1, Kind: KindFreeDelivery, Name: "free", FundedBy: FundedByMerchant, Stackable: true,
		Tiers: []Tier{{5000, 0}}}
	first := Term{ID: 3, Version: 1, Kind: KindNewCustomer, Name: "first", FundedBy: FundedByPlatform, Stackable: false,
		NewCustomerScope: ScopePlatform, Tiers: []Tier{{0, 1500}}}
	with := func(t Term, f func(*Term)) Term { f(&t); return t }
	withVoucher := func(c Cart, fen int64) Cart { c.VoucherFen = fen; return c }
	cart := func(items, fee int64) Cart {
		return Cart{ItemsTotalFen: items, DeliveryFeeFen: fee, Now: noon, Location: shanghai, NewOnPlatform: true, NewAtMerchant: true}
	}
	type want struct {
		applied               map[int64]int64 // id -> amount
		skipped               map[string]string
		off, waived, voucherF int64
	}
	for _, tc := range []struct {
		name  string
		terms []Term
		cart  Cart
		want  want
	}{
		{"below every tier", []Term{spend}, cart(2999, 500),
			want{skipped: map[string]string{"1": ReasonBelowThreshold}}},
		{"the highest tier reached", []Term{spend}, cart(6000, 500),
			want{applied: map[int64]int64{1: 1200}, off: 1200}},
		{"stackable ones together", []Term{spend, free}, cart(6500, 500),
			want{applied: map[int64]int64{1: 1200, 2: 500}, off: 1200, waived: 500}},
		{"one that does not stack wins alone", []Term{spend, free, first}, cart(3500, 500),
			// 1500 alone beats 500 (free delivery needs 5000).
			want{applied: map[int64]int64{3: 1500}, off: 1500, skipped: map[string]string{"1": ReasonNotStackable, "2": ReasonBelowThreshold}}},
		{"the stackable pair beats the one alone", []Term{spend, free, first}, cart(6500, 500),
			want{applied: map[int64]int64{1: 1200, 2: 500}, off: 1200, waived: 500, skipped: map[string]string{"3": ReasonNotStackable}}},
		{"a customer who is not new", []Term{first}, Cart{ItemsTotalFen: 3000, Now: noon, Location: shanghai},
			want{skipped: map[string]string{"3": ReasonNotNewCustomer}}},
		{"a voucher stacks with stackable ones only", []Term{spend, first}, withVoucher(cart(3500, 500), 300),
			want{applied: map[int64]int64{1: 500}, off: 500, voucherF: 300, skipped: map[string]string{"3": ReasonNotStackable}}},
		{"one kind once: the better of two", []Term{spend, with(spend, func(t *Term) { t.ID, t.Tiers = 4, []Tier{{3000, 700}} })}, cart(3500, 500),
			want{applied: map[int64]int64{4: 700}, off: 700, skipped: map[string]string{"1": ReasonNotStackable}}},
		{"not started", []Term{with(spend, func(t *Term) { t.StartsOn = "2026-12-06" })}, cart(6000, 500),
			want{skipped: map[string]string{"1": ReasonNotStarted}}},
		{"ended yesterday, local", []Term{with(spend, func(t *Term) { t.EndsOn = "2026-12-04" })}, cart(6000, 500),
			want{skipped: map[string]string{"1": ReasonExpired}}},
		{"ends today, local", []Term{with(spend, func(t *Term) { t.EndsOn = "2026-12-05" })}, cart(6000, 500),
			want{applied: map[int64]int64{1: 1200}, off: 1200}},
		{"in its lunch hours, local", []Term{with(spend, func(t *Term) { t.DailyFrom, t.DailyUntil = "11:00:00", "14:00:00" })}, cart(6000, 500),
			want{applied: map[int64]int64{1: 1200}, off: 1200}},
		{"outside its evening hours, local", []Term{with(spend, func(t *Term) { t.DailyFrom, t.DailyUntil = "17:00:00", "21:00:00" })}, cart(6000, 500),
			want{skipped: map[string]string{"1": ReasonOutsideHours}}},
		{"budget short", []Term{with(spend, func(t *Term) { t.BudgetLeft = budget(1199) })}, cart(6000, 500),
			want{skipped: map[string]string{"1": ReasonBudgetSpent}}},
		{"budget just enough", []Term{with(spend, func(t *Term) { t.BudgetLeft = budget(1200) })}, cart(6000, 500),
			want{applied: map[int64]int64{1: 1200}, off: 1200}},
		{"free delivery with no fee", []Term{free}, cart(6000, 0),
			want{skipped: map[string]string{"2": ReasonNoDeliveryFee}}},
		{"capped at the dishes", []Term{with(first, func(t *Term) { t.Stackable = true })}, cart(1000, 500),
			want{applied: map[int64]int64{3: 1000}, off: 1000}},
		{"capped so that 1 fen is left to pay", []Term{with(first, func(t *Term) { t.Stackable = true }), with(free, func(t *Term) { t.Tiers = []Tier{{0, 0}} })}, cart(1000, 500),
			// 1500 off 1000 of dishes with delivery waived: 999 off, 1 fen to pay.
			want{applied: map[int64]int64{2: 500, 3: 999}, off: 999, waived: 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ch := Best(tc.terms, tc.cart)
			got := want{applied: map[int64]int64{}, skipped: map[string]string{}, off: ch.ItemsOffFen, waived: ch.WaivedFen, voucherF: ch.VoucherOffFen}
			for _, a := range ch.Applied {
				got.applied[a.Term.ID] = a.AmountFen
			}
			for _, s := range ch.Skipped {
				got.skipped[s.PromotionID] = s.Reason
			}
			if tc.want.applied == nil {
				tc.want.applied = map[int64]int64{}
			}
			if tc.want.skipped == nil {
				tc.want.skipped = map[string]string{}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Whatever the promotions and the cart: no more than one of a kind, one
// that does not stack only alone, the dishes never discounted below
// nothing, the customer paying at least 1 fen, and no other choice of the
// eligible ones taking more off.
func TestBestProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 6).Draw(rt, "n")
		terms := make([]Term, n)
		for i := range terms {
			kind := rapid.SampledFrom([]string{KindSpendSave, KindNewCustomer, KindFreeDelivery}).Draw(rt, "kind")
			th := rapid.Int64Range(0, 10000).Draw(rt, "threshold")
			off := int64(0)
			if kind != KindFreeDelivery {
				off = rapid.Int64Range(1, 5000).Draw(rt, "off")
			}
			terms[i] = Term{ID: int64(i + 1), Kind: kind, Tiers: []Tier{{th, off}}, Stackable: rapid.Bool().Draw(rt, "stackable"),
				NewCustomerScope: map[bool]string{true: ScopeMerchant}[kind == KindNewCustomer]}
		}
		c := Cart{ItemsTotalFen: rapid.Int64Range(1, 12000).Draw(rt, "items"), PackagingFeeFen: rapid.Int64Range(0, 300).Draw(rt, "packaging"),
			DeliveryFeeFen: rapid.Int64Range(0, 800).Draw(rt, "fee"), VoucherFen: rapid.Int64Range(0, 3000).Draw(rt, "voucher"),
			NewAtMerchant: true, Now: time.Unix(0, 0), Location: time.UTC}
		ch := Best(terms, c)
		kinds := map[string]bool{}
		for _, a := range ch.Applied {
			if kinds[a.Term.Kind] {
				rt.Fatalf("two of kind %s applied", a.Term.Kind)
			}
			kinds[a.Term.Kind] = true
			if !a.Term.Stackable && len(ch.Applied)+btoi(c.VoucherFen > 0) > 1 {
				rt.Fatalf("promotion %d does not stack, applied with others", a.Term.ID)
			}
		}
		if len(ch.Applied)+len(ch.Skipped) != n {
			rt.Fatalf("%d applied and %d skipped of %d", len(ch.Applied), len(ch.Skipped), n)
		}
		dishesOff := ch.ItemsOffFen + ch.VoucherOffFen
		pay := c.ItemsTotalFen + c.PackagingFeeFen + c.DeliveryFeeFen - ch.WaivedFen - dishesOff
		if dishesOff > c.ItemsTotalFen || pay < 1 || ch.ItemsOffFen < 0 || ch.VoucherOffFen < 0 {
			rt.Fatalf("dishes %d, off %d, left to pay %d", c.ItemsTotalFen, dishesOff, pay)
		}
		// No single eligible promotion alone beats the choice.
		for _, t := range terms {
			alone := Best([]Term{t}, Cart{ItemsTotalFen: c.ItemsTotalFen, PackagingFeeFen: c.PackagingFeeFen, DeliveryFeeFen: c.DeliveryFeeFen,
				VoucherFen: c.VoucherFen, NewAtMerchant: true, Now: c.Now, Location: c.Location})
			if v := alone.ItemsOffFen + alone.WaivedFen + alone.VoucherOffFen; v > ch.ItemsOffFen+ch.WaivedFen+ch.VoucherOffFen {
				rt.Fatalf("promotion %d alone takes %d off, the choice %d", t.ID, v, ch.ItemsOffFen+ch.WaivedFen+ch.VoucherOffFen)
			}
		}
	})
}
