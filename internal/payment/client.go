// Package payment takes orders' payments through WeChat Pay (API v3 on
// the standard library, see package wxpay): JSAPI prepay and the
// wx.requestPayment parameters, signed callbacks handled exactly once
// (duplicates and concurrent deliveries change nothing), refunds with
// deterministic out_refund_no, and automatic refunds of payments that
// arrive for orders that cannot take them.
package payment

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/takeout/takeout/internal/payment/wxpay"
)

// Client calls the WeChat Pay v3 merchant API.
type Client struct {
	base   string
	mch    wxpay.Merchant
	keys   wxpay.Keyring
	http   *http.Client
	now    func() time.Time
	appID  string
	notify string
}

// ClientOptions configure NewClient.
type ClientOptions struct {
	Base      string
	Merchant  wxpay.Merchant
	Platform  wxpay.Keyring
	AppID     string
	NotifyURL string
	HTTP      *http.Client
	Now       func() time.Time
}

// NewClient returns a v3 client.
func NewClient(o ClientOptions) *Client {
	return &Client{base: o.Base, mch: o.Merchant, keys: o.Platform, http: o.HTTP, now: o.Now, appID: o.AppID, notify: o.NotifyURL}
}

// callTimeout is the longest one call may take (its HTTP client's
// timeout, or a default when it has none).
func (c *Client) callTimeout() time.Duration {
	if c == nil || c.http == nil || c.http.Timeout <= 0 {
		return 10 * time.Second
	}
	return c.http.Timeout
}

// APIError is a non-2xx answer of the platform. The platform signs some
// error answers and not others (a 400 PARAM_ERROR, a 404 ORDER_NOT_EXIST
// may come without Wechatpay-* headers); Signed says whether this one
// was, and verified. An unsigned answer is read only for what moves no
// money: to retry, back off, query again, stop closing what the platform
// does not have, or alert an operator. A payment, a refund or an amount
// never follows from one (they follow only from verified 2xx answers and
// notifications).
type APIError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Signed  bool   `json:"-"`
}

func (e *APIError) Error() string {
	signed := "unsigned"
	if e.Signed {
		signed = "signed"
	}
	return fmt.Sprintf("wechat pay: HTTP %d %s (%s): %s", e.Status, e.Code, signed, e.Message)
}

func nonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// do sends a signed request and verifies the response's signature before
// trusting any of it. A non-2xx answer without a signature is returned as
// an unsigned APIError (see APIError for what it may decide); one that
// carries a signature that does not verify, and any 2xx that does not,
// is an error that trusts nothing of the answer.
func (c *Client) do(ctx context.Context, method, pathAndQuery string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	auth, err := c.mch.Authorization(method, pathAndQuery, c.now().Unix(), nonce(), body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+pathAndQuery, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("wechat pay %s %s: %w", method, pathAndQuery, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("wechat pay: read answer: %w", err)
	}
	h := wxpay.SignedHeaders{
		Timestamp: resp.Header.Get("Wechatpay-Timestamp"), Nonce: resp.Header.Get("Wechatpay-Nonce"),
		Serial: resp.Header.Get("Wechatpay-Serial"), Signature: resp.Header.Get("Wechatpay-Signature"),
	}
	failed := resp.StatusCode >= 300
	if failed && h.Signature == "" {
		e := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(raw, e)
		return e
	}
	if err := c.keys.VerifyMessage(h, raw, c.now()); err != nil {
		return fmt.Errorf("wechat pay answer (HTTP %d) not authentic: %w", resp.StatusCode, err)
	}
	if failed {
		e := &APIError{Status: resp.StatusCode, Signed: true}
		_ = json.Unmarshal(raw, e)
		return e
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("wechat pay: decode answer: %w", err)
		}
	}
	return nil
}

// Amount is a payment amount in fen.
type Amount struct {
	Total    int64  `json:"total"`
	Currency string `json:"currency"`
}

// PrepayRequest is a JSAPI prepay.
type PrepayRequest struct {
	Description string
	OutTradeNo  string
	TimeExpire  time.Time
	AmountFen   int64
	OpenID      string
	// Sub is the sub-merchant the payment is for (service-provider
	// mode), or zero.
	Sub SubMerchant
}

// Prepay asks for a JSAPI prepay id.
func (c *Client) Prepay(ctx context.Context, p PrepayRequest) (string, error) {
	if p.Sub.partner() {
		return c.partnerPrepay(ctx, p)
	}
	in := map[string]any{
		"appid": c.appID, "mchid": c.mch.MchID, "description": p.Description, "out_trade_no": p.OutTradeNo,
		"time_expire": p.TimeExpire.Format(time.RFC3339), "notify_url": c.notify,
		"amount": Amount{Total: p.AmountFen, Currency: "CNY"}, "payer": map[string]string{"openid": p.OpenID},
	}
	var out struct {
		PrepayID string `json:"prepay_id"`
	}
	if err := c.do(ctx, http.MethodPost, "/v3/pay/transactions/jsapi", in, &out); err != nil {
		return "", err
	}
	if out.PrepayID == "" {
		return "", fmt.Errorf("wechat pay: prepay answered no prepay_id")
	}
	return out.PrepayID, nil
}

// TradeState is a transaction's state at the platform (trade_state).
type TradeState string

// TradeSuccess is a transaction that took the money; other states
// (NOTPAY, CLOSED, USERPAYING, ...) change nothing here.
const TradeSuccess TradeState = "SUCCESS"

// RefundState is a refund's status at the platform.
type RefundState string

