package wxsim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/takeout/takeout/internal/payment/wxpay"
)

// PayOptions give the simulator the payment side: the merchant it serves
// (whose requests it verifies) and the platform keys it signs and
// encrypts with.
type PayOptions struct {
	MchID          string
	MerchantKey    *rsa.PublicKey
	PlatformKey    *rsa.PrivateKey
	PlatformSerial string
	APIv3Key       []byte
	Client         *http.Client
	Now            func() time.Time
	// RefundGap is the least time between two refunds of one payment:
	// 0 is the platform's minute, below 0 none.
	RefundGap time.Duration
}

type simTxn struct {
	AppID, MchID, OutTradeNo, NotifyURL, OpenID, Description string
	// SubMchID and SubAppID are set for a payment of the service-provider
	// mode (then AppID and MchID are the provider's); ProfitSharing
	// freezes its money for sharing (sharing.go).
	SubMchID, SubAppID                string
	ProfitSharing                     bool
	Total                             int64
	State, TransactionID, SuccessTime string
	// Refunded is what the trade's refunds asked back, summed: as at the
	// platform, never more than Total.
	Refunded int64
	// Frozen is what of a sharing payment is still frozen (unsplit);
	// FromBalance what its refunds took from the sub-merchant's account
	// once the frozen money was not enough.
	Frozen, FromBalance int64
	// PaidAt is when it was paid.
	PaidAt time.Time
}

type simRefund struct {
	OutRefundNo, OutTradeNo, RefundID, Status, NotifyURL string
	Refund, Total                                        int64
	// FromFrozen is what of it was taken from the payment's frozen
	// money (the rest from the sub-merchant's account).
	FromFrozen int64
	// SucceededAt is when the refund succeeded (for the bills).
	SucceededAt time.Time
}

type payments struct {
	o    PayOptions
	mu   sync.Mutex
	txns map[string]*simTxn
	// byTxnID finds a paid transaction by its transaction_id.
	byTxnID map[string]*simTxn
	refunds map[string]*simRefund
	seq     int
	// RefundFails makes refunds end in REFUND.ABNORMAL.
	refundFails bool
	// dropRefundNotices: refunds finish but nobody is told; only a
	// refund query finds out.
	dropRefundNotices bool
	// refundAtOnce: the refund API answers SUCCESS (the platform may,
	// and does for a refund request repeated after it finished).
	refundAtOnce bool
	// prepayDelay holds every prepay answer this long: a slow platform.
	prepayDelay time.Duration
	// unsigned is which answers go out without Wechatpay-* headers:
	// "errors" (non-2xx, as the platform sends some of them), "all" (a
	// forger's 2xx too) or "" (none).
	unsigned string
	// failing are the merchant APIs (prepay, query, close, refund,
	// query_refund) that answer 500 SYSTEM_ERROR, the platform's
	// retryable failure, without doing anything.
	failing map[string]bool
	// refundGap, refundLog and refundErrors are the refund rules
	// (refundrules.go): the gap, the refunds each trade took, and the
	// errors to answer next.
	refundGap    time.Duration
	refundLog    map[string][]RefundTaken
	refundErrors []RefundError
	// The bills (bills.go): their faults and clock, and the files of
	// the download URLs handed out.
	billFaults BillConfig
	billClock  time.Time
	billFiles  map[string]billFile
	// The service-provider mode's profit sharing (sharing.go).
	sharing sharingState
}

