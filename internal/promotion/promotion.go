// Package promotion is the promotions a merchant runs on its own menu:
// spend-and-save tiers (满减), a discount on a customer's first order (at
// the merchant or on the platform) and free delivery above a total, each
// with local dates and daily hours in the merchant's time zone, whether it
// combines with other discounts, and an optional budget.
//
// Confirm weighs them (Best) and the placement holds the order to them:
// any change of a promotion moves the merchant's quote_version in its
// transaction, so a cart quoted under the old terms takes no stock (409
// quote-changed); a budget is spread over shards and taken in the
// placement's statement or transaction, never beyond what is left; a
// first-order discount claims the customer's one row in its scope there
// too, so racing first orders get it once.
package promotion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
)

// The kinds of promotion.
const (
	KindSpendSave    = "spend_save"
	KindNewCustomer  = "new_customer"
	KindFreeDelivery = "free_delivery"
)

// Whose first order a new-customer discount is for.
const (
	ScopeMerchant = "merchant"
	ScopePlatform = "platform"
)

// Who funds a promotion.
const (
	FundedByPlatform = "platform"
	FundedByMerchant = "merchant"
)

// A promotion's status: a paused one is not offered.
const (
	StatusActive = "active"
	StatusPaused = "paused"
)

// BudgetShards is how many rows a promotion's budget is spread over: as
// many placements (or groups of placements committed together) take from
// it at once without waiting for each other. order_place starts its
// search at the backend's pid modulo 16.
const BudgetShards = 16

// Options configure a Service.
type Options struct {
	Pool *pgxpool.Pool
	// MenuChanged is told, after the commit, of a merchant whose
	// promotions changed (catalog.Service.Changed: the cached menu).
	MenuChanged func(ctx context.Context, merchantID int64)
}

// Service manages merchants' promotions.
type Service struct {
	opts Options
	q    *dbsqlc.Queries
}

// NewService returns a Service.
func NewService(o Options) *Service {
	if o.MenuChanged == nil {
		o.MenuChanged = func(context.Context, int64) {}
	}
	return &Service{opts: o, q: dbsqlc.New()}
}

// Begin starts a transaction (db.Beginner), for the create route that
// records its answer with what it writes.
func (s *Service) Begin(ctx context.Context) (pgx.Tx, error) { return s.opts.Pool.Begin(ctx) }

