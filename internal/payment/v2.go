package payment

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

func v2Reply(w http.ResponseWriter, ok bool, msg string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(wxpay.V2Reply(ok, msg))
}

// HandleNotifyV2 serves POST /v1/payments/wechat/notify/v2: the legacy
// XML payment callback, signed with the v2 key (MD5, or HMAC-SHA256 when
// sign_type says so), answered with the XML SUCCESS/FAIL reply (FAIL makes
// the platform retry). It goes through the same exactly-once core as v3,
// so a v2 and a v3 delivery of one payment are one payment too.
func HandleNotifyV2(s *Service, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s == nil || s.o.V2Key == "" {
			v2Reply(w, false, "v2 callbacks are not configured")
			return
		}
		body, ok := callbackBody(r, maxBody)
		if !ok {
			v2Reply(w, false, "body too large")
			return
		}
		f, err := wxpay.ParseV2XML(bytes.NewReader(body))
		if err != nil {
			s.callbacks.WithLabelValues("v2", "rejected").Inc()
			v2Reply(w, false, "malformed XML")
			return
		}
		if err := wxpay.V2Verify(f, s.o.V2Key, f["sign_type"]); err != nil {
			s.callbacks.WithLabelValues("v2", "rejected").Inc()
			s.refusals.warn(r.Context(), web.Logger(r.Context()), "v2 payment notification refused", "err", err)
			v2Reply(w, false, "signature verification failed")
			return
		}
		if f["return_code"] != "SUCCESS" || f["result_code"] != "SUCCESS" {
			v2Reply(w, true, "OK") // a failed payment: nothing to apply
			return
		}
		total, err := strconv.ParseInt(f["total_fee"], 10, 64)
		if err != nil {
			v2Reply(w, false, "malformed total_fee")
			return
		}
		t := Transaction{AppID: f["appid"], MchID: f["mch_id"], OutTradeNo: f["out_trade_no"], TransactionID: f["transaction_id"], TradeState: "SUCCESS"}
		t.Amount.Total, t.Amount.Currency = total, f["fee_type"]
		if t.Amount.Currency == "" {
			t.Amount.Currency = "CNY"
		}
		if ts, err := time.ParseInLocation("20060102150405", f["time_end"], time.FixedZone("CST", 8*3600)); err == nil {
			t.SuccessTime = ts.Format(time.RFC3339)
		}
		ctx, cancel := context.WithTimeout(r.Context(), 4*time.Second)
		defer cancel()
		err = s.HandleTransaction(ctx, Source{Kind: "v2", NotificationID: "v2:" + t.TransactionID, EventType: "TRANSACTION.SUCCESS"}, t)
		switch p, isProblem := problem.As(err); {
		case err == nil:
			v2Reply(w, true, "OK")
		case errors.Is(err, ErrInFlight):
			v2Reply(w, false, "processing; retry")
		case isProblem && p.Type.Status < 500:
			v2Reply(w, false, p.Detail)
		default:
			web.Logger(r.Context()).ErrorContext(r.Context(), "v2 payment notification failed", "err", err)
			v2Reply(w, false, "temporary failure; retry")
		}
	})
}
