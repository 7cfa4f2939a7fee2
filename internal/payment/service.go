package payment

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/maypok86/otter/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"golang.org/x/sync/singleflight"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/paystate"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
)

// Channel names WeChat Pay in the payment tables.
const Channel = "wechatpay"

// Options configure a Service.
type Options struct {
	Pool   *pgxpool.Pool
	Client *Client
	Orders Orders
	// Effects records refunds and inserts jobs (the same value the order
	// service was built with).
	Effects *Effects
	Logger  *slog.Logger
	Now     func() time.Time

	MchID       string
	AppID       string
	MerchantKey *rsa.PrivateKey // signs paySign
	Platform    wxpay.Keyring   // verifies callbacks
	APIv3Key    []byte
	V2Key       string
	// GroupCommitMax and GroupCommitSlots configure the group commit of
	// one-statement payment successes (db.GroupOptions' Max and Slots).
	GroupCommitMax, GroupCommitSlots int
	Registerer                       prometheus.Registerer
	// RefundGap is the least time between two refunds of one payment
	// sent to WeChat Pay (its rule is a minute; 0 sends them at once).
	RefundGap time.Duration
	// Mode is ModeMerchant (the default) or ModePartner: each payment
	// taken for its merchant's sub-merchant account, frozen for profit
	// sharing.
	Mode string
	// Returns, in the partner mode, gets back from the platform's account
	// what a refund needs of a payment's shared money before the refund
	// is sent (the sharing capability provides it).
	Returns ReturnsBeforeRefund
}

// ReturnsBeforeRefund is what a refund of a payment frozen for profit
// sharing waits on: the sharing capability returns (回退) what the refund
// needs of the money already shared, and says how long to wait when
// that is not done yet.
type ReturnsBeforeRefund interface {
	BeforeRefund(ctx context.Context, r dbsqlc.Refund) (wait time.Duration, err error)
	// ClearTx reports, in the refund's turn (tx holds the payment's
	// row), whether r may be sent now.
	ClearTx(ctx context.Context, tx pgx.Tx, r dbsqlc.Refund) (bool, error)
}

// SubOf is the sub-merchant payment p was taken for (zero in the
// merchant mode).
func SubOf(p dbsqlc.Payment) SubMerchant {
	var sub SubMerchant
	if p.SubMchid != nil {
		sub.MchID = *p.SubMchid
	}
	if p.SubAppid != nil {
		sub.AppID = *p.SubAppid
	}
	return sub
}

// Orders is what payments need of the order capability: an order as its
// user sees it, and transitions applied in a payment's transaction
// (*order.Service provides it).
type Orders interface {
	Get(ctx context.Context, userID, orderID int64) (order.Order, error)
	ApplyTx(ctx context.Context, tx pgx.Tx, orderID int64, event statemachine.Event, actor order.Actor, reason string) (order.Applied, error)
	PrepareRefundTx(ctx context.Context, tx pgx.Tx, orderID int64, actor order.Actor, lines []order.RefundLine, restock bool) (order.LinesRefund, error)
	// PrepareDirect and DirectApplied write a transition in one statement
	// with the payment (payment_settle), when it can be.
	PrepareDirect(from statemachine.Status, event statemachine.Event, actor order.Actor, reason string) (order.DirectTransition, bool)
	DirectApplied(dt order.DirectTransition)
}

// Service takes payments and refunds.
type Service struct {
	o Options
	q *dbsqlc.Queries
	// succeed commits the one-statement successes of a moment together.
	succeed *db.Group[dbsqlc.PaymentSettleParams, string]

	callbacks *prometheus.CounterVec
	// successPaths counts successful payments by how they were applied.
	successPaths *prometheus.CounterVec
	anomalies    *prometheus.CounterVec
	// sweeps counts the reconciliation sweep's checks by kind and outcome.
	sweeps *prometheus.CounterVec
	// refundErrors counts the refund API's errors by code.
	refundErrors *prometheus.CounterVec
	// delivered remembers the exact notifications (headers and body) that
	// were verified and answered with success, so a redelivery of the same
	// bytes answers at once, without the RSA verification. Entries live as
	// long as a timestamp is accepted, so a hit could only have been
	// verified anew.
	delivered *otter.Cache[[sha256.Size]byte, struct{}]
	// applying holds the transactions this instance is applying now, and
	// settled the ones it has applied (or found applied): see
	// HandleTransaction. What the database recorded never changes, so a
	// settled entry is never stale; the cache only bounds how many are
	// kept.
	applying sync.Map // settledKey -> struct{}
	settled  *otter.Cache[settledKey, struct{}]
	// prepays merges concurrent prepay calls for one attempt.
	prepays singleflight.Group
	// refusals logs refused callbacks, rate limited.
	refusals *refusalLog
}

