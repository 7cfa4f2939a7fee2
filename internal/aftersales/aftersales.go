// Package aftersales is customers' requests for money back after the
// merchant accepted an order (售后): some of its lines or an amount, with
// a reason and photos. The merchant agrees or rejects before a deadline,
// else the request is agreed for it (a job inserted with the request); a
// rejection can be escalated to the platform, whose admin decides.
// Agreeing writes the refund in the same transaction, under the order's
// row lock, through the payment package's partial refunds: never beyond
// what was paid less what was refunded.
//
// Every path locks the order's row before the request's, so a request,
// its decisions, the deadline's job and staff's own refunds of the order
// take turns; a step repeated (a second tap, a retried call) finds it
// done and answers the request as it stands.
package aftersales

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
)

// The statuses of a request.
const (
	// Requested waits for the merchant, until its respond_by.
	Requested = "requested"
	// Agreed is final: its refund was written.
	Agreed = "agreed"
	// Rejected by the merchant; the customer may escalate it.
	Rejected = "rejected"
	// Escalated waits for the platform.
	Escalated = "escalated"
	// Refused is the platform's final no.
	Refused = "refused"
)

// open are the statuses of a request still waiting for someone: an order
// has at most one.
var open = []string{Requested, Escalated}

// askable are the order statuses a customer may ask about: the merchant
// took the order.
var askable = []statemachine.Status{statemachine.Accepted, statemachine.Ready, statemachine.Delivering, statemachine.Completed}

// Options are what a Service needs.
type Options struct {
	Pool *pgxpool.Pool
	// Payments writes the refunds; nil when payments are off (every
	// route then answers 503).
	Payments *payment.Service
	Jobs     order.JobInserter
	// RespondWithin is how long the merchant has to answer a request.
	RespondWithin time.Duration
	// Window is how long after completion a customer may ask, and after
	// a rejection escalate.
	Window     time.Duration
	Now        func() time.Time
	Registerer prometheus.Registerer
}

// Service runs after-sales requests.
type Service struct {
	o     Options
	q     *dbsqlc.Queries
	steps *prometheus.CounterVec
}

// Steps a request takes, as counted by takeout_after_sales_total.
var stepNames = []string{"requested", "agreed_by_merchant", "agreed_at_deadline", "agreed_by_platform", "rejected", "escalated", "refused", "deadline_escalated"}

// NewService returns a Service.
func NewService(o Options) (*Service, error) {
	steps := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "takeout_after_sales_total",
		Help: "After-sales requests' steps: requested, agreed (by the merchant, at the deadline, by the platform), rejected, escalated, refused, and escalated because agreeing at the deadline failed.",
	}, []string{"step"})
	for _, s := range stepNames {
		steps.WithLabelValues(s)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(steps); err != nil {
			return nil, fmt.Errorf("register after-sales metrics: %w", err)
		}
	}
	return &Service{o: o, q: dbsqlc.New(), steps: steps}, nil
}

// enabled reports whether requests can be taken: a service with
// payments (a nil Service, as some test servers have, takes none).
func (s *Service) enabled() bool { return s != nil && s.o.Payments != nil }

// ErrDisabled answers every after-sales route when payments are off.
var ErrDisabled = problem.New(problem.Unavailable, "after-sales requests need payments, which are not configured")

var errNotFound = problem.New(problem.NotFound, "no such after-sales request")

// Request is the body of POST /v1/orders/{id}/after-sales.
type Request struct {
	Lines     []order.RefundLine `json:"lines"`
	AmountFen *int64             `json:"amount_fen"`
	Reason    string             `json:"reason"`
	Photos    []string           `json:"photos"`
}

// Validate checks the request's shape; what is left to refund is checked
// against the order.
func (r *Request) Validate() error {
	shape := payment.PartialRefundRequest{Lines: r.Lines, AmountFen: r.AmountFen, Reason: "-"}
	if err := shape.Validate(); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(r.Reason); n == 0 || n > 200 {
		return problem.Field("reason", "required, at most 200 characters")
	}
	if err := checkPhotos(r.Photos); err != nil {
		return err
	}
	return nil
}

