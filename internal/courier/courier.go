// Package courier hands delivery orders to courier providers (a
// Dada-like and a Meituan-like API) and follows the rider's progress as a
// state machine of its own (Table).
//
// Exactly once, as everywhere: the transaction that accepts an order (or
// marks it ready, per the merchant's courier_dispatch) opens its first
// delivery and the job that places it; an order has at most one active
// delivery (a unique index), and every move to the next one (no rider in
// time, the provider failing or cancelling) happens under the current
// one's row lock, which only one mover wins. An update, by callback or
// by query, is applied under that lock too, only when it is newer than
// the last and not behind it (Decide); the order moves to DELIVERING at
// pickup and COMPLETED at delivery through its own state table, in the
// same transaction. A provider whose callbacks are not signed over their
// status (Dada) is asked what the status is; a sweep asks about
// deliveries whose callbacks are late, as reconciliation does for
// payments. What a provider charges (the fee of a delivery made, the fee
// of one cancelled after a rider took it) is posted to the ledger by the
// transaction that records it (db/functions/ledger_post_delivery.sql).
package courier

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/redisconn"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/webhook"
)

// When a merchant's delivery orders go to a courier
// (merchants.courier_dispatch).
const (
	DispatchOff    = "off"
	DispatchAccept = "accept"
	DispatchReady  = "ready"
)

// JobInserter inserts jobs in a transaction (a River client).
type JobInserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// OrderMover applies an order's events in the caller's transaction (the
// order service).
type OrderMover interface {
	ApplyTx(ctx context.Context, tx pgx.Tx, orderID int64, event statemachine.Event, actor order.Actor, reason string) (order.Applied, error)
}

// EventRecorder writes an event to the merchant's live order stream in a
// transaction (the board's outbox).
type EventRecorder interface {
	Record(ctx context.Context, tx pgx.Tx, merchantID, orderID int64, ev webhook.Event) error
}