// settledKey names one result of one transaction, as the notification's
// unique key (channel, transaction id, event type) does.
type settledKey struct{ transactionID, eventType string }

// deliveredFor is how long a delivered notification is remembered: the
// window a notification's timestamp is accepted in.
const deliveredFor = 5 * time.Minute

// deliveryKey identifies one exact notification.
func deliveryKey(h wxpay.SignedHeaders, body []byte) [sha256.Size]byte {
	d := sha256.New()
	// The headers joined in a buffer on the stack: a duplicate delivery
	// is answered without allocating for its key.
	var buf [512]byte
	joined := buf[:0]
	for _, part := range []string{h.Timestamp, h.Nonce, h.Serial, h.Signature} {
		joined = append(append(joined, part...), 0)
	}
	_, _ = d.Write(joined)
	_, _ = d.Write(body)
	var k [sha256.Size]byte
	d.Sum(k[:0])
	return k
}

// NewService returns a payment service.
func NewService(o Options) (*Service, error) {
	delivered, err := otter.New(&otter.Options[[sha256.Size]byte, struct{}]{
		MaximumSize:      100_000,
		ExpiryCalculator: otter.ExpiryWriting[[sha256.Size]byte, struct{}](deliveredFor),
	})
	if err != nil {
		return nil, fmt.Errorf("payment delivered cache: %w", err)
	}
	settled, err := otter.New(&otter.Options[settledKey, struct{}]{MaximumSize: 100_000})
	if err != nil {
		return nil, fmt.Errorf("payment settled cache: %w", err)
	}
	s := &Service{o: o, q: dbsqlc.New(), delivered: delivered, settled: settled, refusals: &refusalLog{every: time.Second, now: time.Now},
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_payment_callbacks_total",
			Help: "Payment callbacks by source (v3, v2, query) and outcome (applied, duplicate, in_flight, refunded_late, refunded_double, anomaly, rejected).",
		}, []string{"source", "outcome"}),
		successPaths: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_payment_success_paths_total",
			Help: "Successful payment results by how they were applied: one_statement (payment_settle, one round trip) or transaction (statement by statement: an anomaly, a late or second payment, an order that changed meanwhile, or a transition with more effects).",
		}, []string{"path"}),
		anomalies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_payment_anomalies_total",
			Help: "Payment callbacks that did not match their payment, by kind.",
		}, []string{"kind"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_payment_reconcile_checks_total",
			Help: "Late payments and refunds the reconciliation sweep asked the platform about, by kind (payment, refund) and outcome (checked, failed: the platform could not be asked; skipped: no time left in the sweep).",
		}, []string{"kind", "outcome"}),
		refundErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_refund_errors_total",
			Help: "Errors of WeChat Pay's refund API by code: SYSTEM_ERROR and NOT_ENOUGH are retried, FREQUENCY_LIMITED backs off, the others (and unknown codes, as other) leave the refund FAILED for an operator.",
		}, []string{"code"}),
	}
	for code := range refundErrorCodes {
		s.refundErrors.WithLabelValues(code)
	}
	if o.Logger == nil {
		s.o.Logger = slog.New(slog.DiscardHandler)
	}
	// Series alerts watch exist from the start at 0: an increase() over
	// a series that appears at 1 sees no increase.
	for _, src := range []string{"v3", "v2", "query"} {
		for _, outcome := range []string{"applied", "duplicate", "rejected", "anomaly"} {
			s.callbacks.WithLabelValues(src, outcome)
		}
	}
	for _, kind := range anomalyKinds {
		s.anomalies.WithLabelValues(kind)
	}
	for _, path := range []string{"one_statement", "transaction"} {
		s.successPaths.WithLabelValues(path)
	}
	for _, kind := range []string{"payment", "refund"} {
		for _, outcome := range []string{"checked", "failed", "skipped"} {
			s.sweeps.WithLabelValues(kind, outcome)
		}
	}
	s.succeed = s.newSucceedGroup(o.GroupCommitMax, o.GroupCommitSlots)
	if o.Registerer != nil {
		attention := &refundsCollector{s: s, desc: prometheus.NewDesc("takeout_refunds_needing_attention",
			"Refunds that failed at the platform (ABNORMAL, CLOSED) and wait for an operator to retry or settle them: money owed to customers.", nil, nil)}
		for _, c := range append([]prometheus.Collector{s.callbacks, s.successPaths, s.anomalies, s.sweeps, s.refundErrors, attention}, s.succeed.Collectors()...) {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register payment metrics: %w", err)
			}
		}
	}
	return s, nil
}