// AfterSale is a request as customers and staff see it.
type AfterSale struct {
	ID           string             `json:"id"`
	OrderID      string             `json:"order_id"`
	MerchantID   string             `json:"merchant_id"`
	Status       string             `json:"status"`
	Lines        []order.RefundLine `json:"lines"`
	AmountFen    *int64             `json:"amount_fen"`
	Reason       string             `json:"reason"`
	Photos       []string           `json:"photos"`
	RespondBy    time.Time          `json:"respond_by"`
	DecidedBy    string             `json:"decided_by"`
	DecisionNote string             `json:"decision_note"`
	Escalation   string             `json:"escalation"`
	// Refund is the refund agreeing wrote.
	Refund      *payment.Refund `json:"refund"`
	CreatedAt   time.Time       `json:"created_at"`
	DecidedAt   *time.Time      `json:"decided_at"`
	EscalatedAt *time.Time      `json:"escalated_at"`
}

func (s *Service) view(ctx context.Context, q dbsqlc.DBTX, a dbsqlc.AfterSale) (AfterSale, error) {
	out := AfterSale{ID: fmt.Sprint(a.ID), OrderID: fmt.Sprint(a.OrderID), MerchantID: fmt.Sprint(a.MerchantID), Status: a.Status,
		Lines: []order.RefundLine{}, AmountFen: a.AmountFen, Reason: a.Reason, Photos: a.Photos, RespondBy: a.RespondBy.UTC(),
		DecidedBy: a.DecidedBy, DecisionNote: a.DecisionNote, Escalation: a.Escalation, CreatedAt: a.CreatedAt.UTC()}
	if out.Photos == nil {
		out.Photos = []string{}
	}
	if err := json.Unmarshal(a.Lines, &out.Lines); err != nil {
		return AfterSale{}, fmt.Errorf("after-sale %d lines: %w", a.ID, err)
	}
	if a.DecidedAt != nil {
		at := a.DecidedAt.UTC()
		out.DecidedAt = &at
	}
	if a.EscalatedAt != nil {
		at := a.EscalatedAt.UTC()
		out.EscalatedAt = &at
	}
	if a.RefundID != nil {
		r, err := s.q.AfterSaleRefund(ctx, q, *a.RefundID)
		if err != nil {
			return AfterSale{}, fmt.Errorf("read refund of after-sale %d: %w", a.ID, err)
		}
		ref := payment.RefundView(r)
		out.Refund = &ref
	}
	return out, nil
}

// Create records a customer's request, in tx (the idempotent create's),
// with the job that agrees it at its deadline.
func (s *Service) Create(ctx context.Context, tx pgx.Tx, userID, orderID int64, req Request) (AfterSale, error) {
	o, err := s.q.OrderGetForUpdate(ctx, tx, orderID)
	if errors.Is(err, db.ErrNotFound) || (err == nil && o.UserID != userID) {
		return AfterSale{}, order.ErrOrderNotFound
	}
	if err != nil {
		return AfterSale{}, fmt.Errorf("lock order: %w", err)
	}
	now := s.o.Now()
	if err := s.askable(ctx, tx, o, now); err != nil {
		return AfterSale{}, err
	}
	if err := s.openOne(ctx, tx, orderID, 0); err != nil {
		return AfterSale{}, err
	}
	if err := s.withinOrder(ctx, tx, orderID, req); err != nil {
		return AfterSale{}, err
	}
	lines, err := json.Marshal(req.Lines)
	if err != nil || req.Lines == nil {
		lines = []byte("[]")
	}
	photos := req.Photos
	if photos == nil {
		photos = []string{}
	}
	a, err := s.q.AfterSaleInsert(ctx, tx, dbsqlc.AfterSaleInsertParams{OrderID: orderID, MerchantID: o.MerchantID, UserID: userID,
		Lines: lines, AmountFen: req.AmountFen, Reason: req.Reason, Photos: photos, RespondBy: now.Add(s.o.RespondWithin)})
	if err != nil {
		return AfterSale{}, fmt.Errorf("insert after-sale: %w", err)
	}
	if _, err := s.o.Jobs.InsertTx(ctx, tx, DeadlineArgs{ID: a.ID},
		&river.InsertOpts{ScheduledAt: a.RespondBy, UniqueOpts: river.UniqueOpts{ByArgs: true}}); err != nil {
		return AfterSale{}, fmt.Errorf("insert deadline job: %w", err)
	}
	s.steps.WithLabelValues("requested").Inc()
	return s.view(ctx, tx, a)
}

