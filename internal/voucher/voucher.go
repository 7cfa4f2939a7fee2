// Package voucher is vouchers (代金券): templates that a merchant or the
// platform issues (an amount off, or an amount off above a threshold; a
// claim window; a validity after claiming; a total budget and a limit per
// customer; who funds them), and customers' claims of them, kept in their
// wallet.
//
// A claim is exactly once per customer and slot: the n-th claim of a
// template by one customer is a unique row, so racing claims make at most
// the per-user limit however they interleave, and one Idempotency-Key
// replays its first answer. The budget is spread over shards like a dish's
// stock, and a claim takes one unit from a shard no other claim holds, so
// a storm of claims does not queue on one row and never takes more than
// the budget.
package voucher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
)

// Who funds a voucher: what the settlement statement charges it to.
const (
	FundedByPlatform = "platform"
	FundedByMerchant = "merchant"
)

// A template's status: a paused template cannot be claimed (vouchers
// already claimed stay valid).
const (
	StatusActive = "active"
	StatusPaused = "paused"
)

// A voucher's status in the wallet.
const (
	VoucherAvailable = "available"
	VoucherUsed      = "used"
	VoucherExpired   = "expired"
)

// DefaultBudgetShards is how many rows a template's budget is spread
// over: as many claims as this commit at once without waiting for each
// other.
const DefaultBudgetShards = 8

// maxBudgetShards bounds Options.BudgetShards (shards are smallint).
const maxBudgetShards = 64

// Options configure a Service.
type Options struct {
	Pool *pgxpool.Pool
	// BudgetShards is how many rows each template's budget is spread
	// over (DefaultBudgetShards when 0).
	BudgetShards int
	Registerer   prometheus.Registerer
	Now          func() time.Time
}

// Service manages voucher templates and customers' claims.
type Service struct {
	opts   Options
	q      *dbsqlc.Queries
	claims *prometheus.CounterVec
}

// NewService returns a Service, its metrics registered.
func NewService(o Options) (*Service, error) {
	if o.BudgetShards <= 0 {
		o.BudgetShards = DefaultBudgetShards
	}
	if o.BudgetShards > maxBudgetShards {
		return nil, fmt.Errorf("voucher budget shards: %d, want at most %d", o.BudgetShards, maxBudgetShards)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Service{opts: o, q: dbsqlc.New(), claims: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "takeout_voucher_claims_total",
		Help: "Voucher claims by result: claimed, limit_reached, budget_spent, not_claimable.",
	}, []string{"result"})}
	for _, r := range []string{"claimed", "limit_reached", "budget_spent", "not_claimable"} {
		s.claims.WithLabelValues(r)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(s.claims); err != nil {
			return nil, fmt.Errorf("register voucher metrics: %w", err)
		}
	}
	return s, nil
}

// Begin starts a transaction (db.Beginner), for the handlers that record
// their answer with what they change.
func (s *Service) Begin(ctx context.Context) (pgx.Tx, error) { return s.opts.Pool.Begin(ctx) }