// RequestPayment is what wx.requestPayment takes.
type RequestPayment struct {
	AppID     string `json:"appId"`
	TimeStamp string `json:"timeStamp"`
	NonceStr  string `json:"nonceStr"`
	Package   string `json:"package"`
	SignType  string `json:"signType"`
	PaySign   string `json:"paySign"`
}

// prepayValidity is how long a prepay id lives at the platform (2h); we
// stop reusing one a little earlier.
const prepayValidity = 2*time.Hour - 5*time.Minute

// Pay returns the wx.requestPayment parameters of the user's pending
// order, creating its prepay or reusing the live one.
//
// No transaction is open while WeChat answers: a short one reserves the
// attempt (one open attempt per order, reused until its prepay expires),
// the prepay is asked for with no connection held, and another short one
// records it, holding the order's row so that a cancel cannot slip in
// between its check and its commit. A cancel that committed first gets
// the prepay recorded and closed (a job), and this caller 409: a prepay
// is handed out only for an order that was still waiting for payment when
// it was recorded, and every one recorded for a cancelled order is
// closed.
func (s *Service) Pay(ctx context.Context, userID, orderID int64) (RequestPayment, error) {
	o, err := s.o.Orders.Get(ctx, userID, orderID)
	if err != nil {
		return RequestPayment{}, err
	}
	if o.Status != statemachine.PendingPayment {
		return RequestPayment{}, notPayable(o.Status)
	}
	user, err := s.q.UserGetByID(ctx, s.o.Pool, userID)
	if err != nil {
		return RequestPayment{}, fmt.Errorf("read user: %w", err)
	}
	p, err := s.reserveAttempt(ctx, orderID, o.TotalFen)
	if err != nil {
		return RequestPayment{}, err
	}
	prepayID := ""
	if p.PrepayID != nil && p.PrepayExpiresAt != nil && p.PrepayExpiresAt.After(s.o.Now()) {
		prepayID = *p.PrepayID
	} else {
		// Concurrent pays of one attempt on this instance share one call.
		v, err, _ := s.prepays.Do(p.OutTradeNo, func() (any, error) {
			return s.o.Client.Prepay(context.WithoutCancel(ctx), PrepayRequest{Description: "takeout order " + o.ID, OutTradeNo: p.OutTradeNo,
				TimeExpire: o.PayDeadline, AmountFen: o.TotalFen, OpenID: user.Openid, Sub: SubOf(p)})
		})
		if err != nil {
			return RequestPayment{}, problem.Wrap(problem.UpstreamUnavailable, err, "WeChat Pay did not take the payment; try again")
		}
		if prepayID, err = s.recordPrepay(ctx, p, v.(string)); err != nil {
			return RequestPayment{}, err
		}
	}
	rp := RequestPayment{AppID: s.o.AppID, TimeStamp: strconv.FormatInt(s.o.Now().Unix(), 10), NonceStr: nonce(), Package: "prepay_id=" + prepayID, SignType: "RSA"}
	if rp.PaySign, err = wxpay.PaySign(s.o.MerchantKey, rp.AppID, rp.TimeStamp, rp.NonceStr, rp.Package); err != nil {
		return RequestPayment{}, err
	}
	return rp, nil
}

func notPayable(status statemachine.Status) error {
	return problem.New(problem.OrderStatusConflict, "only an order waiting for payment can be paid; it is %s", status).With("current_status", status)
}

