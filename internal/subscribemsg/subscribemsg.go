// Package subscribemsg sends customers WeChat subscribe messages
// (subscribeMessage.send) when their order is accepted, dispatched,
// completed, cancelled or refunded.
//
// The mini-program asks the customer with wx.requestSubscribeMessage and
// reports the template ids they accepted for the order; each acceptance
// allows one message. A status change with a template (configured per
// status) that the customer granted queues one River job in the
// transition's transaction, unique per order and status; the job takes
// the grant, sends, and records the outcome, so a retried job never sends
// a second message once the first is known to have gone. WeChat's answer
// 43101 (the user refused, or has no subscription left) is final.
package subscribemsg

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
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/statemachine"
)

// Statuses are the order statuses a customer may be messaged about.
var Statuses = []statemachine.Status{statemachine.Accepted, statemachine.Ready, statemachine.Delivering, statemachine.Completed, statemachine.Cancelled, statemachine.Refunded}

// JobInserter inserts a job in a transaction (a River client).
type JobInserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Options configure a Sender.
type Options struct {
	Pool *pgxpool.Pool
	Jobs JobInserter
	// Templates maps a status to its template id; a status without one
	// sends nothing.
	Templates map[statemachine.Status]string
	// Base is the WeChat API's address; State the mini-program version a
	// message opens (formal, trial or developer).
	Base, State string
	Tokens      *AccessTokens
	HTTP        *http.Client
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
	// MaxAttempts bounds a message's job attempts.
	MaxAttempts int
}

// Sender queues and sends subscribe messages.
type Sender struct {
	opts  Options
	q     *dbsqlc.Queries
	known map[string]bool // the configured template ids
	sent  *prometheus.CounterVec
}

// Outcomes of a message.
const (
	OutcomeSent     = "sent"
	OutcomeRefused  = "refused"  // 43101: the customer refused or has no subscription left
	OutcomeRejected = "rejected" // WeChat will never take it (bad template, openid or data)
)

// NewSender returns a Sender.
func NewSender(o Options) (*Sender, error) {
	s := &Sender{opts: o, q: dbsqlc.New(), known: map[string]bool{},
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_subscribe_messages_total", Help: "Customer subscribe messages by status and outcome (sent, refused, rejected, failed: retried).",
		}, []string{"status", "outcome"})}
	for _, t := range o.Templates {
		s.known[t] = true
	}
	for _, st := range Statuses {
		for _, oc := range []string{OutcomeSent, OutcomeRefused, OutcomeRejected, "failed"} {
			s.sent.WithLabelValues(string(st), oc)
		}
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(s.sent); err != nil {
			return nil, fmt.Errorf("register subscribe message metrics: %w", err)
		}
	}
	return s, nil
}

// Enabled reports whether any status has a template.
func (s *Sender) Enabled() bool { return len(s.known) > 0 }

// Known reports whether templateID is one of the configured templates.
func (s *Sender) Known(templateID string) bool { return s.known[templateID] }

// Args is the job of one order's message for one status.
type Args struct {
	OrderID int64               `json:"order_id,string"`
	Status  statemachine.Status `json:"status"`
}

// Kind names the job.
func (Args) Kind() string { return "subscribemsg.send" }

// Queues reports whether a change to status may queue a message: a
// template is configured for it.
func (s *Sender) Queues(status statemachine.Status) bool { return s.opts.Templates[status] != "" }

// Enqueue queues the message of orderID's new status within tx, when the
// status has a template the customer granted and no other status took.
func (s *Sender) Enqueue(ctx context.Context, tx pgx.Tx, orderID int64, status statemachine.Status) error {
	tpl := s.opts.Templates[status]
	if tpl == "" {
		return nil
	}
	granted, err := s.q.OrderSubscriptionGranted(ctx, tx, dbsqlc.OrderSubscriptionGrantedParams{OrderID: orderID, TemplateID: tpl, Status: string(status)})
	if err != nil {
		return fmt.Errorf("read subscription: %w", err)
	}
	if !granted {
		return nil
	}
	if _, err := s.opts.Jobs.InsertTx(ctx, tx, Args{OrderID: orderID, Status: status}, &river.InsertOpts{
		MaxAttempts: s.opts.MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true},
	}); err != nil {
		return fmt.Errorf("insert subscribe message job: %w", err)
	}
	return nil
}

// Worker sends queued messages.
type Worker struct {
	river.WorkerDefaults[Args]
	S *Sender
}

// Work takes the grant, sends the message and records how it went. A
// failure that may pass (WeChat down, slow, busy) returns an error, so
// River retries it.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	s := w.S
	tpl := s.opts.Templates[job.Args.Status]
	if tpl == "" {
		return nil
	}
	key := dbsqlc.OrderSubscriptionTakeParams{OrderID: job.Args.OrderID, TemplateID: tpl, Status: string(job.Args.Status)}
	outcome, err := s.q.OrderSubscriptionTake(ctx, s.opts.Pool, key)
	if errors.Is(err, db.ErrNotFound) {
		return nil // another status's message took the grant
	}
	if err != nil {
		return fmt.Errorf("take subscription: %w", err)
	}
	if outcome != nil {
		return nil // sent (or settled) by an earlier run
	}
	subj, err := s.q.SubscribeMessageSubject(ctx, s.opts.Pool, job.Args.OrderID)
	if err != nil {
		return fmt.Errorf("read order: %w", err)
	}
	code, err := s.send(ctx, tpl, job.Args.Status, subj)
	if err != nil {
		s.sent.WithLabelValues(string(job.Args.Status), "failed").Inc()
		return err
	}
	result := OutcomeSent
	switch {
	case code == errRefused:
		result = OutcomeRefused
	case code != 0:
		result = OutcomeRejected
		s.opts.Logger.WarnContext(ctx, "WeChat rejected a subscribe message", "order_id", job.Args.OrderID, "status", job.Args.Status, "errcode", code)
	}
	if err := s.q.OrderSubscriptionFinish(ctx, s.opts.Pool, dbsqlc.OrderSubscriptionFinishParams{
		OrderID: key.OrderID, TemplateID: tpl, Status: key.Status, Outcome: &result,
	}); err != nil {
		return fmt.Errorf("record subscribe message: %w", err)
	}
	s.sent.WithLabelValues(string(job.Args.Status), result).Inc()
	return nil
}

