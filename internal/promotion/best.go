package promotion

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Term is a promotion as confirm weighs it: what it gives, when, to whom,
// whether it combines, and the budget it has left.
type Term struct {
	ID       int64  `json:"id"`
	Version  int64  `json:"version"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Tiers    []Tier `json:"tiers"`
	FundedBy string `json:"funded_by"`
	// NewCustomerScope is merchant or platform for a new-customer
	// discount, empty for the other kinds.
	NewCustomerScope string `json:"new_customer_scope"`
	// StartsOn and EndsOn are local dates (YYYY-MM-DD, inclusive; empty:
	// no bound), DailyFrom and DailyUntil local times of day (HH:MM:SS;
	// empty: all day), all in the merchant's time zone.
	StartsOn   string `json:"starts_on"`
	EndsOn     string `json:"ends_on"`
	DailyFrom  string `json:"daily_from"`
	DailyUntil string `json:"daily_until"`
	Stackable  bool   `json:"stackable"`
	// BudgetFen is the promotion's budget (nil: none), and BudgetLeft
	// what it has not given away (nil: not bounded).
	BudgetFen  *int64 `json:"budget_fen"`
	BudgetLeft *int64 `json:"budget_left"`
}

// Tier is one step of a spend-and-save promotion: OffFen off dishes that
// come to ThresholdFen or more. The other kinds have one tier; free
// delivery's OffFen is 0 (it waives the delivery fee).
type Tier struct {
	ThresholdFen int64 `json:"threshold_fen"`
	OffFen       int64 `json:"off_fen"`
}

// Cart is what a confirm asks of the merchant's promotions.
type Cart struct {
	ItemsTotalFen   int64
	PackagingFeeFen int64
	DeliveryFeeFen  int64
	// NewAtMerchant and NewOnPlatform say whether the customer may still
	// have a first-order discount in each scope.
	NewAtMerchant, NewOnPlatform bool
	// VoucherFen is the face amount of the voucher the customer spends (0:
	// none): it applies after the promotions, and only with stackable
	// ones.
	VoucherFen int64
	Now        time.Time
	Location   *time.Location
}

// Applied is a promotion a cart gets, and how much.
type Applied struct {
	Term      Term
	AmountFen int64
}

// Skipped is a promotion of the merchant that the cart does not get, and
// why (a Reason), for the customer to see.
type Skipped struct {
	PromotionID string `json:"promotion_id"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Reason      string `json:"reason"`
	Detail      string `json:"detail"`
	// ShortfallFen is what the dishes lack to reach the lowest threshold
	// (below_threshold).
	ShortfallFen int64 `json:"shortfall_fen,omitempty"`

	id int64
}

// Why a promotion does not apply.
const (
	ReasonBelowThreshold = "below_threshold"
	ReasonNotStarted     = "not_started"
	ReasonExpired        = "expired"
	ReasonOutsideHours   = "outside_hours"
	ReasonNotStackable   = "not_stackable"
	ReasonBudgetSpent    = "budget_spent"
	ReasonNotNewCustomer = "not_new_customer"
	ReasonNoDeliveryFee  = "no_delivery_fee"
)

// Choice is what Best picks: the promotions applied (by kind: spend and
// save, new customer, free delivery), those skipped, and what the voucher
// then takes off.
type Choice struct {
	Applied []Applied
	Skipped []Skipped
	// ItemsOffFen is what the applied promotions take off the dishes,
	// WaivedFen the delivery fee they waive, VoucherOffFen what the
	// voucher takes off the dishes after them.
	ItemsOffFen, WaivedFen, VoucherOffFen int64
}

// candidate is a term that applies to the cart alone, with what it gives.
type candidate struct {
	term   Term
	amount int64
}