// reserveAttempt returns the order's open payment attempt, creating one
// when there is none or its prepay expired, in a short transaction.
func (s *Service) reserveAttempt(ctx context.Context, orderID, amountFen int64) (dbsqlc.Payment, error) {
	return db.WithTxV(ctx, s.o.Pool, func(tx pgx.Tx) (dbsqlc.Payment, error) {
		// No attempt for an order cancelled meanwhile: the order's row is
		// held until this commits, so a cancel either came first or sees
		// the attempt (and closes it).
		status, err := s.q.OrderStatusForShare(ctx, tx, orderID)
		if err != nil {
			return dbsqlc.Payment{}, fmt.Errorf("read order: %w", err)
		}
		if status != statemachine.PendingPayment {
			return dbsqlc.Payment{}, notPayable(status)
		}
		pays, err := s.q.PaymentsByOrder(ctx, tx, orderID)
		if err != nil {
			return dbsqlc.Payment{}, err
		}
		if n := len(pays); n > 0 && pays[n-1].Status == paystate.Created && (pays[n-1].PrepayExpiresAt == nil || pays[n-1].PrepayExpiresAt.After(s.o.Now())) {
			return pays[n-1], nil
		}
		ins := dbsqlc.PaymentInsertParams{
			OrderID: orderID, Channel: Channel, Mchid: s.o.MchID, Appid: s.o.AppID,
			OutTradeNo: OutTradeNo(orderID, len(pays)+1), AmountFen: amountFen, Currency: "CNY",
		}
		if s.o.Mode == ModePartner {
			m, err := s.q.MerchantSubMerchantOfOrder(ctx, tx, orderID)
			if err != nil {
				return dbsqlc.Payment{}, fmt.Errorf("read the order's sub-merchant: %w", err)
			}
			if m.SubMchid == nil {
				return dbsqlc.Payment{}, problem.New(problem.MerchantNotOnboarded,
					"this shop cannot take payments yet: it has no WeChat Pay sub-merchant account").With("merchant_id", strconv.FormatInt(m.ID, 10))
			}
			ins.SubMchid, ins.SubAppid, ins.ProfitSharing = m.SubMchid, m.SubAppid, true
		}
		// Two concurrent pays insert the same attempt number: the
		// insert is an upsert, so both get the one row.
		return s.q.PaymentInsert(ctx, tx, ins)
	})
}

// recordPrepay records a prepay WeChat issued for attempt p and returns the
// prepay id to hand out: p's, or the one a concurrent pay recorded first.
func (s *Service) recordPrepay(ctx context.Context, p dbsqlc.Payment, prepayID string) (string, error) {
	// A refusal is decided inside and answered after the commit, which
	// keeps the prepay and its close job.
	var refused error
	id, err := db.WithTxV(ctx, s.o.Pool, func(tx pgx.Tx) (string, error) {
		status, err := s.q.OrderStatusForShare(ctx, tx, p.OrderID)
		if err != nil {
			return "", fmt.Errorf("read order: %w", err)
		}
		cur, err := s.q.PaymentGetByOutTradeNoForUpdate(ctx, tx, dbsqlc.PaymentGetByOutTradeNoForUpdateParams{Channel: Channel, Mchid: p.Mchid, OutTradeNo: p.OutTradeNo})
		if err != nil {
			return "", err
		}
		now := s.o.Now()
		if cur.Status == paystate.Created && cur.PrepayID != nil && cur.PrepayExpiresAt != nil && cur.PrepayExpiresAt.After(now) {
			prepayID = *cur.PrepayID // a concurrent pay got there first
		} else if cur.Status == paystate.Created {
			exp := now.Add(prepayValidity)
			if _, err := s.q.PaymentSetPrepay(ctx, tx, dbsqlc.PaymentSetPrepayParams{ID: p.ID, PrepayID: &prepayID, PrepayExpiresAt: &exp}); err != nil {
				return "", err
			}
		}
		if status != statemachine.PendingPayment {
			// Cancelled (or paid) while WeChat answered: whatever is open
			// at the platform for it is closed, and nothing is handed out.
			refused = notPayable(status)
			return "", s.o.Effects.closeLaterTx(ctx, tx, p.OrderID, p.OutTradeNo)
		}
		if cur.Status != paystate.Created {
			refused = problem.New(problem.OrderStatusConflict, "this payment attempt was closed; pay again").With("current_status", status)
		}
		return prepayID, nil
	})
	if err == nil && refused != nil {
		return "", refused
	}
	return id, err
}

