package payment

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Modes of taking payments (TAKEOUT_WXPAY_MODE).
const (
	// ModeMerchant takes every payment into the platform's own merchant
	// account (mchid): one shop, or a platform that clears its merchants'
	// money itself.
	ModeMerchant = "merchant"
	// ModePartner takes each payment for its merchant's sub-merchant
	// account (sub_mchid) through WeChat Pay's service-provider APIs,
	// frozen for profit sharing: the platform (sp_mchid) takes its
	// commission by sharing once the order completes.
	ModePartner = "partner"
)

// SubMerchant names the sub-merchant a partner call is for; the zero
// value is a call of the merchant mode.
type SubMerchant struct {
	MchID, AppID string
}

// partner reports whether calls for sub go through the partner APIs.
func (sub SubMerchant) partner() bool { return sub.MchID != "" }

func (sub SubMerchant) query() string {
	return "sub_mchid=" + url.QueryEscape(sub.MchID)
}

// partnerPrepay asks for a JSAPI prepay of the service-provider mode:
// the payer's openid is of the platform's app (sp_openid), and the
// money is frozen for profit sharing.
func (c *Client) partnerPrepay(ctx context.Context, p PrepayRequest) (string, error) {
	in := map[string]any{
		"sp_appid": c.appID, "sp_mchid": c.mch.MchID, "sub_mchid": p.Sub.MchID, "description": p.Description,
		"out_trade_no": p.OutTradeNo, "time_expire": p.TimeExpire.Format(time.RFC3339), "notify_url": c.notify,
		"settle_info": map[string]bool{"profit_sharing": true},
		"amount":      Amount{Total: p.AmountFen, Currency: "CNY"}, "payer": map[string]string{"sp_openid": p.OpenID},
	}
	if p.Sub.AppID != "" {
		in["sub_appid"] = p.Sub.AppID
	}
	var out struct {
		PrepayID string `json:"prepay_id"`
	}
	if err := c.do(ctx, http.MethodPost, "/v3/pay/partner/transactions/jsapi", in, &out); err != nil {
		return "", err
	}
	if out.PrepayID == "" {
		return "", fmt.Errorf("wechat pay: prepay answered no prepay_id")
	}
	return out.PrepayID, nil
}

// SharingReceiver is one receiver of a profit-sharing order and what
// became of its part.
type SharingReceiver struct {
	Type        string `json:"type"`
	Account     string `json:"account"`
	Amount      int64  `json:"amount"`
	Description string `json:"description"`
	// Result is PENDING, SUCCESS or CLOSED (with FailReason).
	Result     string `json:"result,omitempty"`
	FailReason string `json:"fail_reason,omitempty"`
	DetailID   string `json:"detail_id,omitempty"`
}

// SharingOrder is a profit-sharing order (a share, or an unfreeze) as the
// platform reports it: PROCESSING until it is FINISHED.
type SharingOrder struct {
	SubMchID      string            `json:"sub_mchid"`
	TransactionID string            `json:"transaction_id"`
	OutOrderNo    string            `json:"out_order_no"`
	OrderID       string            `json:"order_id"`
	State         string            `json:"state"`
	Receivers     []SharingReceiver `json:"receivers"`
}

// Sharing states and receiver results at the platform.
const (
	SharingProcessing = "PROCESSING"
	SharingFinished   = "FINISHED"
	ReceiverSuccess   = "SUCCESS"
	ReceiverClosed    = "CLOSED"
)

// ShareRequest asks to share amount of a transaction to the platform
// (the service provider's own merchant id) and unfreeze the rest to the
// sub-merchant.
type ShareRequest struct {
	Sub                       SubMerchant
	TransactionID, OutOrderNo string
	AmountFen                 int64
	Description               string
}

// Share requests profit sharing with unfreeze_unsplit: the commission to
// the platform, everything left to the merchant. Its result is
// asynchronous (QueryShare).
func (c *Client) Share(ctx context.Context, r ShareRequest) (SharingOrder, error) {
	in := map[string]any{
		"sub_mchid": r.Sub.MchID, "appid": c.appID, "transaction_id": r.TransactionID, "out_order_no": r.OutOrderNo,
		"receivers":        []SharingReceiver{{Type: "MERCHANT_ID", Account: c.mch.MchID, Amount: r.AmountFen, Description: r.Description}},
		"unfreeze_unsplit": true,
	}
	var out SharingOrder
	err := c.do(ctx, http.MethodPost, "/v3/profitsharing/orders", in, &out)
	return out, err
}

// Unfreeze finishes a transaction's sharing with nothing shared: all
// that is frozen goes to the sub-merchant (解冻剩余资金).
func (c *Client) Unfreeze(ctx context.Context, sub SubMerchant, transactionID, outOrderNo, description string) (SharingOrder, error) {
	in := map[string]any{"sub_mchid": sub.MchID, "transaction_id": transactionID, "out_order_no": outOrderNo, "description": description}
	var out SharingOrder
	err := c.do(ctx, http.MethodPost, "/v3/profitsharing/orders/unfreeze", in, &out)
	return out, err
}

// QueryShare reads a profit-sharing order by its out_order_no.
func (c *Client) QueryShare(ctx context.Context, sub SubMerchant, transactionID, outOrderNo string) (SharingOrder, error) {
	var out SharingOrder
	err := c.do(ctx, http.MethodGet, "/v3/profitsharing/orders/"+url.PathEscape(outOrderNo)+"?"+sub.query()+
		"&transaction_id="+url.QueryEscape(transactionID), nil, &out)
	return out, err
}

// SharingReturn is a profit-sharing return (回退) as the platform
// reports it: PROCESSING, SUCCESS or FAILED (with FailReason).
type SharingReturn struct {
	SubMchID    string `json:"sub_mchid"`
	OutOrderNo  string `json:"out_order_no"`
	OutReturnNo string `json:"out_return_no"`
	ReturnID    string `json:"return_id"`
	ReturnMchID string `json:"return_mchid"`
	Amount      int64  `json:"amount"`
	Result      string `json:"result"`
	FailReason  string `json:"fail_reason"`
}

// Return results at the platform.
const (
	ReturnProcessing = "PROCESSING"
	ReturnSuccess    = "SUCCESS"
	ReturnFailed     = "FAILED"
)

// ReturnShare asks the platform's account (the receiver of the share
// outOrderNo) to give amount back to the sub-merchant.
func (c *Client) ReturnShare(ctx context.Context, sub SubMerchant, outOrderNo, outReturnNo string, amount int64, description string) (SharingReturn, error) {
	in := map[string]any{"sub_mchid": sub.MchID, "out_order_no": outOrderNo, "out_return_no": outReturnNo,
		"return_mchid": c.mch.MchID, "amount": amount, "description": description}
	var out SharingReturn
	err := c.do(ctx, http.MethodPost, "/v3/profitsharing/return-orders", in, &out)
	return out, err
}

// QueryReturn reads a return by its out_return_no.
func (c *Client) QueryReturn(ctx context.Context, sub SubMerchant, outOrderNo, outReturnNo string) (SharingReturn, error) {
	var out SharingReturn
	err := c.do(ctx, http.MethodGet, "/v3/profitsharing/return-orders/"+url.PathEscape(outReturnNo)+"?"+sub.query()+
		"&out_order_no="+url.QueryEscape(outOrderNo), nil, &out)
	return out, err
}