// askable refuses a request about an order the merchant has not taken,
// or completed longer ago than the window.
func (s *Service) askable(ctx context.Context, tx pgx.Tx, o dbsqlc.Order, now time.Time) error {
	if !slices.Contains(askable, o.Status) {
		return problem.New(problem.OrderStatusConflict, "an order that is %s has no after-sales: ask once the merchant accepted it", o.Status).
			With("current_status", o.Status)
	}
	if o.Status != statemachine.Completed {
		return nil
	}
	done, err := s.q.AfterSaleCompletedAt(ctx, tx, o.ID)
	if err != nil {
		return fmt.Errorf("read completion: %w", err)
	}
	if now.Sub(done) > s.o.Window {
		return problem.New(problem.OrderStatusConflict, "the order was completed at %s: after-sales requests are taken for %s after completion",
			done.UTC().Format(time.RFC3339), s.o.Window).With("current_status", o.Status)
	}
	return nil
}

// openOne refuses a second open request of an order (other than except).
func (s *Service) openOne(ctx context.Context, tx pgx.Tx, orderID, except int64) error {
	all, err := s.q.AfterSalesByOrder(ctx, tx, orderID)
	if err != nil {
		return fmt.Errorf("read after-sales: %w", err)
	}
	for _, a := range all {
		if a.ID != except && slices.Contains(open, a.Status) {
			return problem.New(problem.AfterSaleConflict, "the order has an open after-sales request (%d, %s): one at a time", a.ID, a.Status).
				With("after_sale_id", fmt.Sprint(a.ID)).With("current_status", a.Status)
		}
	}
	return nil
}

// withinOrder refuses lines the order has not (or has refunded) and an
// amount beyond what is left to refund.
func (s *Service) withinOrder(ctx context.Context, tx pgx.Tx, orderID int64, req Request) error {
	if req.AmountFen != nil {
		left, err := s.o.Payments.Refundable(ctx, tx, orderID)
		if err != nil {
			return err
		}
		if *req.AmountFen > left {
			return problem.New(problem.RefundExceedsPaid, "%d fen is more than the %d fen left to refund", *req.AmountFen, left).
				With("refundable_fen", left)
		}
		return nil
	}
	items, err := s.q.OrderItemsByOrder(ctx, tx, orderID)
	if err != nil {
		return fmt.Errorf("read order items: %w", err)
	}
	for i, l := range req.Lines {
		k := slices.IndexFunc(items, func(it dbsqlc.OrderItem) bool { return it.Line == l.Line })
		if k < 0 || items[k].Qty-items[k].RefundedQty < l.Qty {
			return problem.Field(fmt.Sprintf("lines[%d]", i), "the order has no line %d with %d units left to refund", l.Line, l.Qty)
		}
	}
	return nil
}