// OutTradeNo is the n-th payment attempt's number of an order.
func OutTradeNo(orderID int64, attempt int) string {
	return "T" + strconv.FormatInt(orderID, 10) + "-" + strconv.Itoa(attempt)
}

// OutRefundNo is the refund number of a payment: deterministic, so a
// retried refund is the same refund.
func OutRefundNo(outTradeNo string) string { return "R" + outTradeNo[1:] }

// recordAnomaly stores what the platform reported that does not match
// what we asked for (once per notification and kind), and counts it.
func (s *Service) recordAnomaly(ctx context.Context, tx pgx.Tx, notificationID, outTradeNo, kind, detail string, reported any) error {
	payload, err := json.Marshal(reported)
	if err != nil {
		return err
	}
	if err := s.q.AnomalyInsert(ctx, tx, dbsqlc.AnomalyInsertParams{Channel: Channel, NotificationID: notificationID,
		OutTradeNo: outTradeNo, Kind: kind, Detail: detail, Payload: payload}); err != nil {
		return fmt.Errorf("record payment anomaly: %w", err)
	}
	s.anomalies.WithLabelValues(kind).Inc()
	return nil
}

// Anomaly kinds: what the platform reported that does not match what we
// asked for (takeout_payment_anomalies_total{kind}, payment_anomalies.kind).
const (
	anomalyMchID             = "mchid"
	anomalyAppID             = "appid"
	anomalyAmount            = "amount"
	anomalyCurrency          = "currency"
	anomalySecondTransaction = "second_transaction"
	anomalyRefundMchID       = "refund_mchid"
	anomalyRefundTrade       = "refund_trade"
	anomalyRefundTransaction = "refund_transaction"
	anomalyRefundAmount      = "refund_amount"
	anomalySubMchID          = "sub_mchid"
)

// anomalyKinds lists every kind, so that each one's series exists at 0.
var anomalyKinds = []string{anomalyMchID, anomalyAppID, anomalyAmount, anomalyCurrency, anomalySecondTransaction,
	anomalyRefundMchID, anomalyRefundTrade, anomalyRefundTransaction, anomalyRefundAmount, anomalySubMchID}

// mismatch compares a reported transaction with the payment we asked for.
func mismatch(t Transaction, p dbsqlc.Payment) (kind, detail string) {
	switch {
	case t.MchID != p.Mchid:
		return anomalyMchID, fmt.Sprintf("mchid %q, want %q", t.MchID, p.Mchid)
	case t.AppID != p.Appid:
		return anomalyAppID, fmt.Sprintf("appid %q, want %q", t.AppID, p.Appid)
	case t.SubMchID != SubOf(p).MchID:
		return anomalySubMchID, fmt.Sprintf("sub_mchid %q, want %q", t.SubMchID, SubOf(p).MchID)
	case t.TradeState == TradeSuccess && t.Amount.Total != p.AmountFen:
		return anomalyAmount, fmt.Sprintf("amount %d, want %d", t.Amount.Total, p.AmountFen)
	case t.TradeState == TradeSuccess && t.Amount.Currency != "" && t.Amount.Currency != p.Currency:
		return anomalyCurrency, fmt.Sprintf("currency %q, want %q", t.Amount.Currency, p.Currency)
	}
	return "", ""
}

// refundWorker asks the platform for a refund; retried until it answers.
type refundWorker struct {
	river.WorkerDefaults[RefundArgs]
	s *Service
}