// Promotion is a promotion as staff and customers see it.
type Promotion struct {
	ID         string `json:"id"`
	MerchantID string `json:"merchant_id"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Tiers      []Tier `json:"tiers"`
	// NewCustomerScope is merchant or platform (new_customer), else null.
	NewCustomerScope *string `json:"new_customer_scope"`
	FundedBy         string  `json:"funded_by"`
	// StartsOn and EndsOn (YYYY-MM-DD, inclusive) and DailyFrom and
	// DailyUntil (HH:MM) are in the merchant's time zone; null: no bound.
	StartsOn   *string `json:"starts_on"`
	EndsOn     *string `json:"ends_on"`
	DailyFrom  *string `json:"daily_from"`
	DailyUntil *string `json:"daily_until"`
	Stackable  bool    `json:"stackable"`
	// BudgetFen is the most it gives away in all (null: no bound), and
	// BudgetLeftFen what it has not given yet.
	BudgetFen     *int64    `json:"budget_fen"`
	BudgetLeftFen *int64    `json:"budget_left_fen"`
	Status        string    `json:"status"`
	Version       int64     `json:"version"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Out renders a row and the budget it has left.
func Out(p dbsqlc.Promotion, budgetLeft int64) Promotion {
	out := Promotion{
		ID: strconv.FormatInt(p.ID, 10), MerchantID: strconv.FormatInt(p.MerchantID, 10), Kind: p.Kind, Name: p.Name,
		NewCustomerScope: p.NewCustomerScope, FundedBy: p.FundedBy, StartsOn: dateOut(p.StartsOn), EndsOn: dateOut(p.EndsOn),
		DailyFrom: timeOut(p.DailyFrom), DailyUntil: timeOut(p.DailyUntil), Stackable: p.Stackable, BudgetFen: p.BudgetFen,
		Status: p.Status, Version: p.Version, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(),
	}
	if err := json.Unmarshal(p.Tiers, &out.Tiers); err != nil || out.Tiers == nil {
		out.Tiers = []Tier{}
	}
	if p.BudgetFen != nil {
		out.BudgetLeftFen = &budgetLeft
	}
	return out
}

func dateOut(d pgtype.Date) *string {
	if !d.Valid {
		return nil
	}
	s := d.Time.Format(time.DateOnly)
	return &s
}

func timeOut(t pgtype.Time) *string {
	if !t.Valid {
		return nil
	}
	m := t.Microseconds / 60e6
	s := fmt.Sprintf("%02d:%02d", m/60, m%60)
	return &s
}

// Errors of the promotion routes.
var (
	ErrNotFound     = problem.New(problem.NotFound, "no such promotion")
	ErrNameTaken    = problem.New(problem.AlreadyExists, "the merchant has a promotion of that name")
	ErrPlatformOnly = problem.New(problem.Forbidden, "only an admin makes a promotion the platform funds")
)

// Create adds a promotion to a merchant in tx (which records the create's
// answer), and moves the merchant's quote_version. The caller commits,
// then calls Changed.
func (s *Service) Create(ctx context.Context, tx pgx.Tx, staff auth.Staff, merchantID int64, req CreateRequest) (Promotion, error) {
	switch {
	case !staff.CanManage(merchantID):
		return Promotion{}, auth.ErrOtherMerchant
	case req.FundedBy == FundedByPlatform && !staff.Role.Admin:
		return Promotion{}, ErrPlatformOnly
	}
	tiers, _ := json.Marshal(req.Tiers) // validated
	p := dbsqlc.PromotionCreateParams{
		MerchantID: merchantID, Kind: req.Kind, Name: req.Name, Tiers: tiers, NewCustomerScope: req.NewCustomerScope,
		FundedBy: req.FundedBy, StartsOn: dateIn(req.StartsOn), EndsOn: dateIn(req.EndsOn), DailyFrom: timeIn(req.DailyFrom),
		DailyUntil: timeIn(req.DailyUntil), Stackable: req.Stackable == nil || *req.Stackable, BudgetFen: req.BudgetFen,
		CreatedBy: staff.Subject,
	}
	// A savepoint, so that a duplicate name leaves tx usable.
	row, err := db.WithTxV(ctx, tx, func(tx pgx.Tx) (dbsqlc.Promotion, error) { return s.q.PromotionCreate(ctx, tx, p) })
	if c, ok := db.UniqueViolation(err); ok && c == "promotions_name_key" {
		return Promotion{}, ErrNameTaken
	}
	if _, ok := db.ForeignKeyViolation(err); ok {
		return Promotion{}, problem.New(problem.NotFound, "no such merchant")
	}
	if err != nil {
		return Promotion{}, fmt.Errorf("create promotion: %w", err)
	}
	if row.BudgetFen != nil {
		if err := s.q.PromotionBudgetAdd(ctx, tx, dbsqlc.PromotionBudgetAddParams{PromotionID: row.ID, ShardFen: spread(*row.BudgetFen)}); err != nil {
			return Promotion{}, fmt.Errorf("add promotion budget: %w", err)
		}
	}
	if err := s.q.MerchantQuoteChanged(ctx, tx, merchantID); err != nil {
		return Promotion{}, fmt.Errorf("move quote version: %w", err)
	}
	var left int64
	if row.BudgetFen != nil {
		left = *row.BudgetFen
	}
	return Out(row, left), nil
}

// Changed tells the menu cache that a merchant's promotions changed.
func (s *Service) Changed(ctx context.Context, merchantID int64) { s.opts.MenuChanged(ctx, merchantID) }

// spread divides fen over BudgetShards as evenly as whole fen go.
func spread(fen int64) []int64 {
	out := make([]int64, BudgetShards)
	per, extra := fen/BudgetShards, fen%BudgetShards
	for i := range out {
		out[i] = per
		if int64(i) < extra {
			out[i]++
		}
	}
	return out
}

// Promotions lists a merchant's promotions, for staff who may manage it.
func (s *Service) Promotions(ctx context.Context, staff auth.Staff, merchantID int64) ([]Promotion, error) {
	if !staff.CanManage(merchantID) {
		return nil, auth.ErrOtherMerchant
	}
	rows, err := s.q.PromotionsOf(ctx, s.opts.Pool, merchantID)
	if err != nil {
		return nil, fmt.Errorf("list promotions: %w", err)
	}
	out := make([]Promotion, len(rows))
	for i, r := range rows {
		out[i] = Out(r.Promotion, r.BudgetLeft)
	}
	return out, nil
}

// Get returns a promotion, for staff who may manage its merchant.
func (s *Service) Get(ctx context.Context, staff auth.Staff, id int64) (Promotion, error) {
	row, err := s.q.PromotionGet(ctx, s.opts.Pool, id)
	if errors.Is(err, db.ErrNotFound) {
		return Promotion{}, ErrNotFound
	}
	if err != nil {
		return Promotion{}, fmt.Errorf("get promotion: %w", err)
	}
	if !staff.CanManage(row.Promotion.MerchantID) {
		return Promotion{}, auth.ErrOtherMerchant
	}
	return Out(row.Promotion, row.BudgetLeft), nil
}

// Update changes a promotion at the version the caller read, and moves
// the merchant's quote_version with it: carts quoted under the old terms
// are confirmed again.
func (s *Service) Update(ctx context.Context, staff auth.Staff, id int64, req UpdateRequest) (Promotion, error) {
	cur, err := s.Get(ctx, staff, id)
	if err != nil {
		return Promotion{}, err
	}
	if err := req.check(cur); err != nil {
		return Promotion{}, err
	}
	merchantID, _ := strconv.ParseInt(cur.MerchantID, 10, 64)
	p := dbsqlc.PromotionUpdateParams{ID: id, Version: *req.Version, Name: req.Name, Status: req.Status, Stackable: req.Stackable,
		SetDates: req.Dates != nil, SetHours: req.Hours != nil, AddBudgetFen: new(int64)}
	if req.Tiers != nil {
		p.Tiers, _ = json.Marshal(req.Tiers)
	}
	if req.Dates != nil {
		p.StartsOn, p.EndsOn = dateIn(req.Dates.StartsOn), dateIn(req.Dates.EndsOn)
	}
	if req.Hours != nil {
		p.DailyFrom, p.DailyUntil = timeIn(req.Hours.From), timeIn(req.Hours.Until)
	}
	if req.AddBudgetFen != nil {
		p.AddBudgetFen = req.AddBudgetFen
	}
	row, err := db.WithTxV(ctx, s.opts.Pool, func(tx pgx.Tx) (dbsqlc.Promotion, error) {
		row, err := s.q.PromotionUpdate(ctx, tx, p)
		if err != nil {
			return row, err
		}
		if *p.AddBudgetFen > 0 {
			if err := s.q.PromotionBudgetAdd(ctx, tx, dbsqlc.PromotionBudgetAddParams{PromotionID: id, ShardFen: spread(*p.AddBudgetFen)}); err != nil {
				return row, err
			}
		}
		return row, s.q.MerchantQuoteChanged(ctx, tx, merchantID)
	})
	if errors.Is(err, db.ErrNotFound) {
		now, err := s.Get(ctx, staff, id)
		if err != nil {
			return Promotion{}, err
		}
		return Promotion{}, problem.New(problem.VersionConflict, "the promotion changed since version %d; it is at version %d", *req.Version, now.Version).
			With("current_version", now.Version)
	}
	if c, ok := db.UniqueViolation(err); ok && c == "promotions_name_key" {
		return Promotion{}, ErrNameTaken
	}
	if err != nil {
		return Promotion{}, fmt.Errorf("update promotion: %w", err)
	}
	s.Changed(ctx, merchantID)
	return s.Get(ctx, staff, row.ID)
}

func dateIn(s *string) pgtype.Date {
	if s == nil {
		return pgtype.Date{}
	}
	t, _ := time.Parse(time.DateOnly, *s) // validated
	return pgtype.Date{Time: t, Valid: true}
}

func timeIn(s *string) pgtype.Time {
	if s == nil {
		return pgtype.Time{}
	}
	t, _ := time.Parse("15:04", *s) // validated
	return pgtype.Time{Microseconds: int64(t.Hour()*60+t.Minute()) * 60e6, Valid: true}
}

// Terms decodes a merchant's promotions as a confirm's read gives them
// (QuoteCart's promotions column: each row as JSON, with budget_left).
func Terms(raw []byte) ([]Term, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var terms []Term
	if err := json.Unmarshal(raw, &terms); err != nil {
		return nil, fmt.Errorf("decode promotions: %w", err)
	}
	for i, t := range terms {
		switch {
		case t.BudgetFen == nil:
			terms[i].BudgetLeft = nil
		case t.BudgetLeft == nil:
			terms[i].BudgetLeft = new(int64)
		}
	}
	return terms, nil
}

// Standing is what a customer's first-order discounts depend on: whether
// they have had an order paid, and whether an order of theirs holds the
// first-order claim, at the merchant and on the platform.
type Standing struct {
	PaidAtMerchant, ClaimedAtMerchant bool
	PaidOnPlatform, ClaimedOnPlatform bool
}

// CustomerStanding reads a customer's Standing at a merchant.
func CustomerStanding(ctx context.Context, q dbsqlc.DBTX, userID, merchantID int64) (Standing, error) {
	row, err := dbsqlc.New().CustomerStanding(ctx, q, dbsqlc.CustomerStandingParams{UserID: userID, MerchantID: merchantID})
	if err != nil {
		return Standing{}, fmt.Errorf("the customer's standing: %w", err)
	}
	return Standing{PaidAtMerchant: row.PaidAtMerchant, ClaimedAtMerchant: row.ClaimedAtMerchant,
		PaidOnPlatform: row.PaidOnPlatform, ClaimedOnPlatform: row.ClaimedOnPlatform}, nil
}

// Taken is what an order takes from promotions in its placement: each
// budget's part, and the first-order claim.
type Taken struct {
	Budgets []Budget
	// NewCustomerScope is the scope of the first-order claim (the
	// merchant's id, or 0 for the platform); nil for none.
	NewCustomerScope *int64
}

// Budget is what an order takes from a promotion's budget.
type Budget struct {
	PromotionID int64
	AmountFen   int64
}

// StartShard is where an order's take of a budget starts looking, so that
// placements spread over the shards.
func StartShard() int16 { return int16(rand.IntN(BudgetShards)) } //nolint:gosec // G404: spreading load, not a secret

// Unavailable is the problem of a promotion the cart was quoted with that
// the placement cannot give: reason budget_spent or not_new_customer.
func Unavailable(reason, detail string, promotionID int64) error {
	return problem.New(problem.PromotionUnavailable, "%s; confirm again", detail).
		With("reason", reason).With("promotion_id", strconv.FormatInt(promotionID, 10))
}

// Take takes what an order gets from promotions in tx, the transaction
// path of a placement: each budget (from a free shard that has the
// order's part, else from the first shard that has it, waiting for it,
// else, near the budget's end, from every shard in order), and the
// first-order claim, waiting for a claim in flight. It refuses with
// promotion-unavailable when a budget is spent or the customer's first
// order is claimed.
func Take(ctx context.Context, tx pgx.Tx, userID, orderID int64, t Taken, newCustomerPromotion int64) error {
	q := dbsqlc.New()
	for _, b := range t.Budgets {
		// One free shard with the order's part, as the one-statement path
		// takes it; else wait for every shard, and gather.
		n, err := q.PromotionBudgetTakeFree(ctx, tx, dbsqlc.PromotionBudgetTakeFreeParams{PromotionID: b.PromotionID, Fen: b.AmountFen, Start: StartShard()})
		if err != nil {
			return fmt.Errorf("take promotion budget: %w", err)
		}
		if n == 1 {
			continue
		}
		// Else wait for one shard that has it; only when none has,
		// gather from several (a budget near its end).
		if n, err = q.PromotionBudgetTakeWait(ctx, tx, dbsqlc.PromotionBudgetTakeWaitParams{PromotionID: b.PromotionID, Fen: b.AmountFen, Start: StartShard()}); err != nil {
			return fmt.Errorf("take promotion budget: %w", err)
		}
		if n == 1 {
			continue
		}
		shards, err := q.PromotionBudgetLock(ctx, tx, b.PromotionID)
		if err != nil {
			return fmt.Errorf("lock promotion budget: %w", err)
		}
		need := b.AmountFen
		for _, sh := range shards {
			if need == 0 {
				break
			}
			take := min(need, sh.Remaining)
			if take == 0 {
				continue
			}
			if err := q.PromotionBudgetTake(ctx, tx, dbsqlc.PromotionBudgetTakeParams{PromotionID: b.PromotionID, Shard: sh.Shard, Fen: take}); err != nil {
				return fmt.Errorf("take promotion budget: %w", err)
			}
			need -= take
		}
		if need > 0 {
			return Unavailable(ReasonBudgetSpent, "the promotion's budget is spent", b.PromotionID)
		}
	}
	if sc := t.NewCustomerScope; sc != nil {
		if err := q.NewCustomerLock(ctx, tx, dbsqlc.NewCustomerLockParams{UserID: userID, Scope: *sc}); err != nil {
			return fmt.Errorf("lock first-order claim: %w", err)
		}
		n, err := q.NewCustomerClaim(ctx, tx, dbsqlc.NewCustomerClaimParams{UserID: userID, Scope: *sc, OrderID: orderID})
		if err != nil {
			return fmt.Errorf("claim first order: %w", err)
		}
		if n == 0 {
			return Unavailable(ReasonNotNewCustomer, "another order of yours has the first-order discount", newCustomerPromotion)
		}
	}
	return nil
}

// Release gives back what an order took from promotions, in the
// transaction of the transition that ends it before the kitchen had it:
// its budgets, and its first-order claim (the customer is new again). The
// state table runs it at most once per order.
func Release(ctx context.Context, tx pgx.Tx, orderID int64) error {
	q := dbsqlc.New()
	if err := q.PromotionBudgetRelease(ctx, tx, orderID); err != nil {
		return fmt.Errorf("release promotion budget: %w", err)
	}
	if _, err := q.NewCustomerRelease(ctx, tx, orderID); err != nil {
		return fmt.Errorf("release first-order claim: %w", err)
	}
	return nil
}