// Best picks the combination of the merchant's promotions (terms) that
// takes the most off the cart, with the voucher the customer spends
// applied after them: at most one promotion of each kind; a promotion that
// does not stack applies only alone, and not with a voucher. Ties go to
// fewer promotions, then to the older ones, so that the same cart always
// gets the same choice. The total left to pay is at least 1 fen.
func Best(terms []Term, c Cart) Choice {
	var ch Choice
	byKind := map[string][]candidate{}
	for _, t := range terms {
		amount, skip := eligible(t, c)
		if skip != nil {
			ch.Skipped = append(ch.Skipped, *skip)
			continue
		}
		byKind[t.Kind] = append(byKind[t.Kind], candidate{term: t, amount: amount})
	}
	kinds := []string{KindSpendSave, KindNewCustomer, KindFreeDelivery}
	var best []candidate
	bestValue := int64(-1)
	var bestOff, bestWaived, bestVoucher int64
	// Every pick of at most one candidate per kind (index 0: none).
	pick := make([]int, len(kinds))
	for {
		var set []candidate
		for k, i := range pick {
			if i > 0 {
				set = append(set, byKind[kinds[k]][i-1])
			}
		}
		if stacks(set, c.VoucherFen > 0) {
			set, off, waived, voucher := price(set, c)
			value := off + waived + voucher
			if value > bestValue || (value == bestValue && better(set, best)) {
				best, bestValue, bestOff, bestWaived, bestVoucher = set, value, off, waived, voucher
			}
		}
		if !next(pick, kinds, byKind) {
			break
		}
	}
	ch.ItemsOffFen, ch.WaivedFen, ch.VoucherOffFen = bestOff, bestWaived, bestVoucher
	chosen := map[int64]bool{}
	for _, a := range best {
		ch.Applied = append(ch.Applied, Applied{Term: a.term, AmountFen: a.amount})
		chosen[a.term.ID] = true
	}
	for _, k := range kinds {
		for _, cand := range byKind[k] {
			if chosen[cand.term.ID] {
				continue
			}
			detail := "it does not combine with the discounts that take more off this cart"
			if slices.ContainsFunc(best, func(a candidate) bool { return a.term.Kind == cand.term.Kind }) {
				detail = "one promotion of a kind applies, and another of this kind takes more off this cart"
			} else if !cand.term.Stackable && c.VoucherFen > 0 {
				detail = "it does not combine with other discounts, the voucher included"
			}
			ch.Skipped = append(ch.Skipped, skipped(cand.term, ReasonNotStackable, detail))
		}
	}
	slices.SortFunc(ch.Applied, func(a, b Applied) int { return cmp.Compare(a.Term.ID, b.Term.ID) })
	slices.SortFunc(ch.Skipped, func(a, b Skipped) int { return cmp.Compare(a.id, b.id) })
	return ch
}

// next moves pick to the next combination; false after the last.
func next(pick []int, kinds []string, byKind map[string][]candidate) bool {
	for k := range pick {
		if pick[k] < len(byKind[kinds[k]]) {
			pick[k]++
			return true
		}
		pick[k] = 0
	}
	return false
}

// stacks reports whether the promotions of set (and a voucher) may apply
// together.
func stacks(set []candidate, voucher bool) bool {
	if len(set)+btoi(voucher) <= 1 {
		return true
	}
	for _, c := range set {
		if !c.term.Stackable {
			return false
		}
	}
	return true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// price applies set to the cart in a fixed order (spend and save, new
// customer, free delivery, then the voucher), each capped so that the
// dishes' discount is at most the dishes and the total at least 1 fen; a
// promotion capped to nothing is dropped.
func price(set []candidate, c Cart) (applied []candidate, off, waived, voucher int64) {
	fee := c.DeliveryFeeFen
	for _, cand := range set {
		if cand.term.Kind == KindFreeDelivery {
			waived, fee = fee, 0
		}
	}
	room := min(c.ItemsTotalFen, c.ItemsTotalFen+c.PackagingFeeFen+fee-1)
	for _, cand := range set {
		if cand.term.Kind == KindFreeDelivery {
			applied = append(applied, cand)
			continue
		}
		cand.amount = min(cand.amount, room)
		if cand.amount <= 0 {
			continue
		}
		room -= cand.amount
		off += cand.amount
		applied = append(applied, cand)
	}
	voucher = max(0, min(c.VoucherFen, room))
	return applied, off, waived, voucher
}

// better breaks a tie between two sets of equal value: fewer promotions,
// then the lower ids.
func better(a, b []candidate) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	for i := range a {
		if a[i].term.ID != b[i].term.ID {
			return a[i].term.ID < b[i].term.ID
		}
	}
	return false
}