// lock takes the order's row, then the request's, in tx; who may not see
// the request gets errNotFound.
func (s *Service) lock(ctx context.Context, tx pgx.Tx, id int64, may func(dbsqlc.AfterSale) bool) (dbsqlc.AfterSale, error) {
	a, err := s.q.AfterSaleGet(ctx, tx, id)
	if errors.Is(err, db.ErrNotFound) || (err == nil && !may(a)) {
		return dbsqlc.AfterSale{}, errNotFound
	}
	if err != nil {
		return dbsqlc.AfterSale{}, fmt.Errorf("read after-sale: %w", err)
	}
	if _, err := s.q.OrderGetForUpdate(ctx, tx, a.OrderID); err != nil {
		return dbsqlc.AfterSale{}, fmt.Errorf("lock order: %w", err)
	}
	a, err = s.q.AfterSaleGetForUpdate(ctx, tx, id)
	if err != nil {
		return dbsqlc.AfterSale{}, fmt.Errorf("lock after-sale: %w", err)
	}
	return a, nil
}

func conflict(a dbsqlc.AfterSale, action string) error {
	return problem.New(problem.AfterSaleConflict, "the request is %s: it cannot be %s", a.Status, action).With("current_status", a.Status)
}

// refundReason is what the customer sees on the refund: their reason, cut
// to WeChat Pay's 80 characters.
func refundReason(a dbsqlc.AfterSale) string {
	r := []rune("售后: " + a.Reason)
	if len(r) > 80 {
		r = r[:80]
	}
	return string(r)
}

// agreeTx writes the request's refund and marks it agreed, in tx, with
// the request and its order locked.
func (s *Service) agreeTx(ctx context.Context, tx pgx.Tx, a dbsqlc.AfterSale, by order.Actor, note string) (dbsqlc.AfterSale, error) {
	var lines []order.RefundLine
	if err := json.Unmarshal(a.Lines, &lines); err != nil {
		return dbsqlc.AfterSale{}, fmt.Errorf("after-sale %d lines: %w", a.ID, err)
	}
	if len(lines) == 0 {
		lines = nil
	}
	ref, err := s.o.Payments.RefundPartAs(ctx, tx, by, a.OrderID,
		payment.PartialRefundRequest{Lines: lines, AmountFen: a.AmountFen, Reason: refundReason(a)})
	if err != nil {
		return dbsqlc.AfterSale{}, err
	}
	row, err := s.q.RefundGetByOutRefundNo(ctx, tx, ref.OutRefundNo)
	if err != nil {
		return dbsqlc.AfterSale{}, fmt.Errorf("read refund: %w", err)
	}
	return s.q.AfterSaleAgree(ctx, tx, dbsqlc.AfterSaleAgreeParams{ID: a.ID, RefundID: &row.ID, DecidedBy: by.String(), DecisionNote: note})
}

// Agree is the merchant's (or an admin's) yes: the refund is written.
// Agreeing again answers the request as it is. The merchant agrees a
// request waiting for it, or concedes one escalated to the platform.
func (s *Service) Agree(ctx context.Context, by order.Actor, id int64, note string) (AfterSale, error) {
	return s.decide(ctx, by, id, func(ctx context.Context, tx pgx.Tx, a dbsqlc.AfterSale) (dbsqlc.AfterSale, string, error) {
		switch {
		case a.Status == Agreed:
			return a, "", nil
		case a.Status == Refused, a.Status == Rejected && by.Kind == statemachine.Merchant:
			// A merchant decides once; after a rejection the customer
			// escalates, and the merchant may concede then.
			return a, "", conflict(a, "agreed")
		}
		step := "agreed_by_merchant"
		if by.Kind == statemachine.Admin {
			step = "agreed_by_platform"
		}
		out, err := s.agreeTx(ctx, tx, a, by, note)
		return out, step, err
	})
}