// Work sends the refund (idempotent at the platform by out_refund_no).
func (w *refundWorker) Work(ctx context.Context, job *river.Job[RefundArgs]) error {
	s := w.s
	r, err := s.q.RefundGetByOutRefundNo(ctx, s.o.Pool, job.Args.OutRefundNo)
	if err != nil {
		return fmt.Errorf("read refund: %w", err)
	}
	if r.Status == paystate.Succeeded {
		return nil
	}
	if r.Status != paystate.Pending && r.Status != paystate.Processing {
		return nil // failed, retried or settled: an operator's now
	}
	if r.SentAt == nil && s.o.Returns != nil {
		// Money the refund needs that was shared comes back first.
		wait, err := s.o.Returns.BeforeRefund(ctx, r)
		if err != nil {
			return err
		}
		if wait > 0 {
			return river.JobSnooze(wait)
		}
	}
	if r.SentAt == nil {
		wait, err := s.takeTurn(ctx, r)
		if err != nil {
			return err
		}
		if wait > 0 {
			return river.JobSnooze(wait)
		}
	}
	p, err := s.q.PaymentGetByID(ctx, s.o.Pool, r.PaymentID)
	if err != nil {
		return fmt.Errorf("read payment: %w", err)
	}
	total, txn := p.AmountFen, ""
	if r.TransactionID != nil { // an unexpected transaction: all of it
		total, txn = r.AmountFen, *r.TransactionID
	}
	res, err := s.o.Client.Refund(ctx, RefundRequest{OutTradeNo: p.OutTradeNo, TransactionID: txn, OutRefundNo: r.OutRefundNo,
		Reason: r.Reason, RefundFen: r.AmountFen, TotalFen: total, Sub: SubOf(p)})
	if err != nil {
		return s.refundFailed(ctx, r, err)
	}
	if res.Status.final() {
		// The platform says how it ended (at once, or because this is a
		// retry of a refund that finished meanwhile): apply it the way its
		// notification would be, since that notification may never come.
		res.RefundStatus = res.Status
		_, err := s.HandleRefund(ctx, Source{Kind: "refund-api", NotificationID: "refund-api:" + r.OutRefundNo, EventType: "REFUND." + string(res.Status)}, res)
		return err
	}
	_, err = s.q.RefundSetStatus(ctx, s.o.Pool, dbsqlc.RefundSetStatusParams{OutRefundNo: r.OutRefundNo, Status: paystate.Processing, RefundID: &res.RefundID})
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	return err
}

// HandleRefund applies a refund result exactly once: the refund is marked,
// the payment refunded, and a REFUNDING order moves to REFUNDED.
func (s *Service) HandleRefund(ctx context.Context, src Source, r RefundResult) (string, error) {
	if r.OutRefundNo == "" {
		return "", problem.New(problem.InvalidRequest, "refund without out_refund_no")
	}
	outcome := "applied"
	err := db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		ref, err := s.q.RefundGetByOutRefundNo(ctx, tx, r.OutRefundNo)
		if errors.Is(err, db.ErrNotFound) {
			return problem.New(problem.NotFound, "unknown out_refund_no %q", r.OutRefundNo)
		}
		if err != nil {
			return err
		}
		if kind, detail, err := s.refundMismatch(ctx, tx, r, ref); err != nil || kind != "" {
			if err != nil {
				return err
			}
			outcome = "anomaly"
			return s.recordAnomaly(ctx, tx, src.NotificationID+"/"+r.OutRefundNo, r.OutTradeNo, kind, detail, r)
		}
		if _, err := s.q.NotificationInsert(ctx, tx, dbsqlc.NotificationInsertParams{Channel: Channel, NotificationID: src.NotificationID,
			TransactionID: r.OutRefundNo, EventType: src.EventType, OrderID: &ref.OrderID, Outcome: string(r.RefundStatus)}); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				outcome = "duplicate"
				return nil
			}
			return err
		}
		if r.RefundStatus != RefundSuccess {
			_, err := s.q.RefundSetStatus(ctx, tx, dbsqlc.RefundSetStatusParams{OutRefundNo: r.OutRefundNo, Status: paystate.Failed, RefundID: &r.RefundID})
			if errors.Is(err, db.ErrNotFound) {
				err = nil
			}
			outcome = "refund_failed"
			return err
		}
		if _, err := s.q.RefundSetStatus(ctx, tx, dbsqlc.RefundSetStatusParams{OutRefundNo: r.OutRefundNo, Status: paystate.Succeeded, RefundID: &r.RefundID}); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				outcome = "duplicate"
				return nil
			}
			return err
		}
		return s.endIfRefunded(ctx, tx, ref, order.Actor{Kind: statemachine.Payment, Name: src.Kind}, "refunded "+r.OutRefundNo)
	})
	s.callbacks.WithLabelValues(src.Kind+"-refund", outcome).Inc()
	if err == nil && outcome == "anomaly" {
		return outcome, ErrAnomaly // recorded, and refused
	}
	return outcome, err
}

