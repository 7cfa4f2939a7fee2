// Package shipping tells WeChat how each paid order went out, for
// mini-programs whose payments WeChat holds until it knows
// (upload_shipping_info): same-city delivery when the order is
// dispatched, collected by the customer when it is picked up.
//
// Exactly once per payment: the transaction that dispatches or hands over
// the order writes the upload's row and its job (the outbox: never after
// the commit, and once however often the transition is retried); the job
// uploads, and after a try whose outcome it could not know (a timeout,
// WeChat busy) it asks WeChat (get_order) before uploading again, so a
// payment is never shipped twice. WeChat's refusals are final and kept
// for operators (GET /admin/v1/shipping?status=refused), as are uploads
// that ran out of tries (status=failed); an operator can queue either
// again.
package shipping

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// WeChat's logistics types takeout uploads.
const (
	LogisticsSameCity = 2 // 同城配送: dispatched to a rider
	LogisticsPickup   = 4 // 用户自提: collected at the counter
)

// The statuses of an upload.
const (
	StatusPending  = "pending"
	StatusUploaded = "uploaded"
	StatusRefused  = "refused"
	StatusFailed   = "failed"
	StatusSkipped  = "skipped"
)

// Tokens hands out the mini-program's access token (subscribemsg's
// AccessTokens, shared by every instance).
type Tokens interface {
	Token(ctx context.Context) (string, error)
	Refresh(ctx context.Context, bad string) (string, error)
}

// JobInserter inserts a job in a transaction (a River client).
type JobInserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Options configure a Service.
type Options struct {
	Pool *pgxpool.Pool
	Jobs JobInserter
	// Base is the WeChat API's address.
	Base   string
	Tokens Tokens
	// HTTP calls WeChat; untraced, as its URLs carry the access token.
	HTTP       *http.Client
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// MaxAttempts bounds an upload's job attempts; the last one that
	// fails marks the upload failed.
	MaxAttempts int
	Now         func() time.Time
}

// Service queues and uploads shipping information.
type Service struct {
	opts    Options
	q       *dbsqlc.Queries
	uploads *prometheus.CounterVec
}

// NewService returns a Service.
func NewService(opts Options) (*Service, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 25
	}
	s := &Service{opts: opts, q: dbsqlc.New(), uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "takeout_shipping_uploads_total",
		Help: "Shipping information uploads to WeChat by outcome: uploaded, found (WeChat already had it), refused, failed (a try; retried), gave_up, skipped (no WeChat payment).",
	}, []string{"outcome"})}
	for _, o := range []string{"uploaded", "found", "refused", "failed", "gave_up", "skipped"} {
		s.uploads.WithLabelValues(o) // exported at 0 from the start: an alert sees the first
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(s.uploads); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Args is the job that uploads one order's shipping information.
type Args struct {
	OrderID int64 `json:"order_id,string"`
}

// Kind names the job.
func (Args) Kind() string { return "shipping.upload" }

// QueueTx writes the upload an order owes in tx, the transaction that
// dispatches it (pickup false) or hands it over at the counter (pickup
// true), with its job; a second call for the order writes nothing.
func (s *Service) QueueTx(ctx context.Context, tx pgx.Tx, orderID int64, pickup bool) error {
	kind := int16(LogisticsSameCity)
	if pickup {
		kind = LogisticsPickup
	}
	n, err := s.q.ShippingUploadQueue(ctx, tx, dbsqlc.ShippingUploadQueueParams{OrderID: orderID, LogisticsType: kind})
	if err != nil {
		return fmt.Errorf("queue shipping upload: %w", err)
	}
	if n == 0 {
		return nil
	}
	return s.insertJob(ctx, tx, orderID, true)
}

// uploadUnique keeps one job per order waiting or running (a second
// transition's insert, in case one ever gets past the row's).
var uploadUnique = river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{ //nolint:gochecknoglobals // a constant of River's type
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}}

func (s *Service) insertJob(ctx context.Context, tx pgx.Tx, orderID int64, unique bool) error {
	opts := &river.InsertOpts{MaxAttempts: s.opts.MaxAttempts}
	if unique {
		opts.UniqueOpts = uploadUnique
	}
	if _, err := s.opts.Jobs.InsertTx(ctx, tx, Args{OrderID: orderID}, opts); err != nil {
		return fmt.Errorf("insert shipping upload job: %w", err)
	}
	return nil
}

// WeChat's codes that decide what happens next.
const (
	codeOK             = 0
	codeBusy           = -1
	codeInvalidToken   = 40001
	codeInvalidToken2  = 40014
	codeExpiredToken   = 42001
	codeAlreadyShipped = 10060002 // 支付单已完成发货: the one upload was taken
	codeSystemBusy     = 10060012
	codeSystemBusy2    = 10060019
)