// Reject is the merchant's no, with a note the customer sees.
func (s *Service) Reject(ctx context.Context, by order.Actor, id int64, note string) (AfterSale, error) {
	return s.decide(ctx, by, id, func(ctx context.Context, tx pgx.Tx, a dbsqlc.AfterSale) (dbsqlc.AfterSale, string, error) {
		switch a.Status {
		case Rejected:
			return a, "", nil
		case Requested:
			out, err := s.q.AfterSaleReject(ctx, tx, dbsqlc.AfterSaleRejectParams{ID: a.ID, Status: Rejected, DecidedBy: by.String(), DecisionNote: note})
			return out, "rejected", err
		}
		return a, "", conflict(a, "rejected")
	})
}

// Decide is the platform's answer to an escalated request.
func (s *Service) Decide(ctx context.Context, by order.Actor, id int64, agree bool, note string) (AfterSale, error) {
	return s.decide(ctx, by, id, func(ctx context.Context, tx pgx.Tx, a dbsqlc.AfterSale) (dbsqlc.AfterSale, string, error) {
		switch {
		case agree && a.Status == Agreed, !agree && a.Status == Refused:
			return a, "", nil
		case a.Status != Escalated:
			return a, "", conflict(a, "decided by the platform: only an escalated request is")
		case agree:
			out, err := s.agreeTx(ctx, tx, a, by, note)
			return out, "agreed_by_platform", err
		}
		out, err := s.q.AfterSaleReject(ctx, tx, dbsqlc.AfterSaleRejectParams{ID: a.ID, Status: Refused, DecidedBy: by.String(), DecisionNote: note})
		return out, "refused", err
	})
}

// decide runs a staff decision on a request of a merchant they manage.
func (s *Service) decide(ctx context.Context, by order.Actor, id int64,
	step func(context.Context, pgx.Tx, dbsqlc.AfterSale) (dbsqlc.AfterSale, string, error)) (AfterSale, error) {
	if !s.enabled() {
		return AfterSale{}, ErrDisabled
	}
	var counted string
	out, err := db.WithTxV(ctx, s.o.Pool, func(tx pgx.Tx) (AfterSale, error) {
		a, err := s.lock(ctx, tx, id, func(a dbsqlc.AfterSale) bool {
			return by.Kind != statemachine.Merchant || by.MerchantID == a.MerchantID
		})
		if err != nil {
			return AfterSale{}, err
		}
		a, counted, err = step(ctx, tx, a)
		if err != nil {
			return AfterSale{}, err
		}
		return s.view(ctx, tx, a)
	})
	if err == nil && counted != "" {
		s.steps.WithLabelValues(counted).Inc()
	}
	return out, err
}

// Escalate is the customer's appeal of a rejection to the platform,
// within the window after it.
func (s *Service) Escalate(ctx context.Context, userID, id int64, why string) (AfterSale, error) {
	if !s.enabled() {
		return AfterSale{}, ErrDisabled
	}
	escalated := false
	out, err := db.WithTxV(ctx, s.o.Pool, func(tx pgx.Tx) (AfterSale, error) {
		a, err := s.lock(ctx, tx, id, func(a dbsqlc.AfterSale) bool { return a.UserID == userID })
		if err != nil {
			return AfterSale{}, err
		}
		switch {
		case a.Status == Escalated:
			return s.view(ctx, tx, a)
		case a.Status != Rejected:
			return AfterSale{}, conflict(a, "escalated: only a rejected request is")
		case a.DecidedAt != nil && s.o.Now().Sub(*a.DecidedAt) > s.o.Window:
			return AfterSale{}, problem.New(problem.AfterSaleConflict, "the request was rejected more than %s ago", s.o.Window).
				With("current_status", a.Status)
		}
		if err := s.openOne(ctx, tx, a.OrderID, a.ID); err != nil {
			return AfterSale{}, err
		}
		a, err = s.q.AfterSaleEscalate(ctx, tx, dbsqlc.AfterSaleEscalateParams{ID: a.ID, Escalation: why})
		if err != nil {
			return AfterSale{}, err
		}
		escalated = true
		return s.view(ctx, tx, a)
	})
	if escalated && err == nil {
		s.steps.WithLabelValues("escalated").Inc()
	}
	return out, err
}