// Options configure a Service.
type Options struct {
	Pool *pgxpool.Pool
	Jobs JobInserter
	// Orders moves orders at pickup and delivery.
	Orders OrderMover
	// Events, when set, tells the board of every change.
	Events EventRecorder
	// Redis caches the quotes given at confirm; nil: none are cached.
	Redis *redisconn.Conn
	// Providers in the order they are tried: an order is placed with the
	// first, and each next attempt with the next.
	Providers []Provider
	// CallbackBase is the API's public address the providers call back
	// (callbacks go to CallbackBase/v1/couriers/{provider}/callback).
	CallbackBase string
	// AssignWithin is how long a placement waits for a rider before it is
	// tipped (once, by TipFen, where the provider takes tips) and then
	// placed elsewhere.
	AssignWithin time.Duration
	TipFen       int64
	// LateAfter is how long an active delivery goes unheard before the
	// provider is asked about it.
	LateAfter time.Duration
	// MaxAttempts caps the placements of an order; the last one failing
	// leaves it to the merchant (the board says so).
	MaxAttempts int
	// QuoteTTL caps how long a quote given at confirm is kept.
	QuoteTTL time.Duration
	// PlaceLease is how long one try holds a delivery it places: longer
	// than all its calls to the provider can take (2 minutes when 0).
	PlaceLease time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Service dispatches orders to couriers and follows them.
type Service struct {
	o       Options
	q       *dbsqlc.Queries
	updates *prometheus.CounterVec
	moves   *prometheus.CounterVec
}

// NewService returns a Service.
func NewService(o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 4
	}
	s := &Service{o: o, q: dbsqlc.New(),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_courier_updates_total",
			Help: "Delivery updates applied, by provider and status reached (a reassignment counts as REASSIGNED).",
		}, []string{"provider", "status"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_courier_replaced_total",
			Help: "Placements given up and the order placed again, or left to the merchant (last), by why: no_rider, refused, provider_cancelled, failed.",
		}, []string{"reason", "outcome"}),
	}
	for _, p := range o.Providers {
		for _, st := range []Status{Placed, Delivered, Cancelled, Failed} {
			s.updates.WithLabelValues(p.Name(), string(st))
		}
	}
	for _, r := range []string{"no_rider", "refused", "provider_cancelled", "failed"} {
		for _, outcome := range []string{"replaced", "last"} {
			s.moves.WithLabelValues(r, outcome)
		}
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{s.updates, s.moves} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register courier metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Enabled reports whether any provider is configured.
func (s *Service) Enabled() bool { return s != nil && len(s.o.Providers) > 0 }

func (s *Service) provider(name string) Provider {
	for _, p := range s.o.Providers {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// nextProvider is the provider after name in the list, round again.
func (s *Service) nextProvider(name string) Provider {
	i := slices.IndexFunc(s.o.Providers, func(p Provider) bool { return p.Name() == name })
	return s.o.Providers[(i+1)%len(s.o.Providers)]
}

// OutNo is our number of an order's placement at a provider.
func OutNo(orderID int64, attempt int32) string {
	return "TK" + strconv.FormatInt(orderID, 10) + "-" + strconv.Itoa(int(attempt))
}

// Delivery statuses by source, in delivery_events.source.
const (
	sourceCallback = "callback"
	sourceQuery    = "query"
	sourceSystem   = "system"
)

// DispatchTx is the order's DispatchCourier effect, in the transaction
// that accepts an order (trigger "accept") or marks it ready ("ready"):
// when its merchant dispatches on that trigger, it opens the order's
// first delivery and the job that places it. A second call opens none.
func (s *Service) DispatchTx(ctx context.Context, tx pgx.Tx, orderID, merchantID int64, trigger string) error {
	if !s.Enabled() {
		return nil
	}
	when, err := s.q.MerchantCourierDispatch(ctx, tx, merchantID)
	if err != nil {
		return fmt.Errorf("courier dispatch of the merchant: %w", err)
	}
	if when != trigger {
		return nil
	}
	_, err = s.open(ctx, tx, orderID, merchantID, 1, s.o.Providers[0], "dispatched on "+trigger)
	return err
}

// open inserts an order's delivery attempt with a provider and its place
// job; nil when the order has an active one or had this attempt.
func (s *Service) open(ctx context.Context, tx pgx.Tx, orderID, merchantID int64, attempt int32, p Provider, reason string) (*dbsqlc.Delivery, error) {
	d, err := s.q.DeliveryInsert(ctx, tx, dbsqlc.DeliveryInsertParams{
		OrderID: orderID, MerchantID: merchantID, Attempt: attempt, Provider: p.Name(), OutNo: OutNo(orderID, attempt), Reason: reason,
	})
	if errors.Is(err, db.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open delivery: %w", err)
	}
	if _, err := s.o.Jobs.InsertTx(ctx, tx, PlaceArgs{DeliveryID: d.ID}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}); err != nil {
		return nil, fmt.Errorf("insert place job: %w", err)
	}
	if err := s.publish(ctx, tx, d, false); err != nil {
		return nil, err
	}
	return &d, nil
}

// CancelTx is the order's CancelDelivery effect, in the transaction that
// refunds an accepted or ready order: its active delivery, if any, is
// cancelled by a job (the provider is called after the commit).
func (s *Service) CancelTx(ctx context.Context, tx pgx.Tx, orderID int64) error {
	if !s.Enabled() {
		return nil
	}
	d, err := s.q.DeliveryActiveOfOrder(ctx, tx, orderID)
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("active delivery: %w", err)
	}
	if _, err := s.o.Jobs.InsertTx(ctx, tx, CancelArgs{DeliveryID: d.ID}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}); err != nil {
		return fmt.Errorf("insert courier cancel job: %w", err)
	}
	return nil
}

// request is what a placement of d tells the provider.
func (s *Service) request(ctx context.Context, orderID int64, outNo string, p Provider) (dbsqlc.DeliveryOrderFactsRow, Request, error) {
	f, err := s.q.DeliveryOrderFacts(ctx, s.o.Pool, orderID)
	if err != nil {
		return f, Request{}, fmt.Errorf("order of the delivery: %w", err)
	}
	var a order.Address
	if err := json.Unmarshal(f.Address, &a); err != nil {
		return f, Request{}, fmt.Errorf("order address: %w", err)
	}
	r := Request{
		OutNo: outNo, ShopName: f.MerchantName, Name: a.Name, Phone: a.Phone, Address: a.Detail,
		ValueFen: f.ItemsTotalFen, Remark: f.Remark, CallbackURL: s.o.CallbackBase + "/v1/couriers/" + p.Name() + "/callback",
	}
	if f.Latitude != nil && f.Longitude != nil {
		r.ShopLat, r.ShopLng = *f.Latitude, *f.Longitude
	}
	if a.Location != nil {
		r.Lat, r.Lng = a.Location.Lat, a.Location.Lng
	}
	return f, r, nil
}

// quoteKey is where a quote of r is cached: by r's canonical form (its
// JSON, fields in their fixed order), so that a changed address is
// quoted again.
func (s *Service) quoteKey(p Provider, r Request) string {
	b, _ := json.Marshal(r) //nolint:errchkjson // plain fields
	sum := sha256.Sum256(append([]byte(p.Name()+"\x00"), b...))
	return s.o.Redis.Key("courier:quote:" + hex.EncodeToString(sum[:16]))
}