// eligible says what t gives the cart on its own, or why it gives
// nothing.
func eligible(t Term, c Cart) (int64, *Skipped) {
	if r, detail := window(t, c.Now.In(c.Location)); r != "" {
		s := skipped(t, r, detail)
		return 0, &s
	}
	var amount int64
	switch t.Kind {
	case KindSpendSave, KindNewCustomer:
		for _, tier := range t.Tiers { // ascending thresholds
			if c.ItemsTotalFen >= tier.ThresholdFen {
				amount = tier.OffFen
			}
		}
		if amount == 0 {
			s := skipped(t, ReasonBelowThreshold, fmt.Sprintf("the dishes come to %d fen; the least this needs is %d fen", c.ItemsTotalFen, t.Tiers[0].ThresholdFen))
			s.ShortfallFen = t.Tiers[0].ThresholdFen - c.ItemsTotalFen
			return 0, &s
		}
		if t.Kind == KindNewCustomer {
			if (t.NewCustomerScope == ScopePlatform && !c.NewOnPlatform) || (t.NewCustomerScope == ScopeMerchant && !c.NewAtMerchant) {
				s := skipped(t, ReasonNotNewCustomer, "it is for a customer's first order "+map[string]string{ScopeMerchant: "at this merchant", ScopePlatform: "on the platform"}[t.NewCustomerScope])
				return 0, &s
			}
		}
	case KindFreeDelivery:
		if th := t.Tiers[0].ThresholdFen; c.ItemsTotalFen < th {
			s := skipped(t, ReasonBelowThreshold, fmt.Sprintf("the dishes come to %d fen; free delivery needs %d fen", c.ItemsTotalFen, th))
			s.ShortfallFen = th - c.ItemsTotalFen
			return 0, &s
		}
		if c.DeliveryFeeFen == 0 {
			s := skipped(t, ReasonNoDeliveryFee, "this delivery costs nothing already")
			return 0, &s
		}
		amount = c.DeliveryFeeFen
	}
	if t.BudgetLeft != nil && *t.BudgetLeft < amount {
		s := skipped(t, ReasonBudgetSpent, "the promotion's budget is spent")
		return 0, &s
	}
	return amount, nil
}

// window says whether local (the merchant's time) is in t's dates and
// daily hours: "" when it is, else the reason and a detail.
func window(t Term, local time.Time) (reason, detail string) {
	day := local.Format(time.DateOnly)
	switch {
	case t.StartsOn != "" && day < t.StartsOn:
		return ReasonNotStarted, "it starts on " + t.StartsOn
	case t.EndsOn != "" && day > t.EndsOn:
		return ReasonExpired, "it ended on " + t.EndsOn
	}
	if t.DailyFrom != "" {
		now := local.Format(time.TimeOnly)
		if now < t.DailyFrom || now >= t.DailyUntil {
			return ReasonOutsideHours, "it runs daily from " + t.DailyFrom[:5] + " to " + t.DailyUntil[:5]
		}
	}
	return "", ""
}

func skipped(t Term, reason, detail string) Skipped {
	return Skipped{id: t.ID, PromotionID: strconv.FormatInt(t.ID, 10), Kind: t.Kind, Name: t.Name, Reason: reason, Detail: detail}
}