// endIfRefunded runs after a refund of ref's payment succeeded or was
// settled, in tx: when the payment's final refunds come to all that was
// paid, the payment is refunded and its order moves to REFUNDED (from
// REFUNDING, or from where partial refunds left it). The order's row is
// locked first, so that two refunds ending at once cannot both find the
// other unfinished.
func (s *Service) endIfRefunded(ctx context.Context, tx pgx.Tx, ref dbsqlc.Refund, actor order.Actor, reason string) error {
	if ref.TransactionID != nil {
		return nil // an unexpected transaction given back: the order's own payment stands
	}
	if _, err := s.q.OrderLockForRefund(ctx, tx, ref.OrderID); err != nil {
		return fmt.Errorf("lock order: %w", err)
	}
	p, err := s.q.PaymentGetByID(ctx, tx, ref.PaymentID)
	if err != nil {
		return fmt.Errorf("read payment: %w", err)
	}
	final, err := s.q.RefundedOfPaymentFinal(ctx, tx, p.ID)
	if err != nil {
		return fmt.Errorf("read refunds: %w", err)
	}
	if final < p.AmountFen {
		return nil // a partial refund: the order goes on
	}
	if err := s.q.PaymentMarkRefunded(ctx, tx, p.ID); err != nil {
		return err
	}
	// A second payment of an order given back: the payment it keeps
	// stands, and so does the order.
	pays, err := s.q.PaymentsByOrder(ctx, tx, ref.OrderID)
	if err != nil {
		return fmt.Errorf("read payments: %w", err)
	}
	for _, other := range pays {
		if other.Status == paystate.Paid {
			return nil
		}
	}
	_, err = s.o.Orders.ApplyTx(ctx, tx, ref.OrderID, statemachine.RefundDone, actor, reason)
	if pe, ok := problem.As(err); ok && pe.Type == problem.OrderStatusConflict {
		return nil // a late payment of a cancelled order: the order stays cancelled
	}
	return err
}

// refundMismatch compares a reported refund with the refund we asked for:
// its merchant, its payment (out_trade_no, or the transaction refunded)
// and its amount, where the report carries them.
func (s *Service) refundMismatch(ctx context.Context, tx pgx.Tx, r RefundResult, ref dbsqlc.Refund) (kind, detail string, err error) {
	p, err := s.q.PaymentGetByID(ctx, tx, ref.PaymentID)
	if err != nil {
		return "", "", fmt.Errorf("read refunded payment: %w", err)
	}
	switch {
	case r.MchID != "" && r.MchID != p.Mchid:
		return anomalyRefundMchID, fmt.Sprintf("mchid %q, want %q", r.MchID, p.Mchid), nil
	case r.SpMchID != "" && (r.SpMchID != p.Mchid || r.SubMchID != SubOf(p).MchID):
		return anomalyRefundMchID, fmt.Sprintf("sp_mchid %q sub_mchid %q, want %q %q", r.SpMchID, r.SubMchID, p.Mchid, SubOf(p).MchID), nil
	case r.OutTradeNo != "" && r.OutTradeNo != p.OutTradeNo:
		return anomalyRefundTrade, fmt.Sprintf("out_trade_no %q, want %q", r.OutTradeNo, p.OutTradeNo), nil
	case ref.TransactionID != nil && r.TransactionID != "" && r.TransactionID != *ref.TransactionID:
		return anomalyRefundTransaction, fmt.Sprintf("transaction_id %q, want %q", r.TransactionID, *ref.TransactionID), nil
	case r.Amount.Refund != 0 && r.Amount.Refund != ref.AmountFen:
		return anomalyRefundAmount, fmt.Sprintf("refund %d, want %d", r.Amount.Refund, ref.AmountFen), nil
	}
	return "", "", nil
}

// AddWorkers registers the payment jobs' workers; reconcileAfter is how
// late a callback must be before the reconciliation asks the platform.
func (s *Service) AddWorkers(w *river.Workers, reconcileAfter time.Duration) {
	river.AddWorker(w, &refundWorker{s: s})
	river.AddWorker(w, &reconcileWorker{s: s, after: reconcileAfter})
	river.AddWorker(w, &closeWorker{s: s})
}
