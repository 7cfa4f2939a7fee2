// Package sharing is the platform's money in WeChat Pay's
// service-provider mode: each payment is taken for its merchant's
// sub-merchant account and frozen for profit sharing (分账). Once the
// order completes (or, if nobody completes it, before the frozen funds'
// deadline) one sharing order sends the platform the commission the
// ledger says the order owes and unfreezes the rest to the merchant; a
// refund that needs money already shared first has it returned (回退)
// from the platform's account.
//
// Every request has a deterministic number at WeChat Pay (a retry is the
// same request), is recorded with the event that causes it, and is
// carried by a job; its success writes its ledger journal in the same
// transaction (db/functions/ledger_post_sharing.sql).
package sharing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/paystate"
)

// Kinds and statuses of profit_sharings rows.
const (
	KindShare  = "share"
	KindReturn = "return"

	StatusPending    = "PENDING"
	StatusProcessing = "PROCESSING"
	StatusSuccess    = "SUCCESS"
	StatusFailed     = "FAILED"
	StatusSuperseded = "SUPERSEDED"
)

// Causes of a share.
const (
	CauseCompleted = "completed"
	CauseDeadline  = "deadline"
)

// Options configure a Service.
type Options struct {
	Pool   *pgxpool.Pool
	Client *payment.Client
	Jobs   order.JobInserter
	Logger *slog.Logger
	Now    func() time.Time
	// AfterPay is the least time after a payment before its share is
	// sent (WeChat Pay takes none in the first minute).
	AfterPay time.Duration
	// FinishAfter is how long after its payment an order nobody
	// completed is shared all the same, well before WeChat Pay's
	// deadline for frozen funds.
	FinishAfter time.Duration
	// Poll is how often a request whose result is not out yet is asked
	// about; FailedWait how often a refund held by a failed return looks
	// again.
	Poll, FailedWait time.Duration
	Registerer       prometheus.Registerer
}

// Service shares payments' money and returns it for refunds.
type Service struct {
	o Options
	q *dbsqlc.Queries
	// requests counts requests' ends by kind and outcome.
	requests *prometheus.CounterVec
}

// NewService returns the sharing service.
func NewService(o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.FailedWait <= 0 {
		o.FailedWait = time.Minute
	}
	s := &Service{o: o, q: dbsqlc.New(), requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "takeout_profit_sharing_total",
		Help: "Profit-sharing requests that ended, by kind (share, return) and outcome (success, failed).",
	}, []string{"kind", "outcome"})}
	for _, k := range []string{KindShare, KindReturn} {
		for _, outcome := range []string{"success", "failed"} {
			s.requests.WithLabelValues(k, outcome)
		}
	}
	if o.Registerer != nil {
		failed := &failedCollector{s: s, desc: prometheus.NewDesc("takeout_profit_sharing_failed",
			"Profit-sharing requests that FAILED at WeChat Pay and wait for an operator, by kind: a share leaves money frozen, a return holds a refund.", []string{"kind"}, nil)}
		for _, c := range []prometheus.Collector{s.requests, failed} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register sharing metrics: %w", err)
			}
		}
	}
	return s, nil
}

var (
	_ order.ProfitSharing         = (*Service)(nil)
	_ payment.ReturnsBeforeRefund = (*Service)(nil)
)

// ShareNo is the out_order_no of a payment's share: attempt 1 is the
// trade's number with S for T, a later attempt adds _n.
func ShareNo(outTradeNo string, attempt int32) string {
	return numbered("S"+outTradeNo[1:], attempt)
}

// ReturnNo is the out_return_no of a refund's return.
func ReturnNo(outRefundNo string, attempt int32) string {
	return numbered("B"+outRefundNo[1:], attempt)
}

func numbered(no string, attempt int32) string {
	if attempt <= 1 {
		return no
	}
	return no + "_" + strconv.Itoa(int(attempt))
}

// ShareArgs is the job that sends a share and follows it to its end.
type ShareArgs struct {
	OutNo string `json:"out_no"`
}

// Kind names the job.
func (ShareArgs) Kind() string { return "sharing.share" }

// CompletedTx records, in the transaction that completes the order, the
// share of its payment and the job that sends it (once the payment is
// AfterPay old). A payment that is not frozen for sharing has none.
func (s *Service) CompletedTx(ctx context.Context, tx pgx.Tx, orderID int64) error {
	pays, err := s.q.PaymentsByOrder(ctx, tx, orderID)
	if err != nil {
		return fmt.Errorf("read payments: %w", err)
	}
	for _, p := range pays {
		if p.ProfitSharing && p.Status == paystate.Paid {
			m, err := s.q.MerchantSubMerchantOfOrder(ctx, tx, orderID)
			if err != nil {
				return fmt.Errorf("read merchant: %w", err)
			}
			return s.scheduleTx(ctx, tx, p, m.ID, CauseCompleted, 1)
		}
	}
	return nil
}

