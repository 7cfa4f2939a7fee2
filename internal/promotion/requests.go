package promotion

import (
	"time"
	"unicode/utf8"

	"github.com/takeout/takeout/internal/problem"
)

// Limits shared with the schema's CHECK constraints (db/migrations
// 00031_promotions.sql) and api/openapi.yaml.
const (
	maxNameRunes = 60
	maxTiers     = 5
	maxFen       = 100_000_000
	maxBudgetFen = 10_000_000_000
)

// CreateRequest is the body of POST /admin/v1/merchants/{id}/promotions.
type CreateRequest struct {
	Kind  string `json:"kind"`
	Name  string `json:"name" text:"name"`
	Tiers []Tier `json:"tiers"`
	// NewCustomerScope is required for new_customer: merchant or
	// platform.
	NewCustomerScope *string `json:"new_customer_scope"`
	FundedBy         string  `json:"funded_by"`
	StartsOn         *string `json:"starts_on"`
	EndsOn           *string `json:"ends_on"`
	DailyFrom        *string `json:"daily_from"`
	DailyUntil       *string `json:"daily_until"`
	// Stackable defaults to true.
	Stackable *bool  `json:"stackable"`
	BudgetFen *int64 `json:"budget_fen"`
}

// Validate checks the request's values.
func (r *CreateRequest) Validate() error {
	if n := utf8.RuneCountInString(r.Name); n < 1 || n > maxNameRunes {
		return problem.Field("name", "must be 1 to %d characters", maxNameRunes)
	}
	switch r.Kind {
	case KindSpendSave, KindNewCustomer, KindFreeDelivery:
	default:
		return problem.Field("kind", "must be spend_save, new_customer or free_delivery, got %q", r.Kind)
	}
	if err := validTiers(r.Kind, r.Tiers); err != nil {
		return err
	}
	switch {
	case r.Kind == KindNewCustomer && r.NewCustomerScope == nil:
		return problem.Field("new_customer_scope", "required for new_customer: merchant or platform")
	case r.Kind == KindNewCustomer && *r.NewCustomerScope != ScopeMerchant && *r.NewCustomerScope != ScopePlatform:
		return problem.Field("new_customer_scope", "must be merchant or platform, got %q", *r.NewCustomerScope)
	case r.Kind != KindNewCustomer && r.NewCustomerScope != nil:
		return problem.Field("new_customer_scope", "only a new_customer promotion has one")
	}
	switch r.FundedBy {
	case FundedByPlatform, FundedByMerchant:
	default:
		return problem.Field("funded_by", "must be platform or merchant, got %q", r.FundedBy)
	}
	if err := validDates(r.StartsOn, r.EndsOn); err != nil {
		return err
	}
	if err := validHours(r.DailyFrom, r.DailyUntil); err != nil {
		return err
	}
	if r.BudgetFen != nil && (*r.BudgetFen < 1 || *r.BudgetFen > maxBudgetFen) {
		return problem.Field("budget_fen", "must be between 1 and %d, or absent for no budget", int64(maxBudgetFen))
	}
	return nil
}

// validTiers checks a kind's tiers: spend and save 1 to 5, thresholds and
// amounts rising, each amount below its threshold; one for the others,
// free delivery's with off_fen 0.
func validTiers(kind string, tiers []Tier) error {
	switch {
	case len(tiers) == 0:
		return problem.Field("tiers", "required: at least one {threshold_fen, off_fen}")
	case kind == KindSpendSave && len(tiers) > maxTiers:
		return problem.Field("tiers", "at most %d tiers", maxTiers)
	case kind != KindSpendSave && len(tiers) != 1:
		return problem.Field("tiers", "a %s promotion has one tier", kind)
	}
	for i, t := range tiers {
		switch {
		case t.ThresholdFen < 0 || t.ThresholdFen > maxFen:
			return problem.Field("tiers", "tier %d: threshold_fen must be between 0 and %d", i, maxFen)
		case kind == KindFreeDelivery && t.OffFen != 0:
			return problem.Field("tiers", "free delivery waives the delivery fee: off_fen must be 0")
		case kind != KindFreeDelivery && (t.OffFen < 1 || t.OffFen > maxFen):
			return problem.Field("tiers", "tier %d: off_fen must be between 1 and %d", i, maxFen)
		case kind == KindSpendSave && t.OffFen >= t.ThresholdFen:
			return problem.Field("tiers", "tier %d: off_fen must be below threshold_fen: spend and save never takes the whole threshold", i)
		case i > 0 && (t.ThresholdFen <= tiers[i-1].ThresholdFen || t.OffFen <= tiers[i-1].OffFen):
			return problem.Field("tiers", "tier %d: thresholds and amounts must rise from tier to tier", i)
		}
	}
	return nil
}

