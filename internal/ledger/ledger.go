// Package ledger is takeout's double-entry record of money: every
// movement (a payment captured, the discounts by who funds them, the
// platform's commission, a refund, WeChat Pay's fees) is a journal of
// entries that sum to zero, written by the transaction of the event that
// causes it. The database writes them (db/functions/ledger_post*.sql,
// triggers on payments and refunds), so no path that settles a payment
// or ends a refund can forget them; this package reads them, sets the
// commission they are posted with, and checks them.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// Accounts whose entries are money held: together, for an order, they
// come to what its payments brought in less what its refunds gave back.
const (
	// WeChatClearing is what WeChat Pay holds for the platform.
	WeChatClearing = "wechat_clearing"
	// RefundsOutside is money given back outside WeChat Pay (a refund an
	// operator settled by hand).
	RefundsOutside = "refunds_outside"
)

// Service reads the ledger and sets merchants' commission.
type Service struct {
	pool *pgxpool.Pool
	q    *dbsqlc.Queries
}

// NewService returns a Service on pool.
func NewService(pool *pgxpool.Pool) *Service {
	return &Service{pool: pool, q: dbsqlc.New()}
}

// Entry is one line of a journal: debits positive, credits negative.
type Entry struct {
	Journal   string    `json:"journal"`
	Kind      string    `json:"kind"`
	Account   string    `json:"account"`
	AmountFen int64     `json:"amount_fen"`
	PaymentID *string   `json:"payment_id"`
	RefundID  *string   `json:"refund_id"`
	Ref       string    `json:"ref"`
	PostedAt  time.Time `json:"posted_at"`
}

// OrderLedger is an order's entries and what they add up to.
type OrderLedger struct {
	OrderID string  `json:"order_id"`
	Entries []Entry `json:"entries"`
	// Balances are the order's entries summed by account.
	Balances map[string]int64 `json:"balances"`
	// NetReceivedFen is what the order's payments brought in less what
	// its refunds gave back, as the ledger has it.
	NetReceivedFen int64 `json:"net_received_fen"`
}

func idString(p *int64) *string {
	if p == nil {
		return nil
	}
	s := strconv.FormatInt(*p, 10)
	return &s
}

var errOrderNotFound = problem.New(problem.NotFound, "no such order")

// Order returns an order's ledger, for staff who may manage its merchant.
func (s *Service) Order(ctx context.Context, staff auth.Staff, orderID int64) (OrderLedger, error) {
	merchantID, err := s.q.LedgerOrderMerchant(ctx, s.pool, orderID)
	if errors.Is(err, db.ErrNotFound) || (err == nil && !staff.CanManage(merchantID)) {
		return OrderLedger{}, errOrderNotFound
	}
	if err != nil {
		return OrderLedger{}, fmt.Errorf("read order: %w", err)
	}
	rows, err := s.q.LedgerEntriesByOrder(ctx, s.pool, orderID)
	if err != nil {
		return OrderLedger{}, fmt.Errorf("read ledger: %w", err)
	}
	out := OrderLedger{OrderID: strconv.FormatInt(orderID, 10), Entries: make([]Entry, len(rows)), Balances: map[string]int64{}}
	for i, e := range rows {
		out.Entries[i] = Entry{Journal: e.Journal, Kind: e.Kind, Account: e.Account, AmountFen: e.AmountFen,
			PaymentID: idString(e.PaymentID), RefundID: idString(e.RefundID), Ref: e.Ref, PostedAt: e.PostedAt.UTC()}
		out.Balances[e.Account] += e.AmountFen
		if e.Kind != "fee" && (e.Account == WeChatClearing || e.Account == RefundsOutside) {
			out.NetReceivedFen += e.AmountFen
		}
	}
	return out, nil
}

// Commission is a merchant's commission rate.
type Commission struct {
	MerchantID string `json:"merchant_id"`
	// CommissionBps is in basis points (1/100 of a percent) of what the
	// merchant sells at after its own discounts.
	CommissionBps int32 `json:"commission_bps"`
}

// CommissionRequest is the body of PUT /admin/v1/merchants/{id}/commission.
type CommissionRequest struct {
	CommissionBps *int32 `json:"commission_bps"`
}

// Validate checks the rate is given and at most 50%.
func (r *CommissionRequest) Validate() error {
	if r.CommissionBps == nil || *r.CommissionBps < 0 || *r.CommissionBps > 5000 {
		return problem.Field("commission_bps", "required, between 0 and 5000 (basis points: 5000 is 50%%)")
	}
	return nil
}

var errMerchantNotFound = problem.New(problem.NotFound, "no such merchant")

// SetCommission sets a merchant's commission; sales paid from then on are
// posted with it.
func (s *Service) SetCommission(ctx context.Context, merchantID int64, bps int32) (Commission, error) {
	row, err := s.q.MerchantSetCommission(ctx, s.pool, dbsqlc.MerchantSetCommissionParams{ID: merchantID, CommissionBps: bps})
	if errors.Is(err, db.ErrNotFound) {
		return Commission{}, errMerchantNotFound
	}
	if err != nil {
		return Commission{}, fmt.Errorf("set commission: %w", err)
	}
	return Commission{MerchantID: strconv.FormatInt(row.ID, 10), CommissionBps: row.CommissionBps}, nil
}

// HandleOrder serves GET /admin/v1/orders/{id}/ledger (admins, and staff
// of the order's merchant).
func HandleOrder(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, errOrderNotFound)
		if err == nil {
			err = web.CheckQuery(r)
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		staff, _ := auth.StaffFrom(r.Context())
		l, err := s.Order(r.Context(), staff, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, l)
	})
}

// HandleSetCommission serves PUT /admin/v1/merchants/{id}/commission
// (admins: a merchant does not set what the platform charges it).
func HandleSetCommission(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, errMerchantNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		req, err := web.Decode[CommissionRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		c, err := s.SetCommission(r.Context(), id, *req.CommissionBps)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, c)
	})
}