// retryable reports whether WeChat may take the upload later.
func retryable(code int) bool {
	switch code {
	case codeBusy, codeSystemBusy, codeSystemBusy2:
		return true
	}
	return false
}

// errUnknown is a try whose outcome is unknown (no answer): the next
// asks WeChat first.
var errUnknown = errors.New("no answer from WeChat")

// errLeased is a run that found another holding the upload.
var errLeased = errors.New("another try holds the upload")

// leaseFor is how long a try holds its upload: longer than the job's
// timeout, so a try that dies frees it only after it surely stopped.
const leaseFor = time.Minute

// Upload runs one try of an order's upload; attempt counts the job's
// tries (1 first). It returns an error to be retried.
func (s *Service) Upload(ctx context.Context, orderID int64, attempt, maxAttempts int) error {
	subj, err := s.q.ShippingUploadSubject(ctx, s.opts.Pool, orderID)
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read shipping upload: %w", err)
	}
	if subj.Status != StatusPending {
		return nil // settled by an earlier try
	}
	now := s.opts.Now()
	leased, err := s.q.ShippingUploadLease(ctx, s.opts.Pool, dbsqlc.ShippingUploadLeaseParams{OrderID: orderID, Until: now.Add(leaseFor), Now: now})
	if err != nil {
		return fmt.Errorf("lease shipping upload: %w", err)
	}
	if leased == 0 {
		// Another run holds it (or just settled it): this one tries
		// again later, and finds it settled or free.
		return errLeased
	}
	if subj.OutTradeNo == "" {
		// Nothing WeChat holds: paid another way, or not through WeChat.
		return s.settle(ctx, orderID, StatusSkipped, 0, nil, "no WeChat payment")
	}
	tok, err := s.opts.Tokens.Token(ctx)
	if err != nil {
		return s.tried(ctx, orderID, attempt, maxAttempts, nil, fmt.Errorf("access token: %w", err))
	}
	if subj.Tries > 0 || attempt > 1 {
		// An earlier try may have been taken without our knowing: ask.
		shipped, code, err := s.shipped(ctx, tok, subj)
		switch {
		case err != nil:
			return s.tried(ctx, orderID, attempt, maxAttempts, nil, err)
		case code != codeOK:
			return s.tried(ctx, orderID, attempt, maxAttempts, &code, fmt.Errorf("get_order: errcode %d", code))
		case shipped:
			s.uploads.WithLabelValues("found").Inc()
			return s.settle(ctx, orderID, StatusUploaded, 1, nil, "")
		}
	}
	code, msg, err := s.post(ctx, "/wxa/sec/order/upload_shipping_info", tok, uploadBody(subj, s.opts.Now()))
	if err == nil && (code == codeInvalidToken || code == codeInvalidToken2 || code == codeExpiredToken) {
		if tok, err = s.opts.Tokens.Refresh(ctx, tok); err == nil {
			code, msg, err = s.post(ctx, "/wxa/sec/order/upload_shipping_info", tok, uploadBody(subj, s.opts.Now()))
		}
	}
	switch {
	case err != nil:
		return s.tried(ctx, orderID, attempt, maxAttempts, nil, err)
	case code == codeOK:
		s.uploads.WithLabelValues("uploaded").Inc()
		return s.settle(ctx, orderID, StatusUploaded, 1, nil, "")
	case code == codeAlreadyShipped:
		// Taken before (a try whose answer was lost): shipped once.
		s.uploads.WithLabelValues("found").Inc()
		return s.settle(ctx, orderID, StatusUploaded, 1, &code, msg)
	case retryable(code):
		return s.tried(ctx, orderID, attempt, maxAttempts, &code, fmt.Errorf("upload_shipping_info: errcode %d: %s", code, msg))
	}
	s.uploads.WithLabelValues("refused").Inc()
	s.opts.Logger.WarnContext(ctx, "WeChat refused a shipping upload", "order_id", orderID, "errcode", code, "errmsg", msg)
	return s.settle(ctx, orderID, StatusRefused, 1, &code, msg)
}

// tried records a try that did not settle the upload and returns its
// error for River to retry; the last attempt marks it failed instead.
func (s *Service) tried(ctx context.Context, orderID int64, attempt, maxAttempts int, code *int, cause error) error {
	var c *int32
	if code != nil {
		v := int32(*code) //nolint:gosec // G115: WeChat's codes fit
		c = &v
	}
	if attempt >= maxAttempts {
		s.uploads.WithLabelValues("gave_up").Inc()
		s.opts.Logger.ErrorContext(ctx, "shipping upload gave up", "order_id", orderID, "err", cause)
		if _, err := s.q.ShippingUploadSettle(ctx, s.opts.Pool, dbsqlc.ShippingUploadSettleParams{
			OrderID: orderID, Status: StatusFailed, Tried: 1, Errcode: c, LastError: truncate(cause.Error()),
		}); err != nil {
			return fmt.Errorf("record shipping upload: %w", err)
		}
		return nil
	}
	s.uploads.WithLabelValues("failed").Inc()
	if err := s.q.ShippingUploadTried(ctx, s.opts.Pool, dbsqlc.ShippingUploadTriedParams{
		OrderID: orderID, LastError: truncate(cause.Error()), Errcode: c,
	}); err != nil {
		return errors.Join(cause, fmt.Errorf("record shipping upload: %w", err))
	}
	return cause
}