// QuoteAtConfirm prices the first placement of orderID while the
// customer confirms it, and keeps the quote briefly, so that the
// placement after the accept need not ask again. It is best effort: a
// provider that does not answer only means the placement asks itself.
func (s *Service) QuoteAtConfirm(ctx context.Context, merchantID, orderID int64, a order.Address, valueFen int64, remark string) {
	if !s.Enabled() || s.o.Redis == nil || s.o.Redis.Client == nil {
		return
	}
	p := s.o.Providers[0]
	r := Request{OutNo: OutNo(orderID, 1), Name: a.Name, Phone: a.Phone, Address: a.Detail, ValueFen: valueFen, Remark: remark,
		CallbackURL: s.o.CallbackBase + "/v1/couriers/" + p.Name() + "/callback"}
	if a.Location != nil {
		r.Lat, r.Lng = a.Location.Lat, a.Location.Lng
	}
	key := s.quoteKey(p, r)
	if n, err := s.o.Redis.Client.Exists(ctx, key).Result(); err == nil && n > 0 {
		return
	}
	q, err := p.Quote(ctx, r)
	if err != nil {
		s.o.Logger.WarnContext(ctx, "courier quote at confirm", "order_id", orderID, "merchant_id", merchantID, "error", err)
		return
	}
	ttl := min(q.Expires.Sub(s.o.Now()), s.o.QuoteTTL)
	if ttl <= 0 {
		return
	}
	b, _ := json.Marshal(q) //nolint:errchkjson // plain fields
	if err := s.o.Redis.Client.Set(ctx, key, b, ttl).Err(); err != nil {
		s.o.Logger.WarnContext(ctx, "cache courier quote", "order_id", orderID, "error", err)
	}
}

// cachedQuote is the quote of r kept at confirm, if any is still good.
func (s *Service) cachedQuote(ctx context.Context, p Provider, r Request) (Quote, bool) {
	if s.o.Redis == nil || s.o.Redis.Client == nil {
		return Quote{}, false
	}
	cr := r
	cr.ShopName, cr.ShopLat, cr.ShopLng = "", 0, 0 // confirm does not read the shop
	b, err := s.o.Redis.Client.Get(ctx, s.quoteKey(p, cr)).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			s.o.Logger.WarnContext(ctx, "read cached courier quote", "error", err)
		}
		return Quote{}, false
	}
	var q Quote
	if json.Unmarshal(b, &q) != nil || q.Provider != p.Name() || !q.Expires.After(s.o.Now().Add(10*time.Second)) {
		return Quote{}, false
	}
	return q, true
}

// errRetry is a placement to try again later (its outcome unknown);
// errHeld one another try is placing now.
var (
	errRetry = errors.New("try again")
	errHeld  = fmt.Errorf("%w: another try is placing it", errRetry)
)

// place places a QUOTED delivery: on the quote it has or is cached, or a
// new one; a refusal moves the order to its next attempt. One try at a
// time holds the delivery (the place job's and the late sweep's), and
// every try records that a placement may be on its way before it sends
// one: a try that finds the delivery unsure takes no refusal for an
// answer until the provider says it has no such order.
func (s *Service) place(ctx context.Context, id int64) error {
	d, until, release, err := s.hold(ctx, id)
	if errors.Is(err, errNotQuoted) {
		return nil
	}
	if err != nil {
		return err
	}
	defer release()
	// No call of this try outlives its hold.
	ctx, cancel := context.WithDeadline(ctx, until.Add(-time.Second))
	defer cancel()
	p := s.provider(d.Provider)
	if p == nil {
		return s.giveUp(ctx, d, Failed, "provider "+d.Provider+" is not configured", "failed")
	}
	f, r, err := s.request(ctx, d.OrderID, d.OutNo, p)
	if err != nil {
		return err
	}
	if f.Status != statemachine.Accepted && f.Status != statemachine.Ready {
		// Refunded or handed over before it was placed: nothing to carry
		// (and cancelled at the provider, should an earlier try have
		// placed it).
		return s.cancelUnplaced(ctx, d, "the order is "+string(f.Status), "")
	}
	q, err := s.quote(ctx, d, p, r)
	if errors.Is(err, ErrAlreadyPlaced) {
		// An earlier try placed it (its answer was lost) and Dada will not
		// quote an order it has: ask where it is.
		return s.placedEarlier(ctx, d, p)
	}
	if err != nil {
		return s.placeFailed(ctx, d, p, err)
	}
	// Written ahead: from here the provider may take it whatever becomes
	// of this try (its answer lost, this process killed).
	if err := s.q.DeliveryPlaceUnsure(ctx, s.o.Pool, d.ID); err != nil {
		return fmt.Errorf("record a placement on its way: %w", err)
	}
	placed, err := p.Place(ctx, r, q)
	if errors.Is(err, ErrQuoteExpired) {
		if q, err = p.Quote(ctx, r); err == nil {
			if err = s.q.DeliveryQuoted(ctx, s.o.Pool, dbsqlc.DeliveryQuotedParams{ID: d.ID, QuoteToken: &q.Token, QuoteExpires: &q.Expires, FeeFen: &q.FeeFen}); err == nil {
				placed, err = p.Place(ctx, r, q)
			}
		}
	}
	if errors.Is(err, ErrAlreadyPlaced) {
		// An earlier try took it and its answer was lost: the provider
		// knows it by our number.
		placed, err = Placement{Ref: d.OutNo, FeeFen: q.FeeFen}, nil
	}
	if err != nil {
		return s.placeFailed(ctx, d, p, err)
	}
	return s.placed(ctx, d, p, placed)
}