// The platform's refund statuses.
const (
	RefundSuccess    RefundState = "SUCCESS"
	RefundProcessing RefundState = "PROCESSING"
	RefundClosed     RefundState = "CLOSED"
	RefundAbnormal   RefundState = "ABNORMAL"
)

// final reports whether a refund ended at the platform.
func (s RefundState) final() bool {
	return s == RefundSuccess || s == RefundAbnormal || s == RefundClosed
}

// Transaction is a payment as the platform reports it (query answers and
// decrypted TRANSACTION.* notifications).
type Transaction struct {
	AppID string `json:"appid"`
	MchID string `json:"mchid"`
	// The service-provider mode's names: the platform's (sp_) and the
	// sub-merchant's (sub_); see normalize.
	SpAppID       string     `json:"sp_appid"`
	SpMchID       string     `json:"sp_mchid"`
	SubAppID      string     `json:"sub_appid"`
	SubMchID      string     `json:"sub_mchid"`
	OutTradeNo    string     `json:"out_trade_no"`
	TransactionID string     `json:"transaction_id"`
	TradeState    TradeState `json:"trade_state"`
	SuccessTime   string     `json:"success_time"`
	Amount        struct {
		Total      int64  `json:"total"`
		PayerTotal int64  `json:"payer_total"`
		Currency   string `json:"currency"`
	} `json:"amount"`
	Payer struct {
		OpenID   string `json:"openid"`
		SpOpenID string `json:"sp_openid"`
	} `json:"payer"`
}

// normalize reads a service-provider transaction in the merchant mode's
// names: the platform's sp_mchid and sp_appid are the mchid and appid it
// was taken under (the sub-merchant stays in SubMchID).
func (t *Transaction) normalize() {
	if t.SpMchID != "" {
		t.MchID, t.AppID = t.SpMchID, t.SpAppID
	}
	if t.Payer.OpenID == "" {
		t.Payer.OpenID = t.Payer.SpOpenID
	}
}

// Query reads a payment by out_trade_no.
func (c *Client) Query(ctx context.Context, sub SubMerchant, outTradeNo string) (Transaction, error) {
	var t Transaction
	path := "/v3/pay/transactions/out-trade-no/" + url.PathEscape(outTradeNo) + "?mchid=" + url.QueryEscape(c.mch.MchID)
	if sub.partner() {
		path = "/v3/pay/partner/transactions/out-trade-no/" + url.PathEscape(outTradeNo) + "?sp_mchid=" + url.QueryEscape(c.mch.MchID) + "&" + sub.query()
	}
	err := c.do(ctx, http.MethodGet, path, nil, &t)
	t.normalize()
	return t, err
}

// Close closes an unpaid payment so that it can no longer be paid.
func (c *Client) Close(ctx context.Context, sub SubMerchant, outTradeNo string) error {
	if sub.partner() {
		return c.do(ctx, http.MethodPost, "/v3/pay/partner/transactions/out-trade-no/"+url.PathEscape(outTradeNo)+"/close",
			map[string]string{"sp_mchid": c.mch.MchID, "sub_mchid": sub.MchID}, nil)
	}
	return c.do(ctx, http.MethodPost, "/v3/pay/transactions/out-trade-no/"+url.PathEscape(outTradeNo)+"/close", map[string]string{"mchid": c.mch.MchID}, nil)
}

// RefundResult is a refund as the platform reports it.
type RefundResult struct {
	MchID         string      `json:"mchid"`     // in notifications
	SpMchID       string      `json:"sp_mchid"`  // in the service-provider mode's notifications
	SubMchID      string      `json:"sub_mchid"` // the same
	RefundID      string      `json:"refund_id"`
	OutRefundNo   string      `json:"out_refund_no"`
	OutTradeNo    string      `json:"out_trade_no"`
	TransactionID string      `json:"transaction_id"`
	Status        RefundState `json:"status"`
	RefundStatus  RefundState `json:"refund_status"` // in notifications
	Amount        struct {
		Refund int64  `json:"refund"`
		Total  int64  `json:"total"`
		Curr   string `json:"currency"`
	} `json:"amount"`
}

// RefundRequest is a refund to ask for: of a payment by its out_trade_no,
// or of one transaction by its id (when TransactionID is set).
type RefundRequest struct {
	OutTradeNo, TransactionID, OutRefundNo, Reason string
	RefundFen, TotalFen                            int64
	Sub                                            SubMerchant
}

// Refund asks for a domestic refund; out_refund_no makes it idempotent at
// the platform too.
func (c *Client) Refund(ctx context.Context, rr RefundRequest) (RefundResult, error) {
	in := map[string]any{
		"out_refund_no": rr.OutRefundNo, "reason": rr.Reason, "notify_url": c.notify,
		"amount": map[string]any{"refund": rr.RefundFen, "total": rr.TotalFen, "currency": "CNY"},
	}
	if rr.Sub.partner() {
		in["sub_mchid"] = rr.Sub.MchID
	}
	if rr.TransactionID != "" {
		in["transaction_id"] = rr.TransactionID
	} else {
		in["out_trade_no"] = rr.OutTradeNo
	}
	var out RefundResult
	err := c.do(ctx, http.MethodPost, "/v3/refund/domestic/refunds", in, &out)
	return out, err
}

// QueryRefund reads a refund by out_refund_no.
func (c *Client) QueryRefund(ctx context.Context, sub SubMerchant, outRefundNo string) (RefundResult, error) {
	var out RefundResult
	path := "/v3/refund/domestic/refunds/" + url.PathEscape(outRefundNo)
	if sub.partner() {
		path += "?" + sub.query()
	}
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}