// OfOrder lists an order's requests, for its customer.
func (s *Service) OfOrder(ctx context.Context, userID, orderID int64) ([]AfterSale, error) {
	all, err := s.q.AfterSalesByOrder(ctx, s.o.Pool, orderID)
	if err != nil {
		return nil, fmt.Errorf("read after-sales: %w", err)
	}
	out := make([]AfterSale, 0, len(all))
	for _, a := range all {
		if a.UserID != userID {
			return nil, order.ErrOrderNotFound
		}
		v, err := s.view(ctx, s.o.Pool, a)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// maxList is how many requests a list answers with.
const maxList = 100

// List returns requests in a status (of one merchant when merchantID is
// not 0), oldest first, after the id after.
func (s *Service) List(ctx context.Context, status string, merchantID, after int64) ([]AfterSale, error) {
	p := dbsqlc.AfterSalesListParams{Status: status, AfterID: after, MaxRows: maxList}
	if merchantID != 0 {
		p.MerchantID = &merchantID
	}
	rows, err := s.q.AfterSalesList(ctx, s.o.Pool, p)
	if err != nil {
		return nil, fmt.Errorf("list after-sales: %w", err)
	}
	out := make([]AfterSale, 0, len(rows))
	for _, a := range rows {
		v, err := s.view(ctx, s.o.Pool, a)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// DeadlineArgs is the job that agrees a request the merchant left
// unanswered, at its respond_by.
type DeadlineArgs struct {
	ID int64 `json:"id"`
}

// Kind names the job.
func (DeadlineArgs) Kind() string { return "aftersales.deadline" }

// DeadlineWorker runs DeadlineArgs.
type DeadlineWorker struct {
	river.WorkerDefaults[DeadlineArgs]
	S *Service
}

// Work agrees the request if it is still waiting for the merchant past
// its deadline. When agreeing is refused (staff refunded the order
// meanwhile, say), the request goes to the platform instead of being
// tried forever.
func (w *DeadlineWorker) Work(ctx context.Context, job *river.Job[DeadlineArgs]) error {
	s := w.S
	if s.o.Payments == nil {
		return nil
	}
	by := order.Actor{Kind: statemachine.System, Name: "after-sales-deadline"}
	counted := ""
	err := db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		a, err := s.lock(ctx, tx, job.Args.ID, func(dbsqlc.AfterSale) bool { return true })
		if errors.Is(err, errNotFound) || (err == nil && a.Status != Requested) {
			return nil
		}
		if err != nil {
			return err
		}
		if wait := a.RespondBy.Sub(s.o.Now()); wait > 0 {
			return river.JobSnooze(wait)
		}
		_, err = s.agreeTx(ctx, tx, a, by, "agreed at the deadline: the merchant did not answer")
		if _, ok := problem.As(err); ok {
			return deadlineRefused{err}
		}
		if err != nil {
			return err
		}
		counted = "agreed_at_deadline"
		return nil
	})
	var refused deadlineRefused
	if errors.As(err, &refused) {
		// The refund was refused (rolled back): the platform decides.
		err = db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
			a, err := s.lock(ctx, tx, job.Args.ID, func(dbsqlc.AfterSale) bool { return true })
			if err != nil || a.Status != Requested {
				return err
			}
			_, err = s.q.AfterSaleEscalate(ctx, tx, dbsqlc.AfterSaleEscalateParams{ID: a.ID, Escalation: "agreeing at the deadline failed: " + refused.err.Error()})
			counted = "deadline_escalated"
			return err
		})
	}
	if err == nil && counted != "" {
		s.steps.WithLabelValues(counted).Inc()
	}
	return err
}

// deadlineRefused carries a refund refused at the deadline out of its
// rolled-back transaction.
type deadlineRefused struct{ err error }

func (d deadlineRefused) Error() string { return d.err.Error() }