// placedEarlier records a placement the provider has from an earlier try
// whose answer was lost, and where it is now.
func (s *Service) placedEarlier(ctx context.Context, d dbsqlc.Delivery, p Provider) error {
	u, err := p.Query(ctx, d.OutNo)
	if err != nil {
		return fmt.Errorf("%w: query %s placed earlier: %w", errRetry, d.OutNo, err)
	}
	if err := s.placed(ctx, d, p, Placement{Ref: d.OutNo, FeeFen: derefInt(d.FeeFen)}); err != nil {
		return err
	}
	return s.Apply(ctx, d.OutNo, u, sourceQuery)
}

// quote is the quote d is placed on: its own while good, the one cached
// at confirm, or a new one.
func (s *Service) quote(ctx context.Context, d dbsqlc.Delivery, p Provider, r Request) (Quote, error) {
	if d.QuoteToken != nil && d.QuoteExpires != nil && d.QuoteExpires.After(s.o.Now().Add(10*time.Second)) {
		return Quote{Provider: p.Name(), Token: *d.QuoteToken, FeeFen: derefInt(d.FeeFen), Expires: *d.QuoteExpires}, nil
	}
	q, ok := s.cachedQuote(ctx, p, r)
	if !ok {
		var err error
		if q, err = p.Quote(ctx, r); err != nil {
			return Quote{}, err
		}
	}
	if err := s.q.DeliveryQuoted(ctx, s.o.Pool, dbsqlc.DeliveryQuotedParams{ID: d.ID, QuoteToken: &q.Token, QuoteExpires: &q.Expires, FeeFen: &q.FeeFen}); err != nil {
		return Quote{}, fmt.Errorf("record quote: %w", err)
	}
	return q, nil
}

// placeFailed handles a quote or placement that failed. A refusal moves
// the order on to its next attempt; after an earlier try that may have
// placed it (place_unsure as this try found it), only once the provider
// says it has no such order: that try may have placed it, and a refusal
// of this one proves nothing of it. Anything else is tried again.
func (s *Service) placeFailed(ctx context.Context, d dbsqlc.Delivery, p Provider, err error) error {
	var refused *RefusedError
	if !errors.As(err, &refused) {
		if uerr := s.q.DeliveryPlaceUnsure(ctx, s.o.Pool, d.ID); uerr != nil {
			return errors.Join(err, uerr)
		}
		return fmt.Errorf("%w: place %s: %w", errRetry, d.OutNo, err)
	}
	if !d.PlaceUnsure {
		// Every try was answered, and refused: nothing is placed.
		return s.giveUp(ctx, d, Failed, "refused: "+refused.Error(), "refused")
	}
	switch _, qerr := p.Query(ctx, d.OutNo); {
	case errors.Is(qerr, ErrUnknownOrder):
		return s.giveUp(ctx, d, Failed, "refused: "+refused.Error(), "refused")
	case qerr == nil:
		return s.placedEarlier(ctx, d, p)
	default:
		return fmt.Errorf("%w: place %s refused (%w), and the provider not asked: %w", errRetry, d.OutNo, err, qerr)
	}
}

// placed records that the provider took d; a delivery cancelled
// meanwhile (the order refunded) is cancelled at the provider too.
func (s *Service) placed(ctx context.Context, d dbsqlc.Delivery, p Provider, pl Placement) error {
	assignBy := s.o.Now().Add(s.o.AssignWithin)
	var fee *int64
	if pl.FeeFen > 0 {
		fee = &pl.FeeFen
	}
	lost := false
	err := db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		row, err := s.q.DeliveryPlaced(ctx, tx, dbsqlc.DeliveryPlacedParams{ID: d.ID, ProviderRef: &pl.Ref, FeeFen: fee, AssignBy: &assignBy})
		if errors.Is(err, db.ErrNotFound) {
			lost = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("record placement: %w", err)
		}
		if err := s.q.DeliveryEventInsert(ctx, tx, dbsqlc.DeliveryEventInsertParams{
			DeliveryID: row.ID, Seq: row.Seq, OrderID: row.OrderID, Kind: "status", Status: string(Placed), Source: sourceSystem,
		}); err != nil {
			return fmt.Errorf("delivery event: %w", err)
		}
		s.updates.WithLabelValues(row.Provider, string(Placed)).Inc()
		return s.publish(ctx, tx, row, false)
	})
	if err != nil || !lost {
		return err
	}
	// Cancelled while it was being placed: the provider must not carry
	// it. A few tries, a second apart, ride out a provider's blip.
	for try := 0; ; try++ {
		_, err := p.Cancel(ctx, d.OutNo, "order cancelled")
		if err == nil || try == 4 || ctx.Err() != nil {
			if err != nil {
				s.o.Logger.ErrorContext(ctx, "a placement of a cancelled delivery could not be cancelled", "out_no", d.OutNo, "error", err)
			}
			return nil
		}
		time.Sleep(time.Second)
	}
}

