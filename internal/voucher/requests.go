package voucher

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/takeout/takeout/internal/problem"
)

// Limits shared with the schema's CHECK constraints (db/migrations
// 00029_vouchers.sql) and api/openapi.yaml.
const (
	maxNameRunes    = 60
	maxAmountFen    = 100_000_000
	maxValidDays    = 365
	maxBudget       = 10_000_000
	maxPerUserLimit = 100
	// A claim window longer than this is a typo, not a campaign.
	maxClaimWindow = 2 * 366 * 24 * time.Hour
)

// CreateTemplateRequest is the body of POST /admin/v1/voucher-templates.
type CreateTemplateRequest struct {
	// MerchantID is the merchant the voucher is good at; absent for a
	// platform voucher (admins only).
	MerchantID   *string   `json:"merchant_id"`
	Name         string    `json:"name" text:"name"`
	AmountFen    int64     `json:"amount_fen"`
	ThresholdFen int64     `json:"threshold_fen"`
	FundedBy     string    `json:"funded_by"`
	ClaimFrom    time.Time `json:"claim_from"`
	ClaimUntil   time.Time `json:"claim_until"`
	ValidDays    int32     `json:"valid_days"`
	Budget       int32     `json:"budget"`
	PerUserLimit *int32    `json:"per_user_limit"`
}

// Validate checks the request's values.
func (r *CreateTemplateRequest) Validate() error {
	if r.MerchantID != nil {
		if id, err := strconv.ParseInt(*r.MerchantID, 10, 64); err != nil || id <= 0 {
			return problem.Field("merchant_id", "must be an id (a string of digits), got %q", *r.MerchantID)
		}
	}
	if err := validName(r.Name); err != nil {
		return err
	}
	if r.AmountFen < 1 || r.AmountFen > maxAmountFen {
		return problem.Field("amount_fen", "must be between 1 and %d", maxAmountFen)
	}
	if r.ThresholdFen < 0 || r.ThresholdFen > maxAmountFen {
		return problem.Field("threshold_fen", "must be between 0 (no threshold) and %d", maxAmountFen)
	}
	if r.ThresholdFen > 0 && r.AmountFen >= r.ThresholdFen {
		return problem.Field("amount_fen", "must be below threshold_fen (%d): a voucher never takes the whole threshold", r.ThresholdFen)
	}
	switch r.FundedBy {
	case FundedByPlatform, FundedByMerchant:
	case "":
		return problem.Field("funded_by", "required: platform or merchant")
	default:
		return problem.Field("funded_by", "must be platform or merchant, got %q", r.FundedBy)
	}
	if r.MerchantID == nil && r.FundedBy == FundedByMerchant {
		return problem.Field("funded_by", "a platform voucher (no merchant_id) is funded by the platform")
	}
	if r.ClaimFrom.IsZero() {
		return problem.Field("claim_from", "required: an RFC 3339 time")
	}
	if r.ClaimUntil.IsZero() {
		return problem.Field("claim_until", "required: an RFC 3339 time")
	}
	if !r.ClaimUntil.After(r.ClaimFrom) {
		return problem.Field("claim_until", "must be after claim_from")
	}
	if r.ClaimUntil.Sub(r.ClaimFrom) > maxClaimWindow {
		return problem.Field("claim_until", "the claim window is at most two years")
	}
	if r.ValidDays < 1 || r.ValidDays > maxValidDays {
		return problem.Field("valid_days", "must be between 1 and %d", maxValidDays)
	}
	if r.Budget < 1 || r.Budget > maxBudget {
		return problem.Field("budget", "must be between 1 and %d", maxBudget)
	}
	if r.PerUserLimit != nil && (*r.PerUserLimit < 1 || *r.PerUserLimit > maxPerUserLimit) {
		return problem.Field("per_user_limit", "must be between 1 and %d", maxPerUserLimit)
	}
	return nil
}

func validName(name string) error {
	switch n := utf8.RuneCountInString(name); {
	case n == 0:
		return problem.Field("name", "required")
	case n > maxNameRunes:
		return problem.Field("name", "at most %d characters", maxNameRunes)
	}
	return nil
}

// UpdateTemplateRequest is the body of PATCH
// /admin/v1/voucher-templates/{id}: the version read and what to change.
type UpdateTemplateRequest struct {
	Version    *int64     `json:"version"`
	Name       *string    `json:"name" text:"name"`
	Status     *string    `json:"status"`
	ClaimUntil *time.Time `json:"claim_until"`
	// AddBudget adds claims to the budget; a budget never shrinks (those
	// claimed stay claimed: pause the template, or end its window).
	AddBudget *int32 `json:"add_budget"`
}

// Validate checks the request's values.
func (r *UpdateTemplateRequest) Validate() error {
	if r.Version == nil {
		return problem.Field("version", "required: the version you read")
	}
	if *r.Version < 1 {
		return problem.Field("version", "must be at least 1")
	}
	if r.Name != nil {
		if err := validName(*r.Name); err != nil {
			return err
		}
	}
	if r.Status != nil && *r.Status != StatusActive && *r.Status != StatusPaused {
		return problem.Field("status", "must be active or paused, got %q", *r.Status)
	}
	if r.ClaimUntil != nil && r.ClaimUntil.IsZero() {
		return problem.Field("claim_until", "must be an RFC 3339 time")
	}
	if r.AddBudget != nil && (*r.AddBudget < 1 || *r.AddBudget > maxBudget) {
		return problem.Field("add_budget", "must be between 1 and %d", maxBudget)
	}
	if r.Name == nil && r.Status == nil && r.ClaimUntil == nil && r.AddBudget == nil {
		return problem.New(problem.InvalidRequest, "nothing to change: send name, status, claim_until or add_budget")
	}
	return nil
}

// ClaimRequest is the body of POST /v1/vouchers/claim.
type ClaimRequest struct {
	TemplateID string `json:"template_id"`
}

// Validate checks the request's values.
func (r *ClaimRequest) Validate() error {
	if r.TemplateID == "" {
		return problem.Field("template_id", "required")
	}
	if id, err := strconv.ParseInt(r.TemplateID, 10, 64); err != nil || id <= 0 {
		return problem.Field("template_id", "must be an id (a string of digits), got %q", r.TemplateID)
	}
	return nil
}

func (r ClaimRequest) id() int64 {
	id, _ := strconv.ParseInt(r.TemplateID, 10, 64) // validated
	return id
}
