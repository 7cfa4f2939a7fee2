package wxsim

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"
)

// The mini-program's shipping information (发货信息管理): WeChat holds a
// payment's money until the merchant tells it how the goods went out
// (upload_shipping_info), and answers what it knows of a payment
// (get_order: order_state 1 waiting for shipping, 2 shipped). Its rules
// as documented: the payment must exist and be paid (10060001
// otherwise), unified delivery carries one shipping entry (268485228),
// express delivery needs a tracking number and company (268485226), the
// upload time is RFC 3339 (268485216), a refunded payment or one past
// the shipping time limit cannot be shipped (10060004; one refunded in
// part still can); and, as takeout
// reads it, an upload for a payment already shipped is refused (10060002:
// the one re-shipping chance WeChat gives is never used by takeout, so
// the simulator spends none). Knobs (POST /sim/shipping/config): down
// (503), busy (-1 system error, nothing recorded), hang_after_record_ms
// (the upload is recorded, the answer late), limit_s (the time limit
// after payment; 0 keeps the default of ShippingLimit).
type shipping struct {
	p *payments
	m *messages

	mu      sync.Mutex
	uploads map[string][]ShippingUpload // by out_trade_no, refused ones included
	cfg     ShippingConfig
}

// ShippingLimit is how long after payment the simulator takes an upload
// by default.
const ShippingLimit = 30 * 24 * time.Hour

// ShippingConfig are the shipping knobs.
type ShippingConfig struct {
	Down            bool `json:"down"`
	Busy            bool `json:"busy"`
	HangAfterRecord int  `json:"hang_after_record_ms"`
	LimitS          int  `json:"limit_s"`
}

// ShippingUpload is an upload the simulator received, and its answer.
type ShippingUpload struct {
	OutTradeNo    string `json:"out_trade_no"`
	LogisticsType int    `json:"logistics_type"`
	ItemDesc      string `json:"item_desc"`
	Errcode       int    `json:"errcode"`
}

type shippingRequest struct {
	OrderKey struct {
		OrderNumberType int    `json:"order_number_type"`
		TransactionID   string `json:"transaction_id"`
		MchID           string `json:"mchid"`
		OutTradeNo      string `json:"out_trade_no"`
	} `json:"order_key"`
	LogisticsType int `json:"logistics_type"`
	DeliveryMode  int `json:"delivery_mode"`
	ShippingList  []struct {
		TrackingNo     string `json:"tracking_no"`
		ExpressCompany string `json:"express_company"`
		ItemDesc       string `json:"item_desc"`
	} `json:"shipping_list"`
	UploadTime string `json:"upload_time"`
	Payer      struct {
		OpenID string `json:"openid"`
	} `json:"payer"`
}

func (s *Server) withShipping(p *payments) {
	sh := &shipping{p: p, m: s.msgs, uploads: map[string][]ShippingUpload{}}
	s.mux.HandleFunc("POST /wxa/sec/order/upload_shipping_info", sh.upload)
	s.mux.HandleFunc("POST /wxa/sec/order/get_order", sh.getOrder)
	s.mux.HandleFunc("POST /sim/shipping/config", sh.config)
	s.mux.HandleFunc("GET /sim/shipping", sh.log)
}

func (sh *shipping) upload(w http.ResponseWriter, r *http.Request) {
	sh.mu.Lock()
	cfg := sh.cfg
	sh.mu.Unlock()
	if cfg.Down {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	if !sh.m.validToken(r.URL.Query().Get("access_token")) {
		writeJSON(w, map[string]any{"errcode": 40001, "errmsg": "invalid credential, access_token is invalid or not latest"})
		return
	}
	var req shippingRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, map[string]any{"errcode": 47001, "errmsg": "data format error"})
		return
	}
	if cfg.Busy {
		writeJSON(w, map[string]any{"errcode": -1, "errmsg": "system error"})
		return
	}
	code, msg := sh.record(req, cfg)
	if code == 0 && cfg.HangAfterRecord > 0 {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Duration(cfg.HangAfterRecord) * time.Millisecond):
		}
	}
	writeJSON(w, map[string]any{"errcode": code, "errmsg": msg})
}