// Apply applies an update of the delivery outNo under its lock: the
// state table decides; a pickup dispatches the order and a delivery
// completes it; a placement the provider cancelled or failed moves the
// order on to its next attempt. Stale updates change nothing but when
// it was last heard of.
func (s *Service) Apply(ctx context.Context, outNo string, u Update, source string) error {
	return db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		d, err := s.q.DeliveryByOutNoForUpdate(ctx, tx, outNo)
		if errors.Is(err, db.ErrNotFound) {
			return errUnknownDelivery
		}
		if err != nil {
			return fmt.Errorf("read delivery: %w", err)
		}
		return s.applyTx(ctx, tx, d, u, source)
	})
}

var errUnknownDelivery = problem.New(problem.NotFound, "no such delivery")

func (s *Service) applyTx(ctx context.Context, tx pgx.Tx, d dbsqlc.Delivery, u Update, source string) error {
	cur := State{Status: Status(d.Status), Rider: d.RiderID, At: d.ProviderTime}
	outcome := Decide(cur, u.Status, u.RiderID, u.At)
	if outcome == Stale {
		return s.q.DeliveryHeard(ctx, tx, dbsqlc.DeliveryHeardParams{ID: d.ID, Latitude: u.Lat, Longitude: u.Lng, LocatedAt: locatedAt(u), TipFen: u.TipFen})
	}
	to, kind := u.Status, "status"
	if outcome == Reassign {
		to, kind = Status(d.Status), "reassigned"
	}
	rider := [3]string{u.RiderID, u.RiderName, u.RiderPhone}
	// A step that names no rider, or comes late, keeps the one there is.
	if (u.RiderID == "" && u.RiderName == "") || outcome == Catch {
		rider = [3]string{d.RiderID, d.RiderName, d.RiderPhone}
	}
	var at *time.Time
	if !u.At.IsZero() && outcome != Catch {
		at = &u.At
	}
	var cancelFee int64
	if to == Cancelled {
		cancelFee = u.CancelFeeFen
	}
	row, err := s.q.DeliveryApply(ctx, tx, dbsqlc.DeliveryApplyParams{
		ID: d.ID, Seq: d.Seq, Status: string(to), RiderID: rider[0], RiderName: rider[1], RiderPhone: rider[2],
		Latitude: u.Lat, Longitude: u.Lng, LocatedAt: locatedAt(u), ProviderTime: at, AddCancelFeeFen: cancelFee, Reason: u.Reason,
		TipFen: u.TipFen,
	})
	if err != nil {
		return fmt.Errorf("apply delivery update: %w", err)
	}
	if err := s.q.DeliveryEventInsert(ctx, tx, dbsqlc.DeliveryEventInsertParams{
		DeliveryID: row.ID, Seq: row.Seq, OrderID: row.OrderID, Kind: kind, Status: string(to), RiderName: row.RiderName, ProviderTime: at, Source: source,
	}); err != nil {
		return fmt.Errorf("delivery event: %w", err)
	}
	label := string(to)
	if outcome == Reassign {
		label = "REASSIGNED"
	}
	s.updates.WithLabelValues(row.Provider, label).Inc()
	if err := s.moveOrder(ctx, tx, row); err != nil {
		return err
	}
	final := false
	if to == Cancelled || to == Failed {
		why := "provider_cancelled"
		if to == Failed {
			why = "failed"
		}
		if final, err = s.next(ctx, tx, row, why); err != nil {
			return err
		}
	}
	return s.publish(ctx, tx, row, final)
}

func locatedAt(u Update) *time.Time {
	if u.Lat == nil {
		return nil
	}
	at := u.At
	if at.IsZero() {
		at = time.Now()
	}
	return &at
}

// courierActor is who moves orders for the couriers.
var courierActor = order.Actor{Kind: statemachine.System, Name: "courier"}