func validDates(from, until *string) error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"starts_on", from}, {"ends_on", until}} {
		if f.v == nil {
			continue
		}
		if _, err := time.Parse(time.DateOnly, *f.v); err != nil {
			return problem.Field(f.name, "must be a date, YYYY-MM-DD, got %q", *f.v)
		}
	}
	if from != nil && until != nil && *until < *from {
		return problem.Field("ends_on", "must be on or after starts_on")
	}
	return nil
}

func validHours(from, until *string) error {
	if (from == nil) != (until == nil) {
		return problem.Field("daily_from", "daily_from and daily_until go together")
	}
	if from == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    string
	}{{"daily_from", *from}, {"daily_until", *until}} {
		if _, err := time.Parse("15:04", f.v); err != nil || len(f.v) != 5 {
			return problem.Field(f.name, "must be a local time, HH:MM, got %q", f.v)
		}
	}
	if *until <= *from {
		return problem.Field("daily_until", "must be after daily_from (a window within one day)")
	}
	return nil
}

// UpdateRequest is the body of PATCH /admin/v1/promotions/{id}: the
// version read, and what changes (absent: kept).
type UpdateRequest struct {
	Version   *int64  `json:"version"`
	Name      *string `json:"name" text:"name"`
	Tiers     []Tier  `json:"tiers"`
	Status    *string `json:"status"`
	Stackable *bool   `json:"stackable"`
	// Dates and Hours replace the dates and the daily window whole (their
	// members null: no bound).
	Dates        *Dates `json:"dates"`
	Hours        *Hours `json:"hours"`
	AddBudgetFen *int64 `json:"add_budget_fen"`
}

// Dates are a promotion's first and last local day.
type Dates struct {
	StartsOn *string `json:"starts_on"`
	EndsOn   *string `json:"ends_on"`
}

// Hours are a promotion's daily window; both null: all day.
type Hours struct {
	From  *string `json:"from"`
	Until *string `json:"until"`
}

// Validate checks what it can without the promotion.
func (r *UpdateRequest) Validate() error {
	if r.Version == nil {
		return problem.Field("version", "required: the version you read")
	}
	if r.Name == nil && r.Tiers == nil && r.Status == nil && r.Stackable == nil && r.Dates == nil && r.Hours == nil && r.AddBudgetFen == nil {
		return problem.New(problem.InvalidRequest, "nothing to change: send at least one of name, tiers, status, stackable, dates, hours, add_budget_fen")
	}
	if r.Name != nil {
		if n := utf8.RuneCountInString(*r.Name); n < 1 || n > maxNameRunes {
			return problem.Field("name", "must be 1 to %d characters", maxNameRunes)
		}
	}
	if r.Status != nil && *r.Status != StatusActive && *r.Status != StatusPaused {
		return problem.Field("status", "must be active or paused, got %q", *r.Status)
	}
	if r.Dates != nil {
		if err := validDates(r.Dates.StartsOn, r.Dates.EndsOn); err != nil {
			return err
		}
	}
	if r.Hours != nil {
		if err := validHours(r.Hours.From, r.Hours.Until); err != nil {
			return err
		}
	}
	if r.AddBudgetFen != nil && (*r.AddBudgetFen < 1 || *r.AddBudgetFen > maxBudgetFen) {
		return problem.Field("add_budget_fen", "must be between 1 and %d", int64(maxBudgetFen))
	}
	return nil
}

// check validates what depends on the promotion: its kind's tiers, and a
// budget to add to.
func (r *UpdateRequest) check(cur Promotion) error {
	if r.Tiers != nil {
		if err := validTiers(cur.Kind, r.Tiers); err != nil {
			return err
		}
	}
	if r.AddBudgetFen != nil && cur.BudgetFen == nil {
		return problem.Field("add_budget_fen", "the promotion has no budget to add to")
	}
	if r.AddBudgetFen != nil && *cur.BudgetFen+*r.AddBudgetFen > maxBudgetFen {
		return problem.Field("add_budget_fen", "the budget would pass %d", int64(maxBudgetFen))
	}
	return nil
}
