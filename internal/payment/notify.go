package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// Errors of a notification refused before its content is looked at; the
// handler answers each in the platform's shape with its status.
var (
	ErrBadSignature = problem.New(problem.Unauthorized, "signature verification failed")
	ErrMalformed    = problem.New(problem.InvalidRequest, "malformed notification")
	ErrNoDecrypt    = problem.New(problem.InvalidRequest, "resource does not decrypt")
	ErrV2Disabled   = problem.New(problem.Unavailable, "v2 callbacks are not configured")
)

// notifyTimeout is how long a notification may take: the platform waits
// 5 s for an answer, and retries one it did not get.
const notifyTimeout = 4 * time.Second

// NotifyV3 applies a WeChat Pay v3 notification given as its signed
// headers and body: the signature first (timestamp window, serial,
// RSA-SHA256), then decryption of the resource, then, by event type, the
// exactly-once core of payments (HandleTransaction) or of refunds
// (HandleRefund). nil means the effect is committed (or was before: a
// duplicate) and the platform is answered success. ErrInFlight means a
// delivery of the same transaction is being applied on this instance:
// the platform retries. Any other error is a problem to answer with.
func (s *Service) NotifyV3(ctx context.Context, h wxpay.SignedHeaders, body []byte) error {
	delivery := deliveryKey(h, body)
	if _, ok := s.delivered.GetIfPresent(delivery); ok {
		// These exact bytes were verified and applied: a redelivery.
		s.callbacks.WithLabelValues("v3", "duplicate").Inc()
		return nil
	}
	if err := s.o.Platform.VerifyMessage(h, body, s.o.Now()); err != nil {
		s.callbacks.WithLabelValues("v3", "rejected").Inc()
		s.refusals.warn(ctx, web.Logger(ctx), "payment notification refused", "err", err)
		return ErrBadSignature
	}
	n, err := wxpay.ParseNotification(body)
	if err != nil {
		s.callbacks.WithLabelValues("v3", "rejected").Inc()
		return ErrMalformed
	}
	plain, err := wxpay.DecryptAEAD(s.o.APIv3Key, n.Resource.Nonce, n.Resource.AssociatedData, n.Resource.Ciphertext)
	if err != nil {
		s.callbacks.WithLabelValues("v3", "rejected").Inc()
		s.refusals.warn(ctx, web.Logger(ctx), "payment notification does not decrypt", "id", n.ID, "err", err)
		return ErrNoDecrypt
	}
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	src := Source{Kind: "v3", NotificationID: n.ID, EventType: n.EventType}
	switch {
	case n.EventType == "TRANSACTION.SUCCESS":
		var t Transaction
		if err := json.Unmarshal(plain, &t); err != nil {
			return problem.New(problem.InvalidRequest, "malformed transaction")
		}
		t.normalize()
		err = s.HandleTransaction(ctx, src, t)
	case strings.HasPrefix(n.EventType, "REFUND."):
		var rr RefundResult
		if err := json.Unmarshal(plain, &rr); err != nil {
			return problem.New(problem.InvalidRequest, "malformed refund")
		}
		_, err = s.HandleRefund(ctx, src, rr)
	default:
		web.Logger(ctx).InfoContext(ctx, "payment notification ignored", "event_type", n.EventType)
	}
	if err == nil {
		s.delivered.Set(delivery, struct{}{})
	}
	return err
}

// NotifyV2 applies a legacy v2 XML payment notification: signed with the
// v2 key (MD5, or HMAC-SHA256 when sign_type says so), it goes through
// the same exactly-once core as v3, so a v2 and a v3 delivery of one
// payment are one payment. Results are as NotifyV3's; a notification of a
// failed payment is answered success and changes nothing.
func (s *Service) NotifyV2(ctx context.Context, body []byte) error {
	if s.o.V2Key == "" {
		return ErrV2Disabled
	}
	f, err := wxpay.ParseV2XML(bytes.NewReader(body))
	if err != nil {
		s.callbacks.WithLabelValues("v2", "rejected").Inc()
		return problem.New(problem.InvalidRequest, "malformed XML")
	}
	if err := wxpay.V2Verify(f, s.o.V2Key, f["sign_type"]); err != nil {
		s.callbacks.WithLabelValues("v2", "rejected").Inc()
		s.refusals.warn(ctx, web.Logger(ctx), "v2 payment notification refused", "err", err)
		return ErrBadSignature
	}
	if f["return_code"] != "SUCCESS" || f["result_code"] != "SUCCESS" {
		return nil // a failed payment: nothing to apply
	}
	t, err := v2Transaction(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	return s.HandleTransaction(ctx, Source{Kind: "v2", NotificationID: "v2:" + t.TransactionID, EventType: "TRANSACTION.SUCCESS"}, t)
}

// v2Transaction reads a successful v2 notification's fields as a
// transaction (v2 reports fen as total_fee, and its time in China time).
func v2Transaction(f map[string]string) (Transaction, error) {
	total, err := strconv.ParseInt(f["total_fee"], 10, 64)
	if err != nil {
		return Transaction{}, problem.New(problem.InvalidRequest, "malformed total_fee")
	}
	t := Transaction{AppID: f["appid"], MchID: f["mch_id"], OutTradeNo: f["out_trade_no"], TransactionID: f["transaction_id"], TradeState: TradeSuccess}
	t.Amount.Total, t.Amount.Currency = total, f["fee_type"]
	if t.Amount.Currency == "" {
		t.Amount.Currency = "CNY"
	}
	if ts, err := time.ParseInLocation("20060102150405", f["time_end"], time.FixedZone("CST", 8*3600)); err == nil {
		t.SuccessTime = ts.Format(time.RFC3339)
	}
	return t, nil
}