// moveOrder moves the order of d to where its delivery is: DELIVERING at
// pickup, COMPLETED at delivery (after DELIVERING, for a provider that
// skipped the pickup). An order that moved on already (the merchant
// dispatched or completed it, or refunded it) is left as it is.
func (s *Service) moveOrder(ctx context.Context, tx pgx.Tx, d dbsqlc.Delivery) error {
	var events []statemachine.Event
	switch Status(d.Status) {
	case PickedUp:
		events = []statemachine.Event{statemachine.Dispatch}
	case Delivered:
		events = []statemachine.Event{statemachine.Dispatch, statemachine.Complete}
	default:
		return nil
	}
	for _, ev := range events {
		_, err := s.o.Orders.ApplyTx(ctx, tx, d.OrderID, ev, courierActor, "courier "+d.Provider+": "+d.Status)
		if p, ok := problem.As(err); ok && p.Type == problem.OrderStatusConflict {
			continue
		}
		if err != nil {
			return fmt.Errorf("move the order at %s: %w", d.Status, err)
		}
	}
	return nil
}

// next opens the order's next attempt after d ended (cancelled, failed),
// with the next provider, while the order still waits for a courier and
// attempts are left; otherwise, final, the order is left to its
// merchant.
func (s *Service) next(ctx context.Context, tx pgx.Tx, d dbsqlc.Delivery, why string) (final bool, err error) {
	f, err := s.q.DeliveryOrderFacts(ctx, tx, d.OrderID)
	if err != nil {
		return false, fmt.Errorf("order of the delivery: %w", err)
	}
	if f.Status != statemachine.Accepted && f.Status != statemachine.Ready {
		return false, nil // refunded, or already on its way: nothing to place
	}
	if int(d.Attempt) >= s.o.MaxAttempts {
		s.moves.WithLabelValues(why, "last").Inc()
		s.o.Logger.WarnContext(ctx, "delivery failed: the order is left to its merchant", "order_id", d.OrderID, "attempt", d.Attempt, "why", why)
		return true, nil
	}
	if _, err := s.open(ctx, tx, d.OrderID, d.MerchantID, d.Attempt+1, s.nextProvider(d.Provider), why+" at "+d.Provider); err != nil {
		return false, err
	}
	s.moves.WithLabelValues(why, "replaced").Inc()
	return false, nil
}

// giveUp ends d (cancelled or failed) as the system, with the fee the
// provider deducted, and moves the order on when why is set. Nothing
// happens when d moved meanwhile (a rider took it after all).
func (s *Service) giveUp(ctx context.Context, d dbsqlc.Delivery, to Status, reason, why string) error {
	return s.giveUpWithFee(ctx, d, to, reason, why, 0)
}

func (s *Service) giveUpWithFee(ctx context.Context, d dbsqlc.Delivery, to Status, reason, why string, fee int64) error {
	return db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		cur, err := s.q.DeliveryGetForUpdate(ctx, tx, d.ID)
		if err != nil {
			return fmt.Errorf("read delivery: %w", err)
		}
		if cur.Status != d.Status || cur.Seq != d.Seq {
			return nil // it moved: whoever moved it decides
		}
		row, err := s.q.DeliveryApply(ctx, tx, dbsqlc.DeliveryApplyParams{
			ID: cur.ID, Seq: cur.Seq, Status: string(to), RiderID: cur.RiderID, RiderName: cur.RiderName, RiderPhone: cur.RiderPhone,
			AddCancelFeeFen: fee, Reason: reason,
		})
		if err != nil {
			return fmt.Errorf("end delivery: %w", err)
		}
		if err := s.q.DeliveryEventInsert(ctx, tx, dbsqlc.DeliveryEventInsertParams{
			DeliveryID: row.ID, Seq: row.Seq, OrderID: row.OrderID, Kind: "status", Status: string(to), RiderName: row.RiderName, Source: sourceSystem,
		}); err != nil {
			return fmt.Errorf("delivery event: %w", err)
		}
		s.updates.WithLabelValues(row.Provider, string(to)).Inc()
		final := false
		if why != "" {
			if final, err = s.next(ctx, tx, row, why); err != nil {
				return err
			}
		}
		return s.publish(ctx, tx, row, final)
	})
}

// cancel cancels d at its provider and records it, for the order that no
// longer needs it.
func (s *Service) cancel(ctx context.Context, id int64, reason, why string) error {
	d, err := s.q.DeliveryGet(ctx, s.o.Pool, id)
	if err != nil {
		return fmt.Errorf("read delivery: %w", err)
	}
	st := Status(d.Status)
	if st.Terminal() {
		return nil
	}
	if st == Quoted {
		return s.cancelQuoted(ctx, d, reason, why)
	}
	p := s.provider(d.Provider)
	if p == nil {
		return fmt.Errorf("provider %s is not configured", d.Provider)
	}
	fee, err := p.Cancel(ctx, d.OutNo, reason)
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		// It cannot be cancelled: it ended or moved on at the provider.
		// What it is now says what to do.
		u, qerr := p.Query(ctx, d.OutNo)
		if qerr != nil {
			return fmt.Errorf("%w: query %s after a refused cancel: %w", errRetry, d.OutNo, qerr)
		}
		return s.Apply(ctx, d.OutNo, u, sourceQuery)
	case err != nil:
		return fmt.Errorf("%w: cancel %s: %w", errRetry, d.OutNo, err)
	}
	return s.giveUpWithFee(ctx, d, Cancelled, reason, why, fee)
}