// scheduleTx records attempt of p's share and inserts its job; a share
// already recorded is left alone.
func (s *Service) scheduleTx(ctx context.Context, tx pgx.Tx, p dbsqlc.Payment, merchantID int64, cause string, attempt int32) error {
	sh, err := s.q.SharingInsert(ctx, tx, dbsqlc.SharingInsertParams{Kind: KindShare, PaymentID: p.ID, OrderID: p.OrderID,
		MerchantID: merchantID, Attempt: attempt, OutNo: ShareNo(p.OutTradeNo, attempt), Cause: cause})
	if errors.Is(err, db.ErrNotFound) {
		return nil // shared, or being shared, already
	}
	if err != nil {
		return fmt.Errorf("record share: %w", err)
	}
	// Due now, the job is available at once to any instance (a scheduled
	// one waits for the leader to make it available).
	opts := &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
	if p.PaidAt != nil && p.PaidAt.Add(s.o.AfterPay).After(s.o.Now()) {
		opts.ScheduledAt = p.PaidAt.Add(s.o.AfterPay)
	}
	if _, err := s.o.Jobs.InsertTx(ctx, tx, ShareArgs{OutNo: sh.OutNo}, opts); err != nil {
		return fmt.Errorf("insert share job: %w", err)
	}
	return nil
}

// ShareWorker sends a share and follows it until WeChat Pay says how it
// ended.
type ShareWorker struct {
	river.WorkerDefaults[ShareArgs]
	S *Service
}

// Work moves the share one step: sends it, or asks how it went.
func (w *ShareWorker) Work(ctx context.Context, job *river.Job[ShareArgs]) error {
	wait, err := w.S.Advance(ctx, job.Args.OutNo)
	if err != nil {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	return nil
}

// Advance moves the share outNo one step and returns how long to wait
// before the next (0: it ended). It is safe to run concurrently and
// repeatedly: the request is recorded as sent once, its number makes
// WeChat Pay take it once, and its end is recorded once.
func (s *Service) Advance(ctx context.Context, outNo string) (time.Duration, error) {
	sh, err := s.q.SharingGetByOutNo(ctx, s.o.Pool, outNo)
	if err != nil {
		return 0, fmt.Errorf("read share %s: %w", outNo, err)
	}
	p, err := s.q.PaymentGetByID(ctx, s.o.Pool, sh.PaymentID)
	if err != nil {
		return 0, fmt.Errorf("read payment: %w", err)
	}
	switch sh.Status {
	case StatusPending:
		wait, sent, err := s.markSent(ctx, sh, p)
		if err != nil || wait > 0 {
			return wait, err
		}
		if sh, err = s.q.SharingGetByOutNo(ctx, s.o.Pool, outNo); err != nil {
			return 0, err
		}
		if !sent && sh.Status != StatusProcessing {
			return 0, nil // ended meanwhile (nothing was frozen)
		}
		return s.send(ctx, sh, p)
	case StatusProcessing:
		if sh.WxID == nil {
			return s.send(ctx, sh, p) // its answer was lost: the same request again
		}
		got, err := s.o.Client.QueryShare(ctx, payment.SubOf(p), derefOr(p.TransactionID), sh.OutNo)
		if err != nil {
			return 0, err
		}
		return s.shareAnswered(ctx, sh, p, got)
	}
	return 0, nil // ended
}

// markSent fixes the share's figures from the ledger and marks it sent,
// under the payment's row (on which refunds take their turns): a share
// waits for refunds already sent, and refunds not sent wait for it.
func (s *Service) markSent(ctx context.Context, sh dbsqlc.ProfitSharing, p dbsqlc.Payment) (wait time.Duration, sent bool, err error) {
	err = db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		if _, err := s.q.SharingPaymentForUpdate(ctx, tx, p.ID); err != nil {
			return fmt.Errorf("lock payment: %w", err)
		}
		now := s.o.Now()
		if p.PaidAt != nil && p.PaidAt.Add(s.o.AfterPay).After(now) {
			wait = p.PaidAt.Add(s.o.AfterPay).Sub(now)
			return nil
		}
		busy, err := s.q.SharingRefundsSentUnfinished(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if busy > 0 {
			wait = s.o.Poll
			return nil
		}
		fig, err := s.q.SharingPaymentFigures(ctx, tx, &p.ID)
		if err != nil {
			return fmt.Errorf("read the ledger: %w", err)
		}
		if fig.FrozenFen <= 0 {
			// Refunded in full: nothing is frozen, nothing to share.
			_, err := s.q.SharingFinish(ctx, tx, dbsqlc.SharingFinishParams{ID: sh.ID, Status: StatusSuccess, FinishedAt: &now})
			if errors.Is(err, db.ErrNotFound) {
				err = nil
			}
			return err
		}
		commission := min(max(fig.CommissionFen, 0), fig.FrozenFen)
		n, err := s.q.SharingMarkSent(ctx, tx, dbsqlc.SharingMarkSentParams{ID: sh.ID, AmountFen: commission, UnfrozenFen: fig.FrozenFen - commission, SentAt: &now})
		sent = n == 1
		return err
	})
	return wait, sent, err
}