// WithPayments adds the WeChat Pay v3 merchant API and the control API.
func (s *Server) WithPayments(o PayOptions) *Server {
	p := &payments{o: o, txns: map[string]*simTxn{}, byTxnID: map[string]*simTxn{}, refunds: map[string]*simRefund{}, refundLog: map[string][]RefundTaken{}, refundGap: o.RefundGap,
		billFiles: map[string]billFile{}, sharing: newSharingState()}
	switch {
	case o.RefundGap == 0:
		p.refundGap = defaultRefundGap
	case o.RefundGap < 0:
		p.refundGap = 0
	}
	s.withShipping(p)
	s.mux.HandleFunc("POST /v3/pay/transactions/jsapi", p.merchant("prepay", p.prepay))
	s.mux.HandleFunc("GET /v3/pay/transactions/out-trade-no/{no}", p.merchant("query", p.query))
	s.mux.HandleFunc("POST /v3/pay/transactions/out-trade-no/{no}/close", p.merchant("close", p.close))
	s.mux.HandleFunc("POST /v3/refund/domestic/refunds", p.merchant("refund", p.refund))
	s.mux.HandleFunc("GET /v3/refund/domestic/refunds/{no}", p.merchant("query_refund", p.queryRefund))
	s.mux.HandleFunc("POST /sim/pay", p.simPay)
	s.mux.HandleFunc("POST /sim/config", p.simConfig)
	s.mux.HandleFunc("POST /sim/refund-rules", p.simRefundRules)
	s.mux.HandleFunc("GET /sim/refunds", p.simRefunds)
	s.mux.HandleFunc("GET /v3/bill/tradebill", p.merchant("bill", p.bill("trade")))
	s.mux.HandleFunc("GET /v3/bill/fundflowbill", p.merchant("bill", p.bill("fund")))
	s.mux.HandleFunc("GET /v3/billdownload/file", p.download)
	s.mux.HandleFunc("POST /sim/bills/config", p.simBillConfig)
	s.mux.HandleFunc("POST /v3/pay/partner/transactions/jsapi", p.merchant("prepay", p.partnerPrepay))
	s.mux.HandleFunc("GET /v3/pay/partner/transactions/out-trade-no/{no}", p.merchant("query", p.query))
	s.mux.HandleFunc("POST /v3/pay/partner/transactions/out-trade-no/{no}/close", p.merchant("close", p.close))
	p.withSharing(s)
	return s
}

type merchantHandler func(r *http.Request, body []byte) (int, any)

// merchant verifies the merchant's Authorization and signs the answer, as
// the platform does (unless the unsigned knob says otherwise). api names
// the API for the failing knob.
func (p *payments) merchant(api string, h merchantHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		a, err := wxpay.ParseAuthorization(r.Header.Get("Authorization"))
		status, out := http.StatusUnauthorized, any(map[string]string{"code": "SIGN_ERROR", "message": "bad authorization"})
		p.mu.Lock()
		failing, unsigned := p.failing[api], p.unsigned
		p.mu.Unlock()
		if err == nil && a.MchID == p.o.MchID {
			msg := wxpay.RequestMessage(r.Method, r.URL.RequestURI(), a.Timestamp, a.Nonce, body)
			switch {
			case wxpay.VerifySHA256WithRSA(p.o.MerchantKey, msg, a.Signature) != nil:
			case failing:
				status, out = http.StatusInternalServerError, map[string]string{"code": "SYSTEM_ERROR", "message": "system error, retry"}
			default:
				status, out = h(r, body)
			}
		}
		var raw []byte
		if out != nil {
			raw, _ = json.Marshal(out)
		}
		if unsigned == "" || (unsigned == "errors" && status < 300) {
			p.sign(w.Header(), raw)
		}
		if raw != nil {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = w.Write(raw)
	}
}