// errNotQuoted is a delivery hold finds no longer QUOTED.
var errNotQuoted = errors.New("the delivery is not QUOTED")

// hold takes the one hold on placing (or cancelling) the QUOTED delivery
// id, until the returned time; release gives it up. errNotQuoted: it
// moved on; errHeld: another try holds it.
func (s *Service) hold(ctx context.Context, id int64) (d dbsqlc.Delivery, until time.Time, release func(), err error) {
	now := s.o.Now()
	until = now.Add(cmp.Or(s.o.PlaceLease, 2*time.Minute)).Truncate(time.Microsecond)
	d, err = s.q.DeliveryClaimPlacing(ctx, s.o.Pool, dbsqlc.DeliveryClaimPlacingParams{ID: id, Until: until, Now: now})
	if errors.Is(err, db.ErrNotFound) {
		cur, err := s.q.DeliveryGet(ctx, s.o.Pool, id)
		switch {
		case err != nil:
			return d, until, nil, fmt.Errorf("read delivery: %w", err)
		case Status(cur.Status) != Quoted:
			return d, until, nil, errNotQuoted
		default:
			return d, until, nil, fmt.Errorf("%w: %s", errHeld, cur.OutNo)
		}
	}
	if err != nil {
		return d, until, nil, fmt.Errorf("hold delivery %d: %w", id, err)
	}
	release = func() {
		if err := s.q.DeliveryReleasePlacing(context.WithoutCancel(ctx), s.o.Pool, dbsqlc.DeliveryReleasePlacingParams{ID: id, Until: until}); err != nil {
			s.o.Logger.WarnContext(ctx, "release a delivery; it is held until its lease ends", "delivery_id", id, "error", err)
		}
	}
	return d, until, release, nil
}

// cancelQuoted cancels a delivery not known to be placed, holding it as a
// placing try does: a try placing it now is waited for (the cancel is
// tried again), and one that may have placed it leaves it to be
// cancelled at the provider too.
func (s *Service) cancelQuoted(ctx context.Context, d dbsqlc.Delivery, reason, why string) error {
	held, _, release, err := s.hold(ctx, d.ID)
	if errors.Is(err, errNotQuoted) {
		return s.cancel(ctx, d.ID, reason, why) // placed or ended meanwhile
	}
	if err != nil {
		return err
	}
	defer release()
	return s.cancelUnplaced(ctx, held, reason, why)
}

// cancelUnplaced cancels a QUOTED delivery its caller holds. One whose
// placement may have reached the provider (its answer lost) is cancelled
// there first: the provider may carry it, and would deliver an order
// that no longer wants it.
func (s *Service) cancelUnplaced(ctx context.Context, d dbsqlc.Delivery, reason, why string) error {
	p := s.provider(d.Provider)
	if !d.PlaceUnsure || p == nil {
		return s.giveUp(ctx, d, Cancelled, reason, why)
	}
	fee, err := p.Cancel(ctx, d.OutNo, reason)
	var refused *RefusedError
	switch {
	case errors.Is(err, ErrUnknownOrder):
		return s.giveUp(ctx, d, Cancelled, reason, why) // never taken
	case errors.As(err, &refused):
		// It has it and will not cancel it (a rider has it): where it is
		// now is what we record.
		return s.placedEarlier(ctx, d, p)
	case err != nil:
		return fmt.Errorf("%w: cancel %s, which may be placed: %w", errRetry, d.OutNo, err)
	}
	return s.giveUpWithFee(ctx, d, Cancelled, reason, why, fee)
}

// Sync asks the provider where the delivery outNo is and applies it.
func (s *Service) Sync(ctx context.Context, outNo string) error {
	d, err := s.q.DeliveryGetByOutNo(ctx, s.o.Pool, outNo)
	if errors.Is(err, db.ErrNotFound) {
		return errUnknownDelivery
	}
	if err != nil {
		return err
	}
	return s.sync(ctx, d)
}

func (s *Service) sync(ctx context.Context, d dbsqlc.Delivery) error {
	if Status(d.Status) == Quoted {
		if err := s.place(ctx, d.ID); !errors.Is(err, errHeld) {
			return err
		}
		return nil // its place job is at it
	}
	p := s.provider(d.Provider)
	if p == nil {
		return fmt.Errorf("provider %s is not configured", d.Provider)
	}
	u, err := p.Query(ctx, d.OutNo)
	if err != nil {
		return fmt.Errorf("query %s: %w", d.OutNo, err)
	}
	return s.Apply(ctx, d.OutNo, u, sourceQuery)
}

