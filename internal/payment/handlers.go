package payment

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/paystate"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// ErrDisabled answers payment routes when WeChat Pay is not configured.
var ErrDisabled = problem.New(problem.Unavailable, "payments are not configured on this server")

// HandlePay serves POST /v1/orders/{id}/pay.
func HandlePay(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			web.Error(w, r, ErrDisabled)
			return
		}
		userID, _ := auth.UserID(r.Context())
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			web.Error(w, r, problem.New(problem.NotFound, "no such order"))
			return
		}
		web.AddLogAttrs(r.Context(), slog.Int64("order_id", id))
		rp, err := s.Pay(r.Context(), userID, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, rp)
	})
}

// notifyFail answers a v3 notification with the platform's failure shape;
// the platform retries.
func notifyFail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": "FAIL", "message": msg})
}

// callbackBody reads a callback's body up to limit bytes, reporting false
// when it is larger or cannot be read (the caller answers in the
// platform's shape). It reads into one buffer of the announced length
// (web.ReadBody), not one grown by io.ReadAll.
func callbackBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if r.ContentLength > limit {
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	body, err := web.ReadBody(r)
	return body, err == nil
}

// HandleNotifyV3 serves POST /v1/payments/wechat/notify: the body, read
// within its limit, and the signed headers go to Service.NotifyV3, whose
// result is answered in the platform's shape: 204 once the effect
// committed, {"code":"FAIL"} with the problem's status otherwise (503
// while the same transaction is being applied here: the platform
// retries; on another instance a copy waits on the payment's row lock,
// then is a duplicate).
func HandleNotifyV3(s *Service, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			notifyFail(w, http.StatusServiceUnavailable, "payments are not configured")
			return
		}
		if web.CheckQuery(r) != nil {
			notifyFail(w, http.StatusBadRequest, "malformed query string")
			return
		}
		body, ok := callbackBody(w, r, maxBody)
		if !ok {
			notifyFail(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		err := s.NotifyV3(r.Context(), wxpay.SignedHeaders{
			Timestamp: r.Header.Get("Wechatpay-Timestamp"), Nonce: r.Header.Get("Wechatpay-Nonce"),
			Serial: r.Header.Get("Wechatpay-Serial"), Signature: r.Header.Get("Wechatpay-Signature"),
		}, body)
		if err != nil {
			status, msg := notifyAnswer(r, err)
			notifyFail(w, status, msg)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// notifyAnswer maps NotifyV3's or NotifyV2's error to the status and
// message of the platform's failure answer; a 500's cause is logged, not
// told. PostgreSQL down, a transaction it aborted (a deadlock), or the
// platform hanging up before the answer is 503 as on every other route:
// nothing was written, and the platform's retry is the remedy.
func notifyAnswer(r *http.Request, err error) (int, string) {
	p, ok := problem.As(err)
	switch {
	case errors.Is(err, ErrInFlight):
		// Expected under concurrent deliveries: the platform retries.
		web.Expected(r.Context())
		return http.StatusServiceUnavailable, "processing; retry"
	case web.ClientGone(r, err):
		// The platform hung up first (its own timeout): nothing was
		// written, and it delivers again.
		web.Expected(r.Context())
		return http.StatusServiceUnavailable, "cancelled; retry"
	case ok && p.Type.Status < 500:
		return p.Type.Status, p.Detail
	case ok && p.Type == problem.Unavailable:
		return http.StatusServiceUnavailable, p.Detail
	case db.Unavailable(err):
		web.Logger(r.Context()).WarnContext(r.Context(), "payment notification failed: database unavailable; the platform retries", "err", err)
		return http.StatusServiceUnavailable, "temporarily unavailable; retry"
	default:
		web.Logger(r.Context()).ErrorContext(r.Context(), "payment notification failed", "err", err)
		return http.StatusInternalServerError, "temporary failure; retry"
	}
}

// RefundActionRequest is the body of the refund retry and settle routes:
// what the operator did or saw, kept with the refund.
type RefundActionRequest struct {
	Note string `json:"note"`
}

// Validate checks the request's values.
func (r *RefundActionRequest) Validate() error {
	if n := utf8.RuneCountInString(r.Note); n == 0 || n > 500 {
		return problem.Field("note", "required, at most 500 characters: say what was done (e.g. refunded by bank transfer, ref 123)")
	}
	return nil
}

// HandleRefunds serves GET /admin/v1/refunds?status=&cursor=&limit=:
// refunds in a status (FAILED, those needing attention, by default),
// oldest first.
func HandleRefunds(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			web.Error(w, r, ErrDisabled)
			return
		}
		q, err := web.Query(r, "status", "cursor", "limit")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		status := paystate.Failed
		if v := q.Get("status"); v != "" {
			if !slices.Contains(paystate.RefundStatuses(), paystate.Refund(v)) {
				web.Error(w, r, problem.New(problem.InvalidRequest, "query parameter status: want one of %v", paystate.RefundStatuses()).With("parameter", "status"))
				return
			}
			status = paystate.Refund(v)
		}
		limit := 50
		if v := q.Get("limit"); v != "" {
			if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 200 {
				web.Error(w, r, problem.New(problem.InvalidRequest, "query parameter limit: must be between 1 and 200").With("parameter", "limit"))
				return
			}
		}
		var after int64
		if v := q.Get("cursor"); v != "" {
			if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
				web.Error(w, r, problem.New(problem.InvalidRequest, "query parameter cursor: not a cursor this API returned").With("parameter", "cursor"))
				return
			}
		}
		page, err := s.Refunds(r.Context(), status, after, limit)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, page)
	})
}

// HandleRefundAction serves POST /admin/v1/refunds/{out_refund_no}/retry
// and /settle: act (RetryRefund or SettleRefund) on a FAILED refund.
func HandleRefundAction(s *Service, retry bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil {
			web.Error(w, r, ErrDisabled)
			return
		}
		req, err := web.Decode[RefundActionRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		staff, _ := auth.StaffFrom(r.Context())
		no := chi.URLParam(r, "out_refund_no")
		act := s.SettleRefund
		if retry {
			act = s.RetryRefund
		}
		ref, err := act(r.Context(), no, req.Note, "admin:"+staff.Subject)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, ref)
	})
}
