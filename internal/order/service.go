package order

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/maypok86/otter/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/orderid"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/promotion"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/voucher"
	"github.com/takeout/takeout/internal/webhook"
)

// JobInserter inserts background jobs inside a transaction (a River
// client).
type JobInserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// PaymentTimeoutArgs is the job that cancels an order still unpaid at its
// pay deadline. The timeout sweep queues it for each such order
// (TimeoutSweepArgs), once per order.
type PaymentTimeoutArgs struct {
	OrderID int64 `json:"order_id,string"`
}

// Kind names the job.
func (PaymentTimeoutArgs) Kind() string { return "order.payment_timeout" }

// Options configure a Service.
// EventRecorder writes an order event to the live-order outbox within tx
// (orderstream.Hub).
type EventRecorder interface {
	Record(ctx context.Context, tx pgx.Tx, merchantID, orderID int64, ev webhook.Event) error
	// Wrote tells the recorder that a statement which renders the event
	// itself (a DirectTransition) committed one.
	Wrote()
}

// CustomerMessages queues the WeChat subscribe message of an order's new
// status within tx, when the customer granted one (subscribemsg.Sender).
type CustomerMessages interface {
	Enqueue(ctx context.Context, tx pgx.Tx, orderID int64, status statemachine.Status) error
	// Queues reports whether a change to status may queue a message (a
	// template is configured for it).
	Queues(status statemachine.Status) bool
}

// Prints queues, in the transaction that accepts an order, the tickets
// it owes its merchant's printers (printing.Service).
type Prints interface {
	QueueTx(ctx context.Context, tx pgx.Tx, orderID, merchantID int64) error
}

// Shipping queues, in the transaction that dispatches an order or hands
// it over at the counter, the upload that tells WeChat how it went out
// (shipping.Service).
type Shipping interface {
	QueueTx(ctx context.Context, tx pgx.Tx, orderID int64, pickup bool) error
}

// Options configure a Service.
type Options struct {
	Pool        *pgxpool.Pool
	IDs         *orderid.Generator
	Signer      *Signer
	Idempotency *idempotency.Store
	Jobs        JobInserter
	Logger      *slog.Logger
	Now         func() time.Time
	// TokenTTL is how long a confirm token may be submitted.
	TokenTTL time.Duration
	// DedupWindow is how long after placing an order the same cart is
	// answered as a duplicate unless the client asks to repeat it.
	DedupWindow time.Duration
	// MaxTotalFen is the most an order may come to (0: no bound): what
	// one payment may take.
	MaxTotalFen int64
	// PayWindow is the time from placement to the pay deadline.
	PayWindow time.Duration
	// AutoCompleteAfter is how long an order may be delivering before it
	// is completed without the merchant.
	AutoCompleteAfter time.Duration
	// UrgeInterval is the least time between two urges of one order.
	UrgeInterval time.Duration
	// WebhookEnabled turns order events to the merchant webhook on;
	// WebhookMaxAttempts bounds their delivery attempts.
	WebhookEnabled     bool
	WebhookMaxAttempts int
	// Events, when set, records every order event in the live-order
	// outbox (boards' streams), in the transition's transaction.
	Events EventRecorder
	// Messages, when set, queues the customer's subscribe message of a
	// status change, in the transition's transaction.
	Messages CustomerMessages
	// Payments, when set, runs the payment side of transitions (nil when
	// payments are not configured: nothing was paid, so nothing is
	// refunded or closed).
	Payments Payments
	// Sharing, when set (the service-provider mode), shares a completed
	// order's payment (the ShareProfit effect).
	Sharing ProfitSharing
	// Prints, when set, queues an accepted order's print tickets (the
	// QueuePrints effect) in the accept's transaction.
	Prints Prints
	// Shipping, when set, queues the shipping upload of an order
	// dispatched or collected (the UploadShipping effect).
	Shipping Shipping
	// Couriers, when set, hands delivery orders to courier providers
	// (the DispatchCourier and CancelCourier effects) and prices them at
	// confirm.
	Couriers Couriers
	// CourierQuoteTimeout bounds the courier's quote at confirm.
	CourierQuoteTimeout time.Duration
	// QuoteCacheSize and QuoteCacheTTL bound the cache of merchants'
	// menus that confirms price carts from (10,000 merchants and a
	// minute when 0).
	QuoteCacheSize int
	QuoteCacheTTL  time.Duration
	// GroupCommitMax and GroupCommitSlots configure the group commit of
	// one-statement placements (db.GroupOptions' Max and Slots).
	GroupCommitMax, GroupCommitSlots int
	// Lifecycle is the order's state table; nil is the service's own
	// (statemachine.Default). Tests give another to see what a change to
	// the table does.
	Lifecycle  *statemachine.Machine
	Registerer prometheus.Registerer
}