// unassigned handles a placement no rider took in time: asked about
// first (the callback may be what was lost), then tipped once where the
// provider takes tips, then cancelled and placed elsewhere.
func (s *Service) unassigned(ctx context.Context, d dbsqlc.Delivery) error {
	if err := s.sync(ctx, d); err != nil {
		return err
	}
	cur, err := s.q.DeliveryGet(ctx, s.o.Pool, d.ID)
	if err != nil {
		return err
	}
	if Status(cur.Status) != Placed {
		return nil
	}
	p := s.provider(cur.Provider)
	if p != nil && p.TakesTips() && s.o.TipFen > 0 && cur.TipFen == 0 {
		return s.tip(ctx, p, cur)
	}
	return s.cancel(ctx, cur.ID, "no rider in time", "no_rider")
}

// tip tips a placement no rider took, once: the tip is claimed in the
// database before the provider is asked (of two sweeps at once, one
// tips), and a tip whose outcome is not known is settled by what the
// provider says it holds. The placement waits another AssignWithin.
func (s *Service) tip(ctx context.Context, p Provider, d dbsqlc.Delivery) error {
	by := s.o.Now().Add(s.o.AssignWithin)
	_, err := s.q.DeliveryTipped(ctx, s.o.Pool, dbsqlc.DeliveryTippedParams{ID: d.ID, TipFen: s.o.TipFen, AssignBy: &by})
	if errors.Is(err, db.ErrNotFound) {
		return nil // tipped by another, or it moved on
	}
	if err != nil {
		return fmt.Errorf("claim the tip: %w", err)
	}
	terr := p.Tip(ctx, d.OutNo, s.o.TipFen)
	if terr == nil {
		return nil
	}
	u, err := p.Query(ctx, d.OutNo)
	if err != nil || u.TipFen == nil {
		// Neither answered: the next query (the late sweep) settles it.
		return fmt.Errorf("%w: tip %s: %w", errRetry, d.OutNo, terr)
	}
	if err := s.q.DeliveryTipSet(ctx, s.o.Pool, dbsqlc.DeliveryTipSetParams{ID: d.ID, TipFen: *u.TipFen}); err != nil {
		return fmt.Errorf("record the tip held: %w", err)
	}
	return nil
}

// sweepBatch is how many deliveries one sweep looks at of each kind.
const sweepBatch = 200

// Sweep asks about the deliveries whose callbacks are late and moves on
// the placements no rider took in time; it returns how many it looked
// at.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	now := s.o.Now()
	unassigned, err := s.q.DeliveriesUnassigned(ctx, s.o.Pool, dbsqlc.DeliveriesUnassignedParams{Now: &now, MaxRows: sweepBatch})
	if err != nil {
		return 0, fmt.Errorf("unassigned deliveries: %w", err)
	}
	var errs []error
	for _, d := range unassigned {
		if err := s.unassigned(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	late, err := s.q.DeliveriesLate(ctx, s.o.Pool, dbsqlc.DeliveriesLateParams{HeardBefore: now.Add(-s.o.LateAfter), MaxRows: sweepBatch})
	if err != nil {
		return len(unassigned), fmt.Errorf("late deliveries: %w", err)
	}
	for _, d := range late {
		if err := s.sync(ctx, d); err != nil {
			errs = append(errs, err)
			// Heard or not, the next sweep comes back to it after the
			// others.
			_ = s.q.DeliveryHeard(ctx, s.o.Pool, dbsqlc.DeliveryHeardParams{ID: d.ID})
		}
	}
	return len(unassigned) + len(late), errors.Join(errs...)
}

// publish tells the board of d's change: an order.delivery event with
// the delivery as the merchant sees it; final when the couriers gave up
// on the order.
func (s *Service) publish(ctx context.Context, tx pgx.Tx, d dbsqlc.Delivery, final bool) error {
	if s.o.Events == nil {
		return nil
	}
	body, err := json.Marshal(staffView(d, final))
	if err != nil {
		return err
	}
	const typ = "order.delivery"
	return s.o.Events.Record(ctx, tx, d.MerchantID, d.OrderID, webhook.Event{
		ID: fmt.Sprintf("%d:%s:%d.%d", d.OrderID, typ, d.Attempt, d.Seq), Type: typ,
		OrderID: strconv.FormatInt(d.OrderID, 10), MerchantID: strconv.FormatInt(d.MerchantID, 10),
		Status: d.Status, Version: int64(d.Seq), OccurredAt: d.UpdatedAt.UTC(), Delivery: body,
	})
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