// Timeout bounds one attempt (a token refresh and two sends).
func (w *Worker) Timeout(*river.Job[Args]) time.Duration { return 30 * time.Second }

// WeChat's error codes that decide what happens next.
const (
	errRefused         = 43101 // user refused, or no subscription left: final
	errInvalidToken    = 40001
	errInvalidTokenAlt = 40014
	errExpiredToken    = 42001
	errBusy            = -1
)

// final reports whether WeChat will answer code again whatever we do.
func final(code int) bool {
	switch code {
	case errRefused, 40003, 40037, 47003, 41030: // refused; bad openid, template, data, page
		return true
	}
	return false
}

// send sends the message, refreshing the token once if WeChat calls it
// invalid; it returns WeChat's final code (0 when sent), or an error to
// retry.
func (s *Sender) send(ctx context.Context, tpl string, status statemachine.Status, subj dbsqlc.SubscribeMessageSubjectRow) (int, error) {
	tok, err := s.opts.Tokens.Token(ctx)
	if err != nil {
		return 0, err
	}
	msg := message(tpl, s.opts.State, status, subj)
	code, err := s.post(ctx, tok, msg)
	if err == nil && (code == errInvalidToken || code == errInvalidTokenAlt || code == errExpiredToken) {
		if tok, err = s.opts.Tokens.Refresh(ctx, tok); err != nil {
			return 0, err
		}
		code, err = s.post(ctx, tok, msg)
	}
	switch {
	case err != nil:
		return 0, err
	case code == 0 || final(code):
		return code, nil
	default:
		return 0, fmt.Errorf("subscribeMessage.send: errcode %d", code)
	}
}

// statusText is what a message says of a status (the template's phrase
// field takes at most 5 Chinese characters).
var statusText = map[statemachine.Status]string{
	statemachine.Accepted: "商家已接单", statemachine.Ready: "已出餐", statemachine.Delivering: "配送中", statemachine.Completed: "已送达",
	statemachine.Cancelled: "已取消", statemachine.Refunded: "已退款",
}

// pickupText is what a message says instead to a customer who collects
// the order: come and get it, and collected.
var pickupText = map[statemachine.Status]string{statemachine.Ready: "请取餐", statemachine.Completed: "已取餐"}

// deadlineText is what a message says instead when the merchant's accept
// deadline, not the merchant, decided: accepted automatically, or
// refunded because nobody accepted the order in time (Meituan's "超时未接单").
var deadlineText = map[string]map[statemachine.Status]string{
	"accept": {statemachine.Accepted: "已自动接单"},
	"reject": {statemachine.Refunded: "超时未接单"},
}

// phrase is the message's status phrase.
func phrase(status statemachine.Status, deadlineDid, fulfilment string) string {
	if t, ok := deadlineText[deadlineDid][status]; ok {
		return t
	}
	if t, ok := pickupText[status]; ok && fulfilment == "pickup" {
		return t
	}
	return statusText[status]
}

// message is the request body. The template's keywords must be
// character_string1 (order number), phrase2 (status), thing3 (merchant)
// and time4 (when it changed).
func message(tpl, state string, status statemachine.Status, subj dbsqlc.SubscribeMessageSubjectRow) map[string]any {
	merchant := subj.MerchantName
	if utf8.RuneCountInString(merchant) > 20 {
		merchant = string([]rune(merchant)[:19]) + "…"
	}
	id := strconv.FormatInt(subj.ID, 10)
	return map[string]any{
		"touser": subj.Openid, "template_id": tpl, "page": "pages/order/detail?id=" + id,
		"miniprogram_state": state, "lang": "zh_CN",
		"data": map[string]map[string]string{
			"character_string1": {"value": id},
			"phrase2":           {"value": phrase(status, subj.AcceptDeadlineDid, subj.Fulfilment)},
			"thing3":            {"value": merchant},
			"time4":             {"value": subj.UpdatedAt.In(chinaTime).Format("2006-01-02 15:04")},
		},
	}
}

// chinaTime is UTC+8, WeChat's customers' clock.
var chinaTime = time.FixedZone("CST", 8*3600)

func (s *Sender) post(ctx context.Context, token string, msg map[string]any) (int, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return 0, err
	}
	u := s.opts.Base + "/cgi-bin/message/subscribe/send?access_token=" + url.QueryEscape(token)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.opts.HTTP.Do(req)
	if err != nil {
		// The URL carries the token: keep it out of the error.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("subscribeMessage.send: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, fmt.Errorf("subscribeMessage.send: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("subscribeMessage.send: HTTP %d", resp.StatusCode)
	}
	var out struct {
		ErrCode int `json:"errcode"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, fmt.Errorf("subscribeMessage.send: %w", err)
	}
	if out.ErrCode == errBusy {
		return 0, errors.New("subscribeMessage.send: WeChat busy (-1)")
	}
	return out.ErrCode, nil
}