// Payments is what the order lifecycle asks of the payments capability,
// inside a transition's transaction (payment.Effects provides it).
type Payments interface {
	// RefundTx starts the refund of the order's payment, if it was paid.
	RefundTx(ctx context.Context, tx pgx.Tx, orderID int64, reason string) error
	// CloseTx arranges for the order's open payments to be closed at the
	// provider, so that they can no longer be paid.
	CloseTx(ctx context.Context, tx pgx.Tx, orderID int64) error
}

// Couriers is what the order lifecycle asks of the courier capability.
type Couriers interface {
	// DispatchTx opens the order's courier delivery when its merchant
	// dispatches on trigger ("accept", "ready"), in the transition's
	// transaction.
	DispatchTx(ctx context.Context, tx pgx.Tx, orderID, merchantID int64, trigger string) error
	// CancelTx cancels the order's active delivery, if any.
	CancelTx(ctx context.Context, tx pgx.Tx, orderID int64) error
	// QuoteAtConfirm prices the order's delivery while it is confirmed,
	// best effort, for the placement to use.
	QuoteAtConfirm(ctx context.Context, merchantID, orderID int64, a Address, valueFen int64, remark string)
}

// ProfitSharing is the platform's share of a payment frozen for profit
// sharing (the service-provider mode): the completion of an order
// records its payment's share and the job that sends it, in the
// completion's transaction.
type ProfitSharing interface {
	CompletedTx(ctx context.Context, tx pgx.Tx, orderID int64) error
}

// DeadlineCheck runs before an unpaid order is cancelled at its pay
// deadline: the payments capability closes the payment at the provider,
// or applies it if it went through (then the order is paid, and the
// cancel finds it so). An error retries the job.
type DeadlineCheck interface {
	BeforeTimeout(ctx context.Context, orderID int64) error
}

// Service confirms, places and reads orders.
type Service struct {
	opts      Options
	q         *dbsqlc.Queries
	lifecycle *statemachine.Machine
	groups    *db.Group[dbsqlc.OrderPlaceParams, placeOutcome]
	// quotes are merchants' menus as confirms price carts from them
	// (quotecache.go).
	quotes     *otter.Cache[int64, *quoteMenu]
	quoteReads *prometheus.CounterVec

	stockConflicts prometheus.Counter
	placed         *prometheus.CounterVec
	placePath      *prometheus.CounterVec
	transitions    *prometheus.CounterVec
	vouchers       *prometheus.CounterVec
	promotions     *prometheus.CounterVec
	// acceptDeadlines counts the accept deadlines the sweep applied.
	acceptDeadlines *prometheus.CounterVec
}