func (s *Service) settle(ctx context.Context, orderID int64, status string, tried int32, code *int, msg string) error {
	var c *int32
	if code != nil {
		v := int32(*code) //nolint:gosec // G115: WeChat's codes fit
		c = &v
	}
	if status == StatusSkipped {
		s.uploads.WithLabelValues("skipped").Inc()
	}
	if _, err := s.q.ShippingUploadSettle(ctx, s.opts.Pool, dbsqlc.ShippingUploadSettleParams{
		OrderID: orderID, Status: status, Tried: tried, Errcode: c, LastError: truncate(msg),
	}); err != nil {
		return fmt.Errorf("record shipping upload: %w", err)
	}
	return nil
}

func truncate(s string) string {
	if utf8.RuneCountInString(s) > 500 {
		return string([]rune(s)[:500])
	}
	return s
}

// uploadBody is the upload of subj, as WeChat documents it: the payment
// by merchant and out_trade_no, unified delivery, one entry describing
// the goods (at most 120 characters).
func uploadBody(subj dbsqlc.ShippingUploadSubjectRow, now time.Time) map[string]any {
	desc := subj.MerchantName + ": " + subj.Items
	if utf8.RuneCountInString(desc) > 120 {
		desc = string([]rune(desc)[:119]) + "…"
	}
	return map[string]any{
		"order_key":      map[string]any{"order_number_type": 1, "mchid": subj.Mchid, "out_trade_no": subj.OutTradeNo},
		"logistics_type": subj.LogisticsType,
		"delivery_mode":  1,
		"shipping_list":  []map[string]any{{"item_desc": desc}},
		"upload_time":    now.In(chinaTime).Format("2006-01-02T15:04:05.000Z07:00"),
		"payer":          map[string]string{"openid": subj.Openid},
	}
}

// chinaTime is UTC+8, the clock WeChat's examples write.
var chinaTime = time.FixedZone("CST", 8*3600)

// shipped asks WeChat whether the payment has been shipped (order_state
// 2 and on: shipped, received, done).
func (s *Service) shipped(ctx context.Context, tok string, subj dbsqlc.ShippingUploadSubjectRow) (bool, int, error) {
	var out struct {
		Order struct {
			State int `json:"order_state"`
		} `json:"order"`
	}
	code, _, err := s.postInto(ctx, "/wxa/sec/order/get_order", tok,
		map[string]string{"merchant_id": subj.Mchid, "merchant_trade_no": subj.OutTradeNo}, &out)
	if err != nil || code != codeOK {
		return false, code, err
	}
	return out.Order.State >= 2, codeOK, nil
}

func (s *Service) post(ctx context.Context, path, tok string, body any) (int, string, error) {
	return s.postInto(ctx, path, tok, body, nil)
}

// postInto posts body to WeChat and reads its errcode (and out, when
// given); an error is a call whose outcome is unknown.
func (s *Service) postInto(ctx context.Context, path, tok string, body, out any) (int, string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.opts.Base+path+"?access_token="+url.QueryEscape(tok), bytes.NewReader(b))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.opts.HTTP.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL carries the token: keep it out
		}
		return 0, "", fmt.Errorf("%s: %w: %w", path, errUnknown, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w: %w", path, errUnknown, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("%s: %w: HTTP %d", path, errUnknown, resp.StatusCode)
	}
	var e struct {
		Code int    `json:"errcode"`
		Msg  string `json:"errmsg"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return 0, "", fmt.Errorf("%s: %w: %w", path, errUnknown, err)
	}
	if out != nil && e.Code == codeOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return 0, "", fmt.Errorf("%s: %w", path, err)
		}
	}
	return e.Code, e.Msg, nil
}

// Worker runs the upload jobs.
type Worker struct {
	river.WorkerDefaults[Args]
	S *Service
}

// Work runs one try.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	return w.S.Upload(ctx, job.Args.OrderID, job.Attempt, job.MaxAttempts)
}

// Timeout bounds one try (a token refresh, a query and an upload).
func (w *Worker) Timeout(*river.Job[Args]) time.Duration { return 30 * time.Second }