// Template is a voucher template as staff see it.
type Template struct {
	ID string `json:"id"`
	// MerchantID is null for a platform voucher, good at any merchant.
	MerchantID   *string   `json:"merchant_id"`
	Name         string    `json:"name"`
	AmountFen    int64     `json:"amount_fen"`
	ThresholdFen int64     `json:"threshold_fen"`
	FundedBy     string    `json:"funded_by"`
	ClaimFrom    time.Time `json:"claim_from"`
	ClaimUntil   time.Time `json:"claim_until"`
	ValidDays    int32     `json:"valid_days"`
	Budget       int32     `json:"budget"`
	// Remaining is the budget not yet claimed.
	Remaining    int64     `json:"remaining"`
	PerUserLimit int32     `json:"per_user_limit"`
	Status       string    `json:"status"`
	Version      int64     `json:"version"`
	CreatedBy    string    `json:"created_by"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

func templateOut(t dbsqlc.VoucherTemplate, remaining int64) Template {
	return Template{
		ID: strconv.FormatInt(t.ID, 10), MerchantID: idString(t.MerchantID), Name: t.Name, AmountFen: t.AmountFen,
		ThresholdFen: t.ThresholdFen, FundedBy: t.FundedBy, ClaimFrom: t.ClaimFrom.UTC(), ClaimUntil: t.ClaimUntil.UTC(),
		ValidDays: t.ValidDays, Budget: t.Budget, Remaining: remaining, PerUserLimit: t.PerUserLimit, Status: t.Status,
		Version: t.Version, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC(),
	}
}

// Offer is a template as customers see it: what they may claim.
type Offer struct {
	TemplateID   string    `json:"template_id"`
	MerchantID   *string   `json:"merchant_id"`
	Name         string    `json:"name"`
	AmountFen    int64     `json:"amount_fen"`
	ThresholdFen int64     `json:"threshold_fen"`
	ClaimUntil   time.Time `json:"claim_until"`
	ValidDays    int32     `json:"valid_days"`
	PerUserLimit int32     `json:"per_user_limit"`
	Remaining    int64     `json:"remaining"`
}

// Voucher is a claimed voucher in a customer's wallet.
type Voucher struct {
	ID           string    `json:"id"`
	TemplateID   string    `json:"template_id"`
	MerchantID   *string   `json:"merchant_id"`
	Name         string    `json:"name"`
	AmountFen    int64     `json:"amount_fen"`
	ThresholdFen int64     `json:"threshold_fen"`
	FundedBy     string    `json:"funded_by"`
	ClaimedAt    time.Time `json:"claimed_at"`
	ValidUntil   time.Time `json:"valid_until"`
	// Status is used while an order holds it (OrderID), else available
	// until ValidUntil, then expired. An order cancelled, timed out or
	// refunded whole before acceptance gives it back.
	Status  string     `json:"status"`
	OrderID *string    `json:"order_id"`
	UsedAt  *time.Time `json:"used_at"`
}

func idString(id *int64) *string {
	if id == nil {
		return nil
	}
	s := strconv.FormatInt(*id, 10)
	return &s
}

// Errors of the voucher routes.
var (
	ErrTemplateNotFound = problem.New(problem.NotFound, "no such voucher template")
	ErrNameTaken        = problem.New(problem.AlreadyExists, "a voucher template of that name exists")
	ErrPlatformOnly     = problem.New(problem.Forbidden, "only an admin issues platform vouchers or vouchers the platform funds")
	ErrLimitReached     = problem.New(problem.VoucherLimitReached, "you hold as many of this voucher as one customer may")
	ErrBudgetSpent      = problem.New(problem.VoucherBudgetSpent, "every voucher of this kind has been claimed")
)

// notClaimable is the problem of a claim outside the template's window
// or while it is paused; reason says which.
func notClaimable(reason, format string, args ...any) error {
	return problem.New(problem.VoucherNotClaimable, format, args...).With("reason", reason)
}

// CreateTemplate issues a template on q (the transaction that records the
// create's answer): a merchant's staff only for their merchant, funded by
// it; an admin any, the platform's own included.
func (s *Service) CreateTemplate(ctx context.Context, q dbsqlc.DBTX, staff auth.Staff, req CreateTemplateRequest) (Template, error) {
	var merchantID *int64
	if req.MerchantID != nil {
		id, _ := strconv.ParseInt(*req.MerchantID, 10, 64) // validated
		merchantID = &id
	}
	switch {
	case merchantID == nil && !staff.Role.Admin:
		return Template{}, ErrPlatformOnly
	case merchantID != nil && !staff.CanManage(*merchantID):
		return Template{}, auth.ErrOtherMerchant
	case req.FundedBy == FundedByPlatform && !staff.Role.Admin:
		return Template{}, ErrPlatformOnly
	}
	limit := int32(1)
	if req.PerUserLimit != nil {
		limit = *req.PerUserLimit
	}
	row, err := s.q.VoucherTemplateCreate(ctx, q, dbsqlc.VoucherTemplateCreateParams{
		MerchantID: merchantID, Name: req.Name, AmountFen: req.AmountFen, ThresholdFen: req.ThresholdFen,
		FundedBy: req.FundedBy, ClaimFrom: req.ClaimFrom, ClaimUntil: req.ClaimUntil, ValidDays: req.ValidDays,
		Budget: req.Budget, PerUserLimit: limit, CreatedBy: staff.Subject,
	})
	if c, ok := db.UniqueViolation(err); ok && c == "voucher_templates_name_key" {
		return Template{}, ErrNameTaken
	}
	if _, ok := db.ForeignKeyViolation(err); ok {
		return Template{}, problem.New(problem.NotFound, "no merchant %s", *req.MerchantID).With("field", "merchant_id")
	}
	if err != nil {
		return Template{}, fmt.Errorf("create voucher template: %w", err)
	}
	if err := s.addBudget(ctx, q, row.ID, row.Budget); err != nil {
		return Template{}, err
	}
	return templateOut(row, int64(row.Budget)), nil
}

// addBudget spreads n more claims over the template's shards.
func (s *Service) addBudget(ctx context.Context, q dbsqlc.DBTX, templateID int64, n int32) error {
	if err := s.q.VoucherBudgetAdd(ctx, q, dbsqlc.VoucherBudgetAddParams{TemplateID: templateID, Units: spread(n, s.opts.BudgetShards)}); err != nil {
		return fmt.Errorf("add voucher budget: %w", err)
	}
	return nil
}

// spread divides n over shards as evenly as whole units go: the first
// n % shards shards get one more.
func spread(n int32, shards int) []int32 {
	units := make([]int32, shards)
	per, extra := n/int32(shards), int(n%int32(shards)) //nolint:gosec // G115: shards is at most maxBudgetShards
	for i := range units {
		units[i] = per
		if i < extra {
			units[i]++
		}
	}
	return units
}

// Template returns a template, for staff who may manage it.
func (s *Service) Template(ctx context.Context, staff auth.Staff, id int64) (Template, error) {
	row, err := s.q.VoucherTemplateGet(ctx, s.opts.Pool, id)
	if err != nil {
		return Template{}, notFoundOr(err)
	}
	if err := canManage(staff, row.VoucherTemplate); err != nil {
		return Template{}, err
	}
	return templateOut(row.VoucherTemplate, row.Remaining), nil
}

// canManage: platform templates are the admins'; a merchant's are its
// staff's too.
func canManage(staff auth.Staff, t dbsqlc.VoucherTemplate) error {
	if t.MerchantID == nil && !staff.Role.Admin {
		return ErrPlatformOnly
	}
	if t.MerchantID != nil && !staff.CanManage(*t.MerchantID) {
		return auth.ErrOtherMerchant
	}
	return nil
}

func notFoundOr(err error) error {
	if errors.Is(err, db.ErrNotFound) {
		return ErrTemplateNotFound
	}
	return fmt.Errorf("read voucher template: %w", err)
}

// Templates lists a merchant's templates (nil: the platform's), newest
// first.
func (s *Service) Templates(ctx context.Context, staff auth.Staff, merchantID *int64) ([]Template, error) {
	switch {
	case merchantID == nil && !staff.Role.Admin:
		return nil, ErrPlatformOnly
	case merchantID != nil && !staff.CanManage(*merchantID):
		return nil, auth.ErrOtherMerchant
	}
	rows, err := s.q.VoucherTemplatesOf(ctx, s.opts.Pool, merchantID)
	if err != nil {
		return nil, fmt.Errorf("list voucher templates: %w", err)
	}
	out := make([]Template, len(rows))
	for i, r := range rows {
		out[i] = templateOut(r.VoucherTemplate, r.Remaining)
	}
	return out, nil
}

// UpdateTemplate changes a template at the version the caller read:
// rename, pause or resume, move the end of its claim window, add budget.
func (s *Service) UpdateTemplate(ctx context.Context, staff auth.Staff, id int64, req UpdateTemplateRequest) (Template, error) {
	return db.WithTxV(ctx, s.opts.Pool, func(tx pgx.Tx) (Template, error) {
		cur, err := s.q.VoucherTemplateGet(ctx, tx, id)
		if err != nil {
			return Template{}, notFoundOr(err)
		}
		if err := canManage(staff, cur.VoucherTemplate); err != nil {
			return Template{}, err
		}
		if from := cur.VoucherTemplate.ClaimFrom; req.ClaimUntil != nil && (!req.ClaimUntil.After(from) || req.ClaimUntil.Sub(from) > maxClaimWindow) {
			return Template{}, problem.Field("claim_until", "must be after claim_from (%s) and at most two years later", from.UTC().Format(time.RFC3339))
		}
		var add int32
		if req.AddBudget != nil {
			add = *req.AddBudget
		}
		row, err := s.q.VoucherTemplateUpdate(ctx, tx, dbsqlc.VoucherTemplateUpdateParams{
			ID: id, Version: *req.Version, Name: req.Name, Status: req.Status, ClaimUntil: req.ClaimUntil, AddBudget: add,
		})
		unique, _ := db.UniqueViolation(err)
		_, invalid := db.CheckViolation(err)
		switch {
		case errors.Is(err, db.ErrNotFound):
			return Template{}, problem.New(problem.VersionConflict, "version %d is stale: the current version is %d; read it again and reapply your change",
				*req.Version, cur.VoucherTemplate.Version).With("current_version", cur.VoucherTemplate.Version)
		case unique == "voucher_templates_name_key":
			return Template{}, ErrNameTaken
		case invalid:
			return Template{}, problem.New(problem.InvalidRequest, "the change would make the template invalid (the budget at most 10,000,000)")
		case err != nil:
			return Template{}, fmt.Errorf("update voucher template: %w", err)
		}
		if add > 0 {
			if err := s.addBudget(ctx, tx, id, add); err != nil {
				return Template{}, err
			}
		}
		return templateOut(row, cur.Remaining+int64(add)), nil
	})
}

// Offers lists what a customer may claim now: the platform's templates
// and, with a merchant, that merchant's.
func (s *Service) Offers(ctx context.Context, merchantID *int64) ([]Offer, error) {
	rows, err := s.q.VoucherTemplatesClaimable(ctx, s.opts.Pool, dbsqlc.VoucherTemplatesClaimableParams{Now: s.opts.Now(), MerchantID: merchantID})
	if err != nil {
		return nil, fmt.Errorf("list voucher offers: %w", err)
	}
	out := make([]Offer, len(rows))
	for i, r := range rows {
		t := r.VoucherTemplate
		out[i] = Offer{
			TemplateID: strconv.FormatInt(t.ID, 10), MerchantID: idString(t.MerchantID), Name: t.Name, AmountFen: t.AmountFen,
			ThresholdFen: t.ThresholdFen, ClaimUntil: t.ClaimUntil.UTC(), ValidDays: t.ValidDays, PerUserLimit: t.PerUserLimit,
			Remaining: r.Remaining,
		}
	}
	return out, nil
}

// Claim gives userID one voucher of the template in tx: a free slot under
// the per-user limit first, then one unit of the budget. Either refusal
// (limit reached, budget spent) leaves tx to roll back whole, so a
// refused claim takes nothing.
func (s *Service) Claim(ctx context.Context, tx pgx.Tx, userID, templateID int64) (Voucher, error) {
	v, err := s.claim(ctx, tx, userID, templateID)
	var p *problem.Error
	switch {
	case err == nil:
		s.claims.WithLabelValues("claimed").Inc()
	case errors.As(err, &p) && p.Type == problem.VoucherLimitReached:
		s.claims.WithLabelValues("limit_reached").Inc()
	case errors.As(err, &p) && p.Type == problem.VoucherBudgetSpent:
		s.claims.WithLabelValues("budget_spent").Inc()
	case errors.As(err, &p) && p.Type == problem.VoucherNotClaimable:
		s.claims.WithLabelValues("not_claimable").Inc()
	}
	return v, err
}

func (s *Service) claim(ctx context.Context, tx pgx.Tx, userID, templateID int64) (Voucher, error) {
	row, err := s.q.VoucherTemplateGet(ctx, tx, templateID)
	if err != nil {
		return Voucher{}, notFoundOr(err)
	}
	t := row.VoucherTemplate
	now := s.opts.Now()
	switch {
	case t.Status == StatusPaused:
		return Voucher{}, notClaimable("paused", "the issuer paused this voucher")
	case now.Before(t.ClaimFrom):
		return Voucher{}, notClaimable("not_started", "this voucher may be claimed from %s", t.ClaimFrom.UTC().Format(time.RFC3339))
	case !now.Before(t.ClaimUntil):
		return Voucher{}, notClaimable("ended", "this voucher could be claimed until %s", t.ClaimUntil.UTC().Format(time.RFC3339))
	}
	v, err := s.takeSlot(ctx, tx, userID, t, now)
	if err != nil {
		return Voucher{}, err
	}
	if err := s.takeBudget(ctx, tx, templateID); err != nil {
		return Voucher{}, err
	}
	return voucherOut(dbsqlc.VouchersOfUserRow{
		ID: v.ID, TemplateID: t.ID, ClaimedAt: v.ClaimedAt, ValidUntil: v.ValidUntil, MerchantID: t.MerchantID,
		Name: t.Name, AmountFen: t.AmountFen, ThresholdFen: t.ThresholdFen, FundedBy: t.FundedBy,
	}, now), nil
}

// takeSlot inserts the customer's first free claim of t. A slot another
// claim of theirs inserted at the same moment is found taken once that
// claim commits: look again, until the slots run out.
func (s *Service) takeSlot(ctx context.Context, tx pgx.Tx, userID int64, t dbsqlc.VoucherTemplate, now time.Time) (dbsqlc.Voucher, error) {
	validUntil := now.Add(time.Duration(t.ValidDays) * 24 * time.Hour)
	for range t.PerUserLimit + 1 {
		v, err := s.q.VoucherClaimSlot(ctx, tx, dbsqlc.VoucherClaimSlotParams{
			TemplateID: t.ID, UserID: userID, Now: now, ValidUntil: validUntil, PerUserLimit: t.PerUserLimit,
		})
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, db.ErrNotFound) {
			return dbsqlc.Voucher{}, fmt.Errorf("claim a voucher slot: %w", err)
		}
		held, err := s.q.VoucherClaimsOf(ctx, tx, dbsqlc.VoucherClaimsOfParams{TemplateID: t.ID, UserID: userID})
		if err != nil {
			return dbsqlc.Voucher{}, fmt.Errorf("count claims: %w", err)
		}
		if held >= int64(t.PerUserLimit) {
			return dbsqlc.Voucher{}, ErrLimitReached.With("per_user_limit", t.PerUserLimit)
		}
	}
	// Each round another claim of this customer committed a slot: the
	// limit is reached by now.
	return dbsqlc.Voucher{}, ErrLimitReached.With("per_user_limit", t.PerUserLimit)
}

// takeBudget takes one unit of the template's budget: from a shard no
// other claim holds when there is one, else waiting for a busy one, until
// none has any left.
//
// Row locks outlive the rows a locking statement returns: a shard that
// had budget when the statement began, and none once it was locked,
// stays locked though skipped. Each attempt runs in a savepoint rolled
// back when it took nothing, which releases those locks; so a claim that
// waits holds no shard but those its waiting statement locks in
// ascending order, and two claims never wait for each other.
func (s *Service) takeBudget(ctx context.Context, tx pgx.Tx, templateID int64) error {
	start := int16(rand.IntN(s.opts.BudgetShards)) //nolint:gosec // G115: at most maxBudgetShards; G404: spreads load, guards nothing
	free := func(q pgx.Tx) (int64, error) {
		return s.q.VoucherBudgetTakeFree(ctx, q, dbsqlc.VoucherBudgetTakeFreeParams{TemplateID: templateID, Start: start})
	}
	waiting := func(q pgx.Tx) (int64, error) { return s.q.VoucherBudgetTakeWaiting(ctx, q, templateID) }
	for {
		took, err := attempt(ctx, tx, free)
		if err != nil || took {
			return err
		}
		left, err := s.q.VoucherBudgetLeft(ctx, tx, templateID)
		if err != nil {
			return fmt.Errorf("read voucher budget: %w", err)
		}
		if !left {
			return ErrBudgetSpent
		}
		// Every shard with budget is held by a claim in flight: wait for
		// one; if its claim took the last unit, look again.
		if took, err = attempt(ctx, tx, waiting); err != nil || took {
			return err
		}
	}
}

// attempt runs take in a savepoint of tx, kept when it took a unit and
// rolled back (its locks released) when it took none.
func attempt(ctx context.Context, tx pgx.Tx, take func(pgx.Tx) (int64, error)) (bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("take voucher budget: %w", err)
	}
	n, err := take(sp)
	if err == nil && n > 1 {
		// Never by these statements' form (their pick runs once); if a
		// change ever lets it happen, the claim fails rather than take
		// more than one unit.
		err = fmt.Errorf("one claim took %d units of the budget", n)
	}
	if err != nil {
		_ = sp.Rollback(ctx)
		return false, fmt.Errorf("take voucher budget: %w", err)
	}
	if n == 0 {
		if err := sp.Rollback(ctx); err != nil {
			return false, fmt.Errorf("take voucher budget: %w", err)
		}
		return false, nil
	}
	if err := sp.Commit(ctx); err != nil {
		return false, fmt.Errorf("take voucher budget: %w", err)
	}
	return true, nil
}

func voucherOut(r dbsqlc.VouchersOfUserRow, now time.Time) Voucher {
	st := VoucherAvailable
	switch {
	case r.OrderID != nil:
		st = VoucherUsed
	case !now.Before(r.ValidUntil):
		st = VoucherExpired
	}
	v := Voucher{
		ID: strconv.FormatInt(r.ID, 10), TemplateID: strconv.FormatInt(r.TemplateID, 10), MerchantID: idString(r.MerchantID),
		Name: r.Name, AmountFen: r.AmountFen, ThresholdFen: r.ThresholdFen, FundedBy: r.FundedBy,
		ClaimedAt: r.ClaimedAt.UTC(), ValidUntil: r.ValidUntil.UTC(), Status: st, OrderID: idString(r.OrderID),
	}
	if r.UsedAt != nil {
		at := r.UsedAt.UTC()
		v.UsedAt = &at
	}
	return v
}

// Wallet lists a customer's vouchers, newest first.
func (s *Service) Wallet(ctx context.Context, userID int64) ([]Voucher, error) {
	rows, err := s.q.VouchersOfUser(ctx, s.opts.Pool, userID)
	if err != nil {
		return nil, fmt.Errorf("read wallet: %w", err)
	}
	now := s.opts.Now()
	out := make([]Voucher, len(rows))
	for i, r := range rows {
		out[i] = voucherOut(r, now)
	}
	return out, nil
}