// NewService returns an order service.
func NewService(opts Options) (*Service, error) {
	s := &Service{
		opts:      opts,
		q:         dbsqlc.New(),
		lifecycle: cmp.Or(opts.Lifecycle, statemachine.Default()),
		stockConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "takeout_order_stock_conflicts_total",
			Help: "Submits refused because a dish was short of stock.",
		}),
		placed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_order_submits_total",
			Help: "Submits that reached PostgreSQL, by result (placed, duplicate, replay, refused).",
		}, []string{"result"}),
		placePath: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_order_place_paths_total",
			Help: "Placements by how they ran: one_statement (order_place, one round trip) or transaction (statement by statement: a busy, short or changed dish, or an order that exists).",
		}, []string{"path"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_order_transitions_total",
			Help: "Order status transitions by from and to status.",
		}, []string{"from", "to"}),
		vouchers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_voucher_redemptions_total",
			Help: "Vouchers spent on placed orders (spent) and given back by a cancel, timeout or refund before acceptance (released).",
		}, []string{"event"}),
		promotions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_promotion_redemptions_total",
			Help: "Promotions placed orders got (applied) and gave back by a cancel, timeout or refund before acceptance (released), by kind (spend_save, new_customer, free_delivery).",
		}, []string{"kind", "event"}),
		acceptDeadlines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_accept_deadline_total",
			Help: "Accept deadlines that came due, by what the merchant's rule does (then: accept, reject) and outcome (met: the order had left PAID by then, no job; applied: its job moved it on; moved_on: its job found it moved on meanwhile; failed: a run of its job failed, to be retried).",
		}, []string{"then", "outcome"}),
	}
	var err error
	if s.quotes, err = newQuoteCache(cmp.Or(opts.QuoteCacheSize, 10_000), cmp.Or(opts.QuoteCacheTTL, time.Minute)); err != nil {
		return nil, err
	}
	s.quoteReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "takeout_order_quote_reads_total",
		Help: "Confirms by where the menu they priced came from (cached: the cache, its versions unchanged; changed: read again, a version moved; miss: read, none cached).",
	}, []string{"source"})
	// Every series of the accept deadline exists from the start at 0, so
	// that an alert's increase() sees the first failure.
	for _, then := range []string{AcceptThenAccept, AcceptThenReject} {
		for _, outcome := range []string{"met", "applied", "moved_on", "failed"} {
			s.acceptDeadlines.WithLabelValues(then, outcome)
		}
	}
	s.groups = s.newPlaceGroup(opts.GroupCommitMax, opts.GroupCommitSlots)
	if opts.Registerer != nil {
		for _, c := range append([]prometheus.Collector{s.stockConflicts, s.placed, s.placePath, s.transitions, s.vouchers, s.promotions, s.acceptDeadlines, s.quoteReads}, s.groups.Collectors()...) {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register order metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Close stops the quote cache's background maintenance.
func (s *Service) Close() { s.quotes.StopAllGoroutines() }

func (s *Service) now() time.Time { return s.opts.Now().UTC().Truncate(time.Microsecond) }

// ConfirmResponse is the answer of POST /v1/orders/confirm.
type ConfirmResponse struct {
	ConfirmToken    string `json:"confirm_token"`
	OrderID         string `json:"order_id"`
	Digest          string `json:"digest"`
	Items           []Item `json:"items"`
	ItemsTotalFen   int64  `json:"items_total_fen"`
	PackagingFeeFen int64  `json:"packaging_fee_fen"`
	DeliveryFeeFen  int64  `json:"delivery_fee_fen"`
	// DiscountFen is what Discounts take off the dishes, spread over the
	// lines (each Item's DiscountFen).
	DiscountFen int64      `json:"discount_fen"`
	Discounts   []Discount `json:"discounts"`
	// Skipped are the merchant's promotions the cart does not get, each
	// with its reason.
	Skipped  []promotion.Skipped `json:"skipped"`
	TotalFen int64               `json:"total_fen"`
	// Fulfilment is "delivery" or "pickup", and Slot the time slot the
	// order is for (null: as soon as possible).
	Fulfilment string    `json:"fulfilment"`
	Slot       *Slot     `json:"slot"`
	ExpiresAt  time.Time `json:"expires_at"`
	Duplicate  bool      `json:"duplicate"`
}

// Discount is a discount an order gets: a promotion of the merchant's
// (Kind spend_save, new_customer or free_delivery: AmountFen is then the
// delivery fee waived) or a voucher of the customer's.
type Discount struct {
	Kind        string `json:"kind"`
	PromotionID string `json:"promotion_id,omitempty"`
	VoucherID   string `json:"voucher_id,omitempty"`
	Name        string `json:"name"`
	AmountFen   int64  `json:"amount_fen"`
	// FundedBy is who pays for it: platform or merchant.
	FundedBy string `json:"funded_by"`
}

// DiscountVoucher is the Kind of a voucher's discount.
const DiscountVoucher = "voucher"

// Errors of confirm.
var (
	ErrMerchantNotFound = problem.New(problem.NotFound, "no such merchant")
	ErrMerchantClosed   = problem.New(problem.MerchantClosed, "the merchant is closed")
	ErrOrderNotFound    = problem.New(problem.NotFound, "no such order")
)

// quotedDish is a dish of the cart as confirm reads it, with its option
// groups in menu order.
type quotedDish struct {
	ID              int64
	Name            string
	PriceFen        int64
	PackagingFeeFen int64
	OptionsVersion  int64
	Stock           int32
	OnSale          bool
	Groups          []quotedGroup
}

type quotedGroup struct {
	ID       int64
	Name     string
	Min, Max int32
	Choices  []quotedChoice
}

type quotedChoice struct {
	ID        int64
	Name      string
	DeltaFen  int64
	Available bool
}

// quotedOption is one choice as QuoteCart's options column has it.
type quotedOption struct {
	GroupID    int64  `json:"group_id"`
	GroupName  string `json:"group_name"`
	Min        int32  `json:"min"`
	Max        int32  `json:"max"`
	ChoiceID   int64  `json:"choice_id"`
	ChoiceName string `json:"choice_name"`
	Delta      int64  `json:"delta"`
	Available  bool   `json:"available"`
}

func quotedDishFromRow(r dbsqlc.QuoteCartRow) (quotedDish, error) {
	d := quotedDish{ID: *r.DishID, Name: *r.Name, PriceFen: *r.PriceFen, PackagingFeeFen: *r.PackagingFeeFen,
		OptionsVersion: *r.OptionsVersion, Stock: *r.Stock, OnSale: *r.OnSale}
	var opts []quotedOption
	if err := json.Unmarshal(r.Options, &opts); err != nil {
		return quotedDish{}, fmt.Errorf("decode options of dish %d: %w", d.ID, err)
	}
	for _, o := range opts {
		if len(d.Groups) == 0 || d.Groups[len(d.Groups)-1].ID != o.GroupID {
			d.Groups = append(d.Groups, quotedGroup{ID: o.GroupID, Name: o.GroupName, Min: o.Min, Max: o.Max})
		}
		g := &d.Groups[len(d.Groups)-1]
		g.Choices = append(g.Choices, quotedChoice{ID: o.ChoiceID, Name: o.ChoiceName, DeltaFen: o.Delta, Available: o.Available})
	}
	return d, nil
}

// Confirm prices the cart from the database and returns a signed token for
// it. It writes nothing.
func (s *Service) Confirm(ctx context.Context, userID int64, req ConfirmRequest) (ConfirmResponse, error) {
	merchantID, _ := strconv.ParseInt(req.MerchantID, 10, 64) // validated
	ids := make([]int64, len(req.Items))
	for i, it := range req.Items {
		ids[i], _ = strconv.ParseInt(it.DishID, 10, 64) // validated
	}
	// The merchant and the cart's dishes in one round trip.
	quoted, err := s.readQuote(ctx, merchantID, ids)
	if err != nil {
		return ConfirmResponse{}, err
	}
	rules, dispatch, byID := quoted.rules, quoted.dispatch, quoted.dishes
	way := req.way()
	slot, openUntil, err := rules.fulfils(way, req.slot(), s.now())
	if err != nil {
		return ConfirmResponse{}, err
	}
	var fee int64 // collected: no delivery
	if way == fulfilment.Delivery {
		if fee, err = rules.deliveryFee(req.Address.Normalize()); err != nil {
			return ConfirmResponse{}, err
		}
	}

	base := Intent{UserID: userID, MerchantID: merchantID, DeliveryFeeFen: fee, Address: *req.Address, Remark: req.Remark, Fulfilment: way}
	tok0 := Token{Fulfilment: way, TimeZone: rules.schedule.Location.String()}
	if slot != nil {
		base.SlotStart = slot.Start.Unix()
		tok0.SlotStart, tok0.SlotEnd, tok0.SlotCutoff = slot.Start.Unix(), slot.End.Unix(), slot.Cutoff.Unix()
	}
	in, tokItems, err := priceCart(req, ids, byID, base)
	if err != nil {
		return ConfirmResponse{}, err
	}
	// The minimum is what a delivery is worth the merchant's while.
	if way == fulfilment.Delivery {
		if err := rules.checkMinimum(in); err != nil {
			return ConfirmResponse{}, err
		}
	}
	tok0.QuoteVersion = rules.quoteVersion
	if !openUntil.IsZero() {
		tok0.OpenUntil = openUntil.Unix()
		tok0.NextOpen = rules.schedule.At(openUntil).NextOpen.Unix()
	}
	w, err := s.weigh(ctx, req, quoted.terms, rules, in)
	if err != nil {
		return ConfirmResponse{}, err
	}
	choice := promotion.Best(w.terms, w.cart)
	// The same cart confirmed again after its order went through may not
	// get what that order got now (the customer is no longer new, a
	// budget ran out or came back): weighed as it may have been then and
	// found placed, it is that order.
	alternatives := w.asItMayHaveBeen(choice)
	latest, err := s.latestOrders(ctx, in, tok0, w, append([]promotion.Choice{choice}, alternatives...))
	if err != nil {
		return ConfirmResponse{}, err
	}
	for _, then := range alternatives {
		if s.placedAs(req, in, tok0, w, then, latest) {
			return s.courierQuote(ctx, dispatch, in)(s.finish(ctx, req, in, tokItems, tok0, w, then, latest))
		}
	}
	return s.courierQuote(ctx, dispatch, in)(s.finish(ctx, req, in, tokItems, tok0, w, choice, latest))
}

// latestOrders reads the user's latest order of the priced cart in with
// each of the choices of discounts applied, by content digest (those of
// no order are missing).
func (s *Service) latestOrders(ctx context.Context, in Intent, tok Token, w weighed, choices []promotion.Choice) (map[string]dbsqlc.OrdersLatestByContentRow, error) {
	digests := make([][]byte, 0, len(choices))
	for _, c := range choices {
		in, tok := in, tok
		if _, err := applyChoice(c, w.voucher, &in, &tok); err != nil {
			continue // a choice the voucher cannot join was not an order's
		}
		digests = append(digests, digestBytes(in.ContentDigest()))
	}
	rows, err := s.q.OrdersLatestByContent(ctx, s.opts.Pool, dbsqlc.OrdersLatestByContentParams{UserID: in.UserID, ContentDigests: digests})
	if err != nil {
		return nil, fmt.Errorf("confirm: latest orders: %w", err)
	}
	latest := make(map[string]dbsqlc.OrdersLatestByContentRow, len(rows))
	for _, r := range rows {
		latest[string(r.ContentDigest)] = r
	}
	return latest, nil
}

// courierQuote passes a confirm's answer on, having had the courier
// price the delivery first when the merchant hands its delivery orders
// to couriers: the placement after the accept uses the quote while it
// is good. It never fails the confirm (a provider that does not answer
// in time is asked again at the placement).
func (s *Service) courierQuote(ctx context.Context, dispatch string, in Intent) func(ConfirmResponse, error) (ConfirmResponse, error) {
	return func(resp ConfirmResponse, err error) (ConfirmResponse, error) {
		if err != nil || s.opts.Couriers == nil || dispatch == "off" || in.Fulfilment != fulfilment.Delivery {
			return resp, err
		}
		orderID, perr := strconv.ParseInt(resp.OrderID, 10, 64)
		if perr != nil {
			return resp, err
		}
		timeout := s.opts.CourierQuoteTimeout
		if timeout <= 0 {
			timeout = time.Second
		}
		qctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		s.opts.Couriers.QuoteAtConfirm(qctx, in.MerchantID, orderID, in.Address, in.ItemsTotalFen, in.Remark)
		return resp, err
	}
}

// placedAs reports whether the priced cart with the choice of discounts
// is an order placed within the dedup window (quote would answer it as a
// duplicate).
func (s *Service) placedAs(req ConfirmRequest, in Intent, tok Token, w weighed, choice promotion.Choice, latest map[string]dbsqlc.OrdersLatestByContentRow) bool {
	if req.Repeat {
		return false
	}
	if _, err := applyChoice(choice, w.voucher, &in, &tok); err != nil {
		return false // a choice the voucher cannot join was not an order's
	}
	l, ok := latest[string(digestBytes(in.ContentDigest()))]
	return ok && l.Status != statemachine.Cancelled && s.now().Sub(l.CreatedAt) < s.opts.DedupWindow
}

// finish applies the choice of discounts to the priced cart and quotes it.
func (s *Service) finish(ctx context.Context, req ConfirmRequest, in Intent, tokItems []TokenItem, tok Token, w weighed, choice promotion.Choice,
	latest map[string]dbsqlc.OrdersLatestByContentRow,
) (ConfirmResponse, error) {
	discounts, err := applyChoice(choice, w.voucher, &in, &tok)
	if err != nil {
		return ConfirmResponse{}, err
	}
	if max := s.opts.MaxTotalFen; max > 0 && in.TotalFen > max {
		return ConfirmResponse{}, problem.New(problem.AboveMaximum, "the order comes to %d fen, above the %d fen one payment may take: order less at once", in.TotalFen, max).
			With("total_fen", in.TotalFen).With("max_total_fen", max)
	}
	resp, err := s.quote(ctx, req, in, tokItems, tok, discounts, latest)
	resp.Skipped = choice.Skipped
	if resp.Skipped == nil {
		resp.Skipped = []promotion.Skipped{}
	}
	if v := w.voucher; err == nil && v.HeldBy != 0 && (!resp.Duplicate || resp.OrderID != strconv.FormatInt(v.HeldBy, 10)) {
		// The voucher is spent on another order: only this cart's own
		// order, confirmed again, may name it.
		return ConfirmResponse{}, v.Used()
	}
	return resp, err
}

// weighed is what a cart's discounts depend on: the merchant's
// promotions, the cart (with whether the customer is new, and the
// voucher's face amount) and the voucher named.
type weighed struct {
	terms   []promotion.Term
	cart    promotion.Cart
	voucher voucher.Spendable
}

// weigh reads what the priced cart's discounts depend on.
func (s *Service) weigh(ctx context.Context, req ConfirmRequest, terms []promotion.Term, rules merchantRules, in Intent) (weighed, error) {
	w := weighed{terms: terms}
	var err error
	w.cart = promotion.Cart{ItemsTotalFen: in.ItemsTotalFen, PackagingFeeFen: in.PackagingFeeFen, DeliveryFeeFen: in.DeliveryFeeFen,
		Now: s.now(), Location: cmp.Or(rules.schedule.Location, time.UTC)}
	if slices.ContainsFunc(w.terms, func(t promotion.Term) bool { return t.Kind == promotion.KindNewCustomer }) {
		st, err := promotion.CustomerStanding(ctx, s.opts.Pool, in.UserID, in.MerchantID)
		if err != nil {
			return w, err
		}
		w.cart.NewAtMerchant = !st.PaidAtMerchant && !st.ClaimedAtMerchant
		w.cart.NewOnPlatform = !st.PaidOnPlatform && !st.ClaimedOnPlatform
	}
	if req.VoucherID != "" {
		id, _ := strconv.ParseInt(req.VoucherID, 10, 64) // validated
		if w.voucher, err = voucher.ForCart(ctx, s.opts.Pool, in.UserID, id, in.MerchantID, in.ItemsTotalFen, s.now()); err != nil {
			return w, err
		}
		w.cart.VoucherFen = w.voucher.AmountFen
	}
	return w, nil
}

// asItMayHaveBeen are the choices the cart may have got earlier, other
// than choice (now's): with each budget as it was (enough, or spent) and
// the customer new or not. Each differs from choice only where a budget
// or a first-order discount could have; none when the merchant has
// neither.
func (w weighed) asItMayHaveBeen(choice promotion.Choice) []promotion.Choice {
	var out []promotion.Choice
	for _, budgets := range []bool{true, false} {
		terms := make([]promotion.Term, 0, len(w.terms))
		for _, t := range w.terms {
			switch {
			case t.BudgetFen == nil:
			case budgets:
				t.BudgetLeft = nil
			default:
				continue
			}
			terms = append(terms, t)
		}
		for _, isNew := range []bool{true, false} {
			c := w.cart
			c.NewAtMerchant, c.NewOnPlatform = isNew, isNew
			ch := promotion.Best(terms, c)
			if !sameChoice(ch, choice) && !slices.ContainsFunc(out, func(o promotion.Choice) bool { return sameChoice(o, ch) }) {
				out = append(out, ch)
			}
		}
	}
	return out
}

// sameChoice reports whether two choices give the cart the same
// discounts.
func sameChoice(a, b promotion.Choice) bool {
	return a.ItemsOffFen == b.ItemsOffFen && a.WaivedFen == b.WaivedFen && a.VoucherOffFen == b.VoucherOffFen &&
		slices.EqualFunc(a.Applied, b.Applied, func(x, y promotion.Applied) bool { return x.Term.ID == y.Term.ID && x.AmountFen == y.AmountFen })
}

// applyChoice applies the choice of discounts and the voucher v to the
// priced cart in and its token, and returns the discounts as the quote
// shows them.
func applyChoice(choice promotion.Choice, v voucher.Spendable, in *Intent, tok *Token) ([]Discount, error) {
	discounts := []Discount{}
	for _, a := range choice.Applied {
		p := TokenPromotion{ID: a.Term.ID, Version: a.Term.Version, Kind: a.Term.Kind, Name: a.Term.Name, AmountFen: a.AmountFen,
			FundedBy: a.Term.FundedBy, Budget: a.Term.BudgetFen != nil}
		switch a.Term.NewCustomerScope {
		case promotion.ScopeMerchant:
			p.Scope = &in.MerchantID
		case promotion.ScopePlatform:
			p.Scope = new(int64)
		}
		tok.Promotions = append(tok.Promotions, p)
		in.Promotions = append(in.Promotions, IntentPromotion{ID: p.ID, Version: p.Version, AmountFen: p.AmountFen})
		discounts = append(discounts, Discount{Kind: p.Kind, PromotionID: strconv.FormatInt(p.ID, 10), Name: p.Name,
			AmountFen: p.AmountFen, FundedBy: p.FundedBy})
	}
	if v.ID != 0 {
		if choice.VoucherOffFen == 0 {
			return nil, voucher.NoRoom(v.ID)
		}
		in.VoucherID = v.ID
		tok.VoucherID, tok.VoucherFen, tok.VoucherFundedBy = v.ID, choice.VoucherOffFen, v.FundedBy
		discounts = append(discounts, Discount{Kind: DiscountVoucher, VoucherID: strconv.FormatInt(v.ID, 10), Name: v.Name,
			AmountFen: choice.VoucherOffFen, FundedBy: v.FundedBy})
	}
	in.DeliveryFeeFen -= choice.WaivedFen
	in.DiscountFen = choice.ItemsOffFen + choice.VoucherOffFen
	in.TotalFen = in.ItemsTotalFen + in.PackagingFeeFen + in.DeliveryFeeFen - in.DiscountFen
	return discounts, nil
}

// quote assigns the priced cart its intent sequence and order id, and
// signs its token (whose merchant and discount fields are set). latest
// holds the user's latest order of the cart's content, if any.
func (s *Service) quote(ctx context.Context, req ConfirmRequest, in Intent, tokItems []TokenItem, tok Token, discounts []Discount,
	latest map[string]dbsqlc.OrdersLatestByContentRow,
) (ConfirmResponse, error) {
	// The intent sequence merges duplicates but not deliberate repeats.
	now := s.now()
	seq, orderID, duplicate := 1, int64(0), false
	l, found := latest[string(digestBytes(in.ContentDigest()))]
	switch {
	case !found:
	case l.Status != statemachine.Cancelled && now.Sub(l.CreatedAt) < s.opts.DedupWindow && !req.Repeat:
		seq, orderID, duplicate = int(l.IntentSeq), l.ID, true
	default:
		seq = int(l.IntentSeq) + 1
	}
	var err error
	if orderID == 0 {
		if orderID, err = s.opts.IDs.Next(ctx); err != nil {
			return ConfirmResponse{}, problem.Wrap(problem.Unavailable, err, "cannot assign an order id right now; retry")
		}
	}
	digest := in.IntentDigest(seq)
	exp := now.Add(s.opts.TokenTTL).Truncate(time.Second)
	tok.UserID, tok.MerchantID, tok.OrderID, tok.Seq, tok.Digest = in.UserID, in.MerchantID, orderID, seq, digest.String()
	tok.ExpiresAt, tok.Items, tok.FeeFen, tok.Address, tok.Remark = exp.Unix(), tokItems, in.DeliveryFeeFen, in.Address, in.Remark
	signed, err := s.opts.Signer.Sign(tok)
	if err != nil {
		return ConfirmResponse{}, err
	}
	resp := ConfirmResponse{
		ConfirmToken: signed, OrderID: strconv.FormatInt(orderID, 10), Digest: digest.String(),
		ItemsTotalFen: in.ItemsTotalFen, PackagingFeeFen: in.PackagingFeeFen, DeliveryFeeFen: in.DeliveryFeeFen,
		DiscountFen: in.DiscountFen, Discounts: discounts, TotalFen: in.TotalFen, ExpiresAt: exp, Duplicate: duplicate,
		Fulfilment: tok.Fulfilment, Slot: tok.slot(),
	}
	for _, it := range orderItems(orderID, tok) {
		resp.Items = append(resp.Items, itemFromRow(it))
	}
	return resp, nil
}

// priceCart prices the cart's lines from the dishes read (byID, by the
// ids of req's lines) into in, and returns it with the token's lines,
// sorted by dish and options; a dish not of the merchant, options it has
// not, or a group chosen too few or too many times are refused; a dish
// or choice off sale, or a dish short of stock (over all its lines), is
// refused naming each.
func priceCart(req ConfirmRequest, ids []int64, byID map[int64]quotedDish, in Intent) (Intent, []TokenItem, error) {
	tokItems := make([]TokenItem, 0, len(req.Items))
	var unavailable []string
	wanted := map[int64]int32{}
	for i, it := range req.Items {
		d, ok := byID[ids[i]]
		if !ok {
			return Intent{}, nil, problem.Field(fmt.Sprintf("items[%d].dish_id", i), "merchant %s has no dish %s", req.MerchantID, it.DishID)
		}
		opts, off, err := chooseOptions(fmt.Sprintf("items[%d].options", i), d, it.Options)
		if err != nil {
			return Intent{}, nil, err
		}
		if !d.OnSale {
			off = append([]string{d.Name}, off...)
		}
		unavailable = append(unavailable, off...)
		wanted[d.ID] += it.Qty
		ti := TokenItem{DishID: d.ID, Qty: it.Qty, UnitPriceFen: d.PriceFen, Name: d.Name, PackagingFeeFen: d.PackagingFeeFen,
			OptionsVersion: d.OptionsVersion, Options: opts}
		for _, o := range opts {
			ti.UnitPriceFen += o.DeltaFen
		}
		tokItems = append(tokItems, ti)
	}
	if len(unavailable) > 0 {
		return Intent{}, nil, problem.New(problem.DishUnavailable, "not for sale now: %s", strings.Join(unavailable, ", ")).With("dishes", unavailable)
	}
	var short []inventory.ShortDish
	for _, id := range slices.Sorted(maps.Keys(wanted)) {
		if d := byID[id]; d.Stock < wanted[id] {
			short = append(short, inventory.ShortDish{DishID: strconv.FormatInt(id, 10), Name: d.Name, Requested: wanted[id], Available: d.Stock})
		}
	}
	if len(short) > 0 {
		return Intent{}, nil, inventory.ErrOutOfStock(short)
	}
	sortTokenItems(tokItems)
	for _, ti := range tokItems {
		in.Items = append(in.Items, IntentItem{DishID: ti.DishID, Qty: ti.Qty, UnitPriceFen: ti.UnitPriceFen,
			PackagingFeeFen: ti.PackagingFeeFen, OptionIDs: ti.optionIDs()})
		in.ItemsTotalFen += ti.UnitPriceFen * int64(ti.Qty)
		in.PackagingFeeFen += ti.PackagingFeeFen * int64(ti.Qty)
	}
	in.TotalFen = in.ItemsTotalFen + in.PackagingFeeFen + in.DeliveryFeeFen
	in.Normalize()
	return in, tokItems, nil
}

// chooseOptions resolves a line's chosen choice ids against the dish's
// groups, in menu order, and checks each group's bounds. It returns the
// names of chosen choices that are switched off.
func chooseOptions(field string, d quotedDish, chosen []string) ([]TokenOption, []string, error) {
	picked := make(map[int64]bool, len(chosen))
	for _, c := range chosen {
		id, _ := strconv.ParseInt(c, 10, 64) // validated
		picked[id] = true
	}
	var out []TokenOption
	var off []string
	for _, g := range d.Groups {
		var n int32
		for _, c := range g.Choices {
			if !picked[c.ID] {
				continue
			}
			delete(picked, c.ID)
			n++
			out = append(out, TokenOption{ID: c.ID, Group: g.Name, Name: c.Name, DeltaFen: c.DeltaFen})
			if !c.Available {
				off = append(off, d.Name+" ("+c.Name+")")
			}
		}
		switch {
		case n < g.Min && g.Min == g.Max:
			return nil, nil, problem.Field(field, "%s: choose %d of %s", d.Name, g.Min, g.Name)
		case n < g.Min || n > g.Max:
			return nil, nil, problem.Field(field, "%s: choose %d to %d of %s, not %d", d.Name, g.Min, g.Max, g.Name, n)
		}
	}
	if len(picked) > 0 {
		for _, c := range chosen {
			if id, _ := strconv.ParseInt(c, 10, 64); picked[id] {
				return nil, nil, problem.Field(field, "dish %s has no option choice %s", strconv.FormatInt(d.ID, 10), c)
			}
		}
	}
	return out, off, nil
}

func itemOptions(opts []TokenOption) []ItemOption {
	out := make([]ItemOption, len(opts))
	for i, o := range opts {
		out[i] = ItemOption{ChoiceID: strconv.FormatInt(o.ID, 10), Group: o.Group, Name: o.Name, PriceDeltaFen: o.DeltaFen}
	}
	return out
}

func sortTokenItems(items []TokenItem) {
	slices.SortStableFunc(items, func(a, b TokenItem) int {
		if c := cmp.Compare(a.DishID, b.DishID); c != 0 {
			return c
		}
		return slices.Compare(a.optionIDs(), b.optionIDs())
	})
}

func digestBytes(d Digest) []byte { return d[:] }

// load reads an order's items and renders it.
func (s *Service) load(ctx context.Context, q dbsqlc.DBTX, o dbsqlc.Order) (Order, error) {
	items, err := s.q.OrderItemsByOrder(ctx, q, o.ID)
	if err != nil {
		return Order{}, fmt.Errorf("read order items: %w", err)
	}
	var addr Address
	if err := json.Unmarshal(o.Address, &addr); err != nil {
		return Order{}, fmt.Errorf("decode address: %w", err)
	}
	return orderFromRow(o, items, addr), nil
}

// Get returns the user's order; another user's order does not exist for
// them.
func (s *Service) Get(ctx context.Context, userID, orderID int64) (Order, error) {
	o, err := s.q.OrderGetByID(ctx, s.opts.Pool, orderID)
	if errors.Is(err, db.ErrNotFound) || (err == nil && o.UserID != userID) {
		return Order{}, ErrOrderNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("read order: %w", err)
	}
	return s.load(ctx, s.opts.Pool, o)
}

// OrderPage is a page of a user's orders, newest first.
type OrderPage struct {
	Orders     []Order `json:"orders"`
	NextCursor *string `json:"next_cursor"`
}

// List returns a page of the user's orders after cursor ("" for the
// first page).
func (s *Service) List(ctx context.Context, userID int64, cursor string, limit int) (OrderPage, error) {
	var before *int64
	if cursor != "" {
		id, err := decodeCursor(cursor)
		if err != nil {
			return OrderPage{}, problem.Field("cursor", "not a cursor this API returned")
		}
		before = &id
	}
	rows, err := s.q.OrderListByUser(ctx, s.opts.Pool, dbsqlc.OrderListByUserParams{UserID: userID, BeforeID: before, MaxRows: int32(limit + 1)}) //nolint:gosec // G115: limit <= 100
	if err != nil {
		return OrderPage{}, fmt.Errorf("list orders: %w", err)
	}
	return s.page(ctx, rows, limit)
}

// page renders up to limit rows (one more was fetched to know whether a
// next page exists) with their items.
func (s *Service) page(ctx context.Context, rows []dbsqlc.Order, limit int) (OrderPage, error) {
	page := OrderPage{Orders: []Order{}}
	if len(rows) > limit {
		rows = rows[:limit]
		c := encodeCursor(rows[limit-1].ID)
		page.NextCursor = &c
	}
	if len(rows) == 0 {
		return page, nil
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	items, err := s.q.OrderItemsByOrders(ctx, s.opts.Pool, ids)
	if err != nil {
		return OrderPage{}, fmt.Errorf("list order items: %w", err)
	}
	byOrder := map[int64][]dbsqlc.OrderItem{}
	for _, it := range items {
		byOrder[it.OrderID] = append(byOrder[it.OrderID], it)
	}
	for _, r := range rows {
		var addr Address
		if err := json.Unmarshal(r.Address, &addr); err != nil {
			return OrderPage{}, fmt.Errorf("decode address: %w", err)
		}
		page.Orders = append(page.Orders, orderFromRow(r, byOrder[r.ID], addr))
	}
	return page, nil
}

func encodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.FormatInt(id, 10)))
}

func decodeCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, err
	}
	rest, ok := strings.CutPrefix(string(b), "o:")
	if !ok {
		return 0, errors.New("bad cursor")
	}
	return strconv.ParseInt(rest, 10, 64)
}

// SearchFilter selects orders for staff; a nil field matches any order.
type SearchFilter struct {
	Status                 *statemachine.Status
	MerchantID, UserID     *int64
	CreatedFrom, CreatedTo *time.Time
	// BeforeID pages: only orders older than this one (a cursor).
	BeforeID *int64
}

// Search returns a page of orders matching f, newest first.
func (s *Service) Search(ctx context.Context, f SearchFilter, limit int) (OrderPage, error) {
	p := dbsqlc.OrderSearchParams{
		MerchantID: f.MerchantID, UserID: f.UserID, CreatedFrom: f.CreatedFrom, CreatedTo: f.CreatedTo, BeforeID: f.BeforeID,
		MaxRows: int32(limit + 1), //nolint:gosec // G115: limit <= 200
	}
	if f.Status != nil {
		st := string(*f.Status)
		p.Status = &st
	}
	rows, err := s.q.OrderSearch(ctx, s.opts.Pool, p)
	if err != nil {
		return OrderPage{}, fmt.Errorf("search orders: %w", err)
	}
	return s.page(ctx, rows, limit)
}