// record checks an upload against the payment and keeps it.
func (sh *shipping) record(req shippingRequest, cfg ShippingConfig) (int, string) {
	t, shipped := sh.payment(req.OrderKey.OrderNumberType, req.OrderKey.TransactionID, req.OrderKey.MchID, req.OrderKey.OutTradeNo)
	if !paid(t) {
		return 10060001, "支付单不存在"
	}
	code, msg := 0, "ok"
	limit := ShippingLimit
	if cfg.LimitS > 0 {
		limit = time.Duration(cfg.LimitS) * time.Second
	}
	paidAt, _ := time.Parse(time.RFC3339, t.SuccessTime)
	_, badTime := time.Parse(time.RFC3339, req.UploadTime)
	switch {
	case shipped:
		code, msg = 10060002, "支付单已完成发货，无法继续发货"
	case req.Payer.OpenID != t.OpenID:
		code, msg = 10060001, "支付单不存在"
	case req.LogisticsType < 1 || req.LogisticsType > 4:
		code, msg = 10060005, "物流模式有误"
	case req.DeliveryMode != 1 && req.DeliveryMode != 2:
		code, msg = 268485224, "发货模式非法"
	case req.DeliveryMode == 1 && len(req.ShippingList) != 1:
		code, msg = 268485228, "统一发货模式下，物流信息列表长度必须为1"
	case req.ShippingList[0].ItemDesc == "" || utf8.RuneCountInString(req.ShippingList[0].ItemDesc) > 120:
		code, msg = 47001, "item_desc 必填，至多120字"
	case req.LogisticsType == 1 && (req.ShippingList[0].TrackingNo == "" || req.ShippingList[0].ExpressCompany == ""):
		code, msg = 268485226, "物流单号不能为空"
	case badTime != nil:
		code, msg = 268485216, "上传时间非法"
	case t.Refunded >= t.Total:
		code, msg = 10060004, "支付单处于不可发货的状态：已退款"
	case sh.p.o.Now().After(paidAt.Add(limit)):
		code, msg = 10060004, "支付单处于不可发货的状态：已超过发货时限"
	}
	u := ShippingUpload{OutTradeNo: t.OutTradeNo, LogisticsType: req.LogisticsType, Errcode: code}
	if len(req.ShippingList) > 0 {
		u.ItemDesc = req.ShippingList[0].ItemDesc
	}
	sh.mu.Lock()
	sh.uploads[t.OutTradeNo] = append(sh.uploads[t.OutTradeNo], u)
	sh.mu.Unlock()
	return code, msg
}

// paid reports whether a payment was paid: a refund (in part, or in
// progress) leaves it paid, and a partly refunded payment is still shipped
// for the rest.
func paid(t simTxn) bool {
	return t.OutTradeNo != "" && t.TransactionID != "" && (t.State == "SUCCESS" || t.State == "REFUND")
}

// payment finds a payment by its key, and whether an upload for it was
// taken.
func (sh *shipping) payment(keyType int, txnID, mchID, outTradeNo string) (simTxn, bool) {
	sh.p.mu.Lock()
	var found simTxn
	switch t := sh.p.txns[outTradeNo]; {
	case keyType == 2 && txnID != "":
		if t := sh.p.byTxnID[txnID]; t != nil {
			found = *t
		}
	case keyType == 1 && t != nil && t.MchID == mchID:
		found = *t
	}
	sh.p.mu.Unlock()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, u := range sh.uploads[found.OutTradeNo] {
		if u.Errcode == 0 {
			return found, true
		}
	}
	return found, false
}

// getOrder answers what WeChat knows of a payment's shipping.
func (sh *shipping) getOrder(w http.ResponseWriter, r *http.Request) {
	sh.mu.Lock()
	down := sh.cfg.Down
	sh.mu.Unlock()
	if down {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	if !sh.m.validToken(r.URL.Query().Get("access_token")) {
		writeJSON(w, map[string]any{"errcode": 40001, "errmsg": "invalid credential, access_token is invalid or not latest"})
		return
	}
	var req struct {
		TransactionID   string `json:"transaction_id"`
		MerchantID      string `json:"merchant_id"`
		MerchantTradeNo string `json:"merchant_trade_no"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, map[string]any{"errcode": 47001, "errmsg": "data format error"})
		return
	}
	keyType := 1
	if req.TransactionID != "" {
		keyType = 2
	}
	t, shipped := sh.payment(keyType, req.TransactionID, req.MerchantID, req.MerchantTradeNo)
	if !paid(t) {
		writeJSON(w, map[string]any{"errcode": 10060001, "errmsg": "支付单不存在"})
		return
	}
	state := 1
	if shipped {
		state = 2
	}
	writeJSON(w, map[string]any{"errcode": 0, "errmsg": "ok", "order": map[string]any{
		"transaction_id": t.TransactionID, "merchant_id": t.MchID, "merchant_trade_no": t.OutTradeNo,
		"openid": t.OpenID, "paid_amount": t.Total, "order_state": state}})
}

func (sh *shipping) config(w http.ResponseWriter, r *http.Request) {
	var c ShippingConfig
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sh.mu.Lock()
	sh.cfg = c
	sh.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// ShippingLog is GET /sim/shipping: every upload received, by payment.
type ShippingLog struct {
	Uploads map[string][]ShippingUpload `json:"uploads"`
}

func (sh *shipping) log(w http.ResponseWriter, _ *http.Request) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	writeJSON(w, ShippingLog{Uploads: sh.uploads})
}