// send asks WeChat Pay for the share (or, with no commission, for the
// unfreeze of everything) and records its answer.
func (s *Service) send(ctx context.Context, sh dbsqlc.ProfitSharing, p dbsqlc.Payment) (time.Duration, error) {
	sub, txn := payment.SubOf(p), derefOr(p.TransactionID)
	var got payment.SharingOrder
	var err error
	if sh.AmountFen > 0 {
		got, err = s.o.Client.Share(ctx, payment.ShareRequest{Sub: sub, TransactionID: txn, OutOrderNo: sh.OutNo, AmountFen: sh.AmountFen,
			Description: "commission of order " + strconv.FormatInt(sh.OrderID, 10)})
	} else {
		got, err = s.o.Client.Unfreeze(ctx, sub, txn, sh.OutNo, "no commission: all to the merchant")
	}
	if err != nil {
		if code, final := refusal(err); final {
			return 0, s.finish(ctx, sh, StatusFailed, code, nil)
		}
		return 0, err
	}
	return s.shareAnswered(ctx, sh, p, got)
}

// shareAnswered records what WeChat Pay says of a share: its id, and its
// end once it FINISHED.
func (s *Service) shareAnswered(ctx context.Context, sh dbsqlc.ProfitSharing, p dbsqlc.Payment, got payment.SharingOrder) (time.Duration, error) {
	if got.OrderID != "" && sh.WxID == nil {
		if err := s.q.SharingSetWxID(ctx, s.o.Pool, dbsqlc.SharingSetWxIDParams{ID: sh.ID, WxID: &got.OrderID}); err != nil {
			return 0, err
		}
	}
	if got.State != payment.SharingFinished {
		return s.o.Poll, nil
	}
	var unfrozen *int64
	for _, r := range got.Receivers {
		if r.Account == derefOr(p.SubMchid) && r.Result == payment.ReceiverSuccess {
			unfrozen = &r.Amount // what went to the merchant itself
		}
	}
	for _, r := range got.Receivers {
		if r.Account != derefOr(p.SubMchid) && r.Result == payment.ReceiverClosed {
			return 0, s.finish(ctx, sh, StatusFailed, r.FailReason, nil)
		}
	}
	return 0, s.finish(ctx, sh, StatusSuccess, "", unfrozen)
}

// finish records a request's end once (its success posts its ledger
// journal, by trigger) and counts it.
func (s *Service) finish(ctx context.Context, sh dbsqlc.ProfitSharing, status, reason string, unfrozen *int64) error {
	now := s.o.Now()
	var why *string
	if reason != "" {
		why = &reason
	}
	_, err := s.q.SharingFinish(ctx, s.o.Pool, dbsqlc.SharingFinishParams{ID: sh.ID, Status: status, FailReason: why, FinishedAt: &now, UnfrozenFen: unfrozen})
	if errors.Is(err, db.ErrNotFound) {
		return nil // ended already
	}
	if err != nil {
		return fmt.Errorf("record the end of %s: %w", sh.OutNo, err)
	}
	outcome := "success"
	if status == StatusFailed {
		outcome = "failed"
		s.o.Logger.WarnContext(ctx, "profit sharing failed: an operator retries it (docs/operations.md)", "kind", sh.Kind, "out_no", sh.OutNo, "reason", reason)
	}
	s.requests.WithLabelValues(sh.Kind, outcome).Inc()
	return nil
}

// refusal reads a signed error answer of the sharing APIs: the codes that
// end the request (it FAILED, for an operator) as against those worth
// the same request again (the platform's trouble, too fast).
func refusal(err error) (code string, final bool) {
	var api *payment.APIError
	if !errors.As(err, &api) || !api.Signed || api.Status >= 500 {
		return "", false
	}
	switch api.Code {
	case "SYSTEM_ERROR", "FREQUENCY_LIMITED", "RATELIMIT_EXCEED":
		return "", false
	}
	return api.Code, true
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