func (p *payments) sign(h http.Header, body []byte) {
	ts := strconv.FormatInt(p.o.Now().Unix(), 10)
	n := randHex(8)
	sig, _ := wxpay.SignSHA256WithRSA(p.o.PlatformKey, []byte(ts+"\n"+n+"\n"+string(body)+"\n"))
	h.Set("Wechatpay-Timestamp", ts)
	h.Set("Wechatpay-Nonce", n)
	h.Set("Wechatpay-Serial", p.o.PlatformSerial)
	h.Set("Wechatpay-Signature", sig)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (p *payments) prepay(r *http.Request, body []byte) (int, any) {
	var in struct {
		AppID, MchID, Description string
		OutTradeNo                string `json:"out_trade_no"`
		NotifyURL                 string `json:"notify_url"`
		Amount                    struct{ Total int64 }
		Payer                     struct{ OpenID string }
	}
	if json.Unmarshal(body, &in) != nil || in.OutTradeNo == "" || in.Amount.Total <= 0 {
		return 400, map[string]string{"code": "PARAM_ERROR", "message": "bad prepay"}
	}
	p.mu.Lock()
	delay := p.prepayDelay
	p.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.txns[in.OutTradeNo]; ok && t.State != "NOTPAY" {
		return 400, map[string]string{"code": "ORDERPAID", "message": "already " + t.State}
	}
	p.txns[in.OutTradeNo] = &simTxn{AppID: in.AppID, MchID: in.MchID, OutTradeNo: in.OutTradeNo, NotifyURL: in.NotifyURL,
		OpenID: in.Payer.OpenID, Description: in.Description, Total: in.Amount.Total, State: "NOTPAY"}
	return 200, map[string]string{"prepay_id": "wx" + strings.ReplaceAll(in.OutTradeNo, "-", "")}
}

func (p *payments) txnJSON(t *simTxn) map[string]any {
	m := map[string]any{"appid": t.AppID, "mchid": t.MchID, "out_trade_no": t.OutTradeNo, "trade_state": t.State,
		"trade_type": "JSAPI", "payer": map[string]string{"openid": t.OpenID},
		"amount": map[string]any{"total": t.Total, "payer_total": t.Total, "currency": "CNY", "payer_currency": "CNY"}}
	if t.SubMchID != "" {
		// The partner APIs' names: the provider's and the sub-merchant's.
		delete(m, "appid")
		delete(m, "mchid")
		m["sp_appid"], m["sp_mchid"], m["sub_mchid"] = t.AppID, t.MchID, t.SubMchID
		if t.SubAppID != "" {
			m["sub_appid"] = t.SubAppID
		}
		m["payer"] = map[string]string{"sp_openid": t.OpenID}
	}
	if t.TransactionID != "" {
		m["transaction_id"], m["success_time"] = t.TransactionID, t.SuccessTime
	}
	return m
}

func (p *payments) query(r *http.Request, _ []byte) (int, any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.txns[r.PathValue("no")]
	if !ok || !ownedBy(t, r.URL.Query().Get("sub_mchid")) {
		return 404, map[string]string{"code": "ORDER_NOT_EXIST", "message": "no such order"}
	}
	return 200, p.txnJSON(t)
}

func (p *payments) close(r *http.Request, body []byte) (int, any) {
	var in struct {
		SubMchID string `json:"sub_mchid"`
	}
	_ = json.Unmarshal(body, &in)
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.txns[r.PathValue("no")]
	if !ok || !ownedBy(t, in.SubMchID) {
		return 404, map[string]string{"code": "ORDER_NOT_EXIST", "message": "no such order"}
	}
	if t.State == "SUCCESS" {
		return 400, map[string]string{"code": "ORDERPAID", "message": "paid"}
	}
	t.State = "CLOSED"
	return 204, nil
}

func (p *payments) refund(r *http.Request, body []byte) (int, any) {
	var in struct {
		OutTradeNo  string `json:"out_trade_no"`
		OutRefundNo string `json:"out_refund_no"`
		NotifyURL   string `json:"notify_url"`
		SubMchID    string `json:"sub_mchid"`
		Amount      struct{ Refund, Total int64 }
	}
	if json.Unmarshal(body, &in) != nil || in.OutRefundNo == "" {
		return 400, map[string]string{"code": "PARAM_ERROR", "message": "bad refund"}
	}
	p.mu.Lock()
	if status, out := p.nextRefundError(); status != 0 {
		p.mu.Unlock()
		return status, out
	}
	t, ok := p.txns[in.OutTradeNo]
	if !ok || t.State != "SUCCESS" && t.State != "REFUND" || !ownedBy(t, in.SubMchID) {
		p.mu.Unlock()
		return 400, map[string]string{"code": "RESOURCE_NOT_EXISTS", "message": "not paid"}
	}
	rf, dup := p.refunds[in.OutRefundNo]
	if !dup && (in.Amount.Refund <= 0 || in.Amount.Total != t.Total || t.Refunded+in.Amount.Refund > t.Total) {
		p.mu.Unlock()
		return 400, map[string]string{"code": "INVALID_REQUEST", "message": fmt.Sprintf("refund %d of total %d: %d refunded already, %d paid", in.Amount.Refund, in.Amount.Total, t.Refunded, t.Total)}
	}
	if !dup {
		if status, out := p.refundRefusal(in.OutTradeNo, p.o.Now()); status != 0 {
			p.mu.Unlock()
			return status, out
		}
		fromFrozen, ok := p.takeForRefund(t, in.Amount.Refund)
		if !ok {
			p.mu.Unlock()
			return 403, map[string]string{"code": "NOT_ENOUGH", "message": "the sub-merchant's balance is not enough for this refund"}
		}
		p.refundLog[in.OutTradeNo] = append(p.refundLog[in.OutTradeNo], RefundTaken{OutRefundNo: in.OutRefundNo, At: p.o.Now()})
		t.Refunded += in.Amount.Refund
		p.seq++
		rf = &simRefund{OutRefundNo: in.OutRefundNo, OutTradeNo: in.OutTradeNo, RefundID: fmt.Sprintf("5030%016d", p.seq),
			Status: "PROCESSING", NotifyURL: in.NotifyURL, Refund: in.Amount.Refund, Total: in.Amount.Total, FromFrozen: fromFrozen}
		if p.refundAtOnce && !p.refundFails {
			rf.Status, rf.SucceededAt = "SUCCESS", p.o.Now()
		}
		p.refunds[in.OutRefundNo] = rf
		t.State = "REFUND"
	}
	out := map[string]any{"refund_id": rf.RefundID, "out_refund_no": rf.OutRefundNo, "out_trade_no": rf.OutTradeNo,
		"transaction_id": t.TransactionID, "status": rf.Status, "amount": map[string]any{"refund": rf.Refund, "total": rf.Total, "currency": "CNY"}}
	fails, drop := p.refundFails, p.dropRefundNotices
	p.mu.Unlock()
	if !dup {
		go p.finishRefund(rf, fails, drop)
	}
	return 200, out
}

func (p *payments) finishRefund(rf *simRefund, fails, drop bool) {
	time.Sleep(20 * time.Millisecond)
	status, event := "SUCCESS", "REFUND.SUCCESS"
	if fails {
		status, event = "ABNORMAL", "REFUND.ABNORMAL"
	}
	p.mu.Lock()
	rf.Status = status
	if status == "SUCCESS" {
		rf.SucceededAt = p.o.Now()
	}
	t := p.txns[rf.OutTradeNo]
	if fails && t != nil {
		// The money did not leave: it may be refunded again.
		t.Refunded -= rf.Refund
		p.giveBackRefund(t, rf)
	}
	notice := map[string]any{"mchid": p.o.MchID, "out_trade_no": rf.OutTradeNo, "refund_id": rf.RefundID,
		"out_refund_no": rf.OutRefundNo, "refund_status": status, "amount": map[string]any{"refund": rf.Refund, "total": rf.Total}}
	if t != nil && t.SubMchID != "" {
		delete(notice, "mchid")
		notice["sp_mchid"], notice["sub_mchid"] = p.o.MchID, t.SubMchID
	}
	plain, _ := json.Marshal(notice)
	url := rf.NotifyURL
	p.mu.Unlock()
	if drop {
		return
	}
	p.deliver(context.Background(), url, event, "refund", plain, deliveryPlan{copies: 1, retries: 8, retryBase: 50 * time.Millisecond})
}

func (p *payments) queryRefund(r *http.Request, _ []byte) (int, any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rf, ok := p.refunds[r.PathValue("no")]
	if ok && !ownedBy(p.txns[rf.OutTradeNo], r.URL.Query().Get("sub_mchid")) {
		ok = false
	}
	if !ok {
		return 404, map[string]string{"code": "RESOURCE_NOT_EXISTS", "message": "no such refund"}
	}
	return 200, map[string]any{"refund_id": rf.RefundID, "out_refund_no": rf.OutRefundNo, "out_trade_no": rf.OutTradeNo, "status": rf.Status}
}

// PayRequest is the control API's "the user paid" with delivery knobs.
type PayRequest struct {
	OutTradeNo string `json:"out_trade_no"`
	// Copies of the notification to send (default 1), Concurrent sends
	// them at once, DelayMS waits before the first, Drop sends none.
	Copies     int   `json:"copies"`
	Concurrent bool  `json:"concurrent"`
	DelayMS    int   `json:"delay_ms"`
	Drop       bool  `json:"drop"`
	Retries    int   `json:"retries"`       // re-deliveries after a non-success answer (platform: up to 15 over 24h)
	RetryMS    int   `json:"retry_base_ms"` // first retry delay (doubles)
	AmountFen  int64 `json:"amount_fen"`    // report another amount (mismatch tests)
	// ReorderMS delays each copy by a random 0..ReorderMS, so concurrent
	// copies (and other notifications in flight) arrive in any order.
	ReorderMS int `json:"reorder_ms"`
}

// PayResult lists the answers the merchant gave to each delivery.
type PayResult struct {
	TransactionID string `json:"transaction_id"`
	Answers       []int  `json:"answers"`
	// Deliveries counts every HTTP delivery made, retries included.
	Deliveries int `json:"deliveries"`
}

func (p *payments) simPay(w http.ResponseWriter, r *http.Request) {
	var in PayRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	p.mu.Lock()
	t, ok := p.txns[in.OutTradeNo]
	if !ok || t.State == "CLOSED" {
		p.mu.Unlock()
		http.Error(w, "no such open payment", 404)
		return
	}
	if t.State == "NOTPAY" {
		p.seq++
		t.State, t.TransactionID = "SUCCESS", fmt.Sprintf("4200%016d", p.seq)
		p.byTxnID[t.TransactionID] = t
		t.PaidAt = p.o.Now()
		t.SuccessTime = t.PaidAt.Format(time.RFC3339)
		if t.ProfitSharing {
			t.Frozen = t.Total
		}
	}
	m := p.txnJSON(t)
	if in.AmountFen > 0 {
		m["amount"] = map[string]any{"total": in.AmountFen, "payer_total": in.AmountFen, "currency": "CNY"}
	}
	plain, _ := json.Marshal(m)
	url, txn := t.NotifyURL, t.TransactionID
	p.mu.Unlock()
	res := PayResult{TransactionID: txn}
	if !in.Drop {
		if in.Copies <= 0 {
			in.Copies = 1
		}
		time.Sleep(time.Duration(in.DelayMS) * time.Millisecond)
		res.Answers, res.Deliveries = p.deliver(r.Context(), url, "TRANSACTION.SUCCESS", "transaction", plain,
			deliveryPlan{copies: in.Copies, concurrent: in.Concurrent, retries: in.Retries, retryBase: time.Duration(in.RetryMS) * time.Millisecond,
				jitter: time.Duration(in.ReorderMS) * time.Millisecond})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

func (p *payments) simConfig(w http.ResponseWriter, r *http.Request) {
	var in struct {
		RefundFails       bool `json:"refund_fails"`
		DropRefundNotices bool `json:"drop_refund_notifications"`
		RefundAtOnce      bool `json:"refund_at_once"`
		PrepayDelayMS     int  `json:"prepay_delay_ms"`
		// Unsigned is "errors", "all" or "" (see payments.unsigned).
		Unsigned string `json:"unsigned"`
		// Failing names the APIs that answer 500 SYSTEM_ERROR.
		Failing []string `json:"failing"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	if in.Unsigned != "" && in.Unsigned != "errors" && in.Unsigned != "all" {
		http.Error(w, `unsigned: want "errors", "all" or ""`, 400)
		return
	}
	failing := map[string]bool{}
	for _, api := range in.Failing {
		failing[api] = true
	}
	p.mu.Lock()
	p.refundFails, p.dropRefundNotices, p.refundAtOnce = in.RefundFails, in.DropRefundNotices, in.RefundAtOnce
	p.prepayDelay = time.Duration(in.PrepayDelayMS) * time.Millisecond
	p.unsigned, p.failing = in.Unsigned, failing
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

type deliveryPlan struct {
	copies     int
	concurrent bool
	retries    int
	retryBase  time.Duration
	jitter     time.Duration
}

// deliver sends one notification (same id in every copy) and returns each
// copy's final answer and the number of HTTP deliveries; a non-success
// answer is retried like the platform does, with a growing delay (capped
// at maxRetryDelay).
func (p *payments) deliver(ctx context.Context, url, event, assoc string, plain []byte, plan deliveryPlan) ([]int, int) {
	nonce := randHex(6)
	ct, _ := wxpay.EncryptAEAD(p.o.APIv3Key, nonce, assoc, plain)
	body, _ := json.Marshal(wxpay.Notification{ID: "EV-" + randHex(8), CreateTime: p.o.Now().Format(time.RFC3339), EventType: event,
		ResourceType: "encrypt-resource", Summary: event, Resource: wxpay.Resource{OriginalType: assoc, Algorithm: "AEAD_AES_256_GCM",
			Ciphertext: ct, AssociatedData: assoc, Nonce: nonce}})
	answers := make([]int, plan.copies)
	var deliveries atomic.Int64
	send := func(i int) {
		if plan.jitter > 0 {
			n, _ := rand.Int(rand.Reader, big.NewInt(int64(plan.jitter)))
			time.Sleep(time.Duration(n.Int64()))
		}
		delay := plan.retryBase
		for attempt := 0; ; attempt++ {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			p.sign(req.Header, body)
			status := 0
			deliveries.Add(1)
			if resp, err := p.o.Client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			}
			answers[i] = status
			if status == 200 || status == 204 || attempt >= plan.retries {
				return
			}
			time.Sleep(delay)
			delay = min(2*delay, maxRetryDelay)
		}
	}
	var wg sync.WaitGroup
	for i := range plan.copies {
		if plan.concurrent {
			wg.Go(func() { send(i) })
		} else {
			send(i)
		}
	}
	wg.Wait()
	return answers, int(deliveries.Load())
}

// maxRetryDelay caps the growing delay between re-deliveries.
const maxRetryDelay = 5 * time.Second
