package wxsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// WeChat Pay's service-provider mode, as documented for 普通服务商: the
// partner JSAPI prepay (sp_appid, sp_mchid, sub_mchid, settle_info.
// profit_sharing) whose money is frozen for sharing, and profit sharing
// (分账) on it:
//
//   - a sharing order (POST /v3/profitsharing/orders) sends receivers
//     part of a paid transaction's frozen money, and with
//     unfreeze_unsplit the rest to the sub-merchant; not in the minute
//     after payment, at most 50 per transaction, never more than is
//     frozen, and to the service provider no more than its maximum ratio
//     of the transaction (30% unless the sub-merchant authorised
//     another). Its result is asynchronous: PROCESSING, then FINISHED
//     with each receiver's SUCCESS or CLOSED (a closed receiver's part
//     stays frozen). The same out_order_no is the same order.
//   - unfreeze (POST /v3/profitsharing/orders/unfreeze) sends everything
//     frozen to the sub-merchant; asynchronous too.
//   - a return (POST /v3/profitsharing/return-orders) takes back from a
//     receiver part of what an order sent it: at most what it sent less
//     what came back, at most 20 times per order, within 180 days; it
//     FAILS with BALANCE_NOT_ENOUGH when the receiver's account is short.
//     The same out_return_no answers as it ended.
//   - a refund of a sharing transaction takes what is still frozen first,
//     then the sub-merchant's account; NOT_ENOUGH when both fall short.
//
// Knobs (/sim/sharing) set the minimum age, the ratio, how long results
// take, receivers that fail, returns that stay PROCESSING, and the
// service provider's balance.

// defaultShareMinAge is WeChat Pay's minute after payment.
const defaultShareMinAge = time.Minute

// maxSharesPerTxn and maxReturnsPerOrder are the documented limits.
const (
	maxSharesPerTxn    = 50
	maxReturnsPerOrder = 20
	returnWindow       = 180 * 24 * time.Hour
)

type simShareReceiver struct {
	Type        string `json:"type"`
	Account     string `json:"account"`
	Amount      int64  `json:"amount"`
	Description string `json:"description"`
	Result      string `json:"result"`
	FailReason  string `json:"fail_reason,omitempty"`
	DetailID    string `json:"detail_id"`
	CreateTime  string `json:"create_time"`
	FinishTime  string `json:"finish_time,omitempty"`
}

type simShare struct {
	OutOrderNo, OrderID, TransactionID, OutTradeNo, SubMchID, State string
	Receivers                                                       []simShareReceiver
	Unfreeze                                                        bool
	Created, Finished                                               time.Time
	// Returned is what returns took back, by receiver account; Returns
	// counts them.
	Returned map[string]int64
	Returns  int
}

type simReturn struct {
	OutReturnNo, ReturnID, OutOrderNo, OrderID, SubMchID, ReturnMchID, Result, FailReason string
	Amount                                                                                int64
	Created, Finished                                                                     time.Time
}

// SharingConfig is the body of POST /sim/sharing.
type SharingConfig struct {
	// MinAgeMS is how old a payment must be before it is shared (default
	// the documented minute; -1 none).
	MinAgeMS int `json:"min_age_ms"`
	// MaxRatioBps caps what the service provider receives, in basis
	// points of the transaction (default 3000).
	MaxRatioBps int64 `json:"max_ratio_bps"`
	// DelayMS is how long a sharing order stays PROCESSING (default 50).
	DelayMS int `json:"delay_ms"`
	// FailReceivers closes every receiver's part (ACCOUNT_ABNORMAL).
	FailReceivers bool `json:"fail_receivers"`
	// ReturnsProcessing answers returns PROCESSING; they succeed (or
	// fail) when next asked about.
	ReturnsProcessing bool `json:"returns_processing"`
	// ProviderBalance, when set, is the service provider's account
	// balance from now on (what returns are taken from).
	ProviderBalance *int64 `json:"provider_balance_fen"`
}

type sharingState struct {
	cfg      SharingConfig
	minAge   time.Duration
	shares   map[string]*simShare
	byTxn    map[string][]string // transaction_id -> out_order_no
	returns  map[string]*simReturn
	balances map[string]int64 // account (mchid or sub_mchid) -> balance
}

func newSharingState() sharingState {
	return sharingState{cfg: SharingConfig{MaxRatioBps: 3000, DelayMS: 50}, minAge: defaultShareMinAge,
		shares: map[string]*simShare{}, byTxn: map[string][]string{}, returns: map[string]*simReturn{}, balances: map[string]int64{}}
}

func (p *payments) withSharing(s *Server) {
	s.mux.HandleFunc("POST /v3/profitsharing/orders", p.merchant("share", p.share))
	s.mux.HandleFunc("POST /v3/profitsharing/orders/unfreeze", p.merchant("share", p.unfreeze))
	s.mux.HandleFunc("GET /v3/profitsharing/orders/{no}", p.merchant("query_share", p.queryShare))
	s.mux.HandleFunc("POST /v3/profitsharing/return-orders", p.merchant("return", p.returnShare))
	s.mux.HandleFunc("GET /v3/profitsharing/return-orders/{no}", p.merchant("query_return", p.queryReturn))
	s.mux.HandleFunc("GET /v3/profitsharing/bills", p.merchant("bill", p.bill("sharing")))
	s.mux.HandleFunc("POST /sim/sharing", p.simSharing)
	s.mux.HandleFunc("GET /sim/sharing", p.simSharingState)
}

// ownedBy reports whether t is the transaction a call for sub (the
// sub_mchid it names, or "" in the merchant mode) may touch.
func ownedBy(t *simTxn, sub string) bool {
	return t != nil && t.SubMchID == sub
}

// takeForRefund takes amount for a refund of t: from what is frozen
// first, then from the sub-merchant's account. It reports what came from
// the frozen money, and false (taking nothing) when both fall short.
func (p *payments) takeForRefund(t *simTxn, amount int64) (int64, bool) {
	if !t.ProfitSharing {
		return amount, true
	}
	fromFrozen := min(t.Frozen, amount)
	rest := amount - fromFrozen
	if p.sharing.balances[t.SubMchID] < rest {
		return 0, false
	}
	t.Frozen -= fromFrozen
	p.sharing.balances[t.SubMchID] -= rest
	t.FromBalance += rest
	return fromFrozen, true
}

// giveBackRefund puts back what a refund that failed took.
func (p *payments) giveBackRefund(t *simTxn, rf *simRefund) {
	if !t.ProfitSharing {
		return
	}
	t.Frozen += rf.FromFrozen
	rest := rf.Refund - rf.FromFrozen
	p.sharing.balances[t.SubMchID] += rest
	t.FromBalance -= rest
}

func paramError(msg string) (int, any) {
	return 400, map[string]string{"code": "PARAM_ERROR", "message": msg}
}

func invalid(msg string) (int, any) {
	return 400, map[string]string{"code": "INVALID_REQUEST", "message": msg}
}

func (p *payments) share(_ *http.Request, body []byte) (int, any) {
	var in struct {
		SubMchID        string             `json:"sub_mchid"`
		TransactionID   string             `json:"transaction_id"`
		OutOrderNo      string             `json:"out_order_no"`
		Receivers       []simShareReceiver `json:"receivers"`
		UnfreezeUnsplit bool               `json:"unfreeze_unsplit"`
	}
	if json.Unmarshal(body, &in) != nil || in.SubMchID == "" || in.TransactionID == "" || in.OutOrderNo == "" || len(in.Receivers) == 0 || len(in.Receivers) > 50 {
		return paramError("sub_mchid, transaction_id, out_order_no and 1 to 50 receivers are required")
	}
	return p.startShare(in.SubMchID, in.TransactionID, in.OutOrderNo, in.Receivers, in.UnfreezeUnsplit)
}

func (p *payments) unfreeze(_ *http.Request, body []byte) (int, any) {
	var in struct {
		SubMchID      string `json:"sub_mchid"`
		TransactionID string `json:"transaction_id"`
		OutOrderNo    string `json:"out_order_no"`
		Description   string `json:"description"`
	}
	if json.Unmarshal(body, &in) != nil || in.SubMchID == "" || in.TransactionID == "" || in.OutOrderNo == "" || in.Description == "" {
		return paramError("sub_mchid, transaction_id, out_order_no and description are required")
	}
	return p.startShare(in.SubMchID, in.TransactionID, in.OutOrderNo, nil, true)
}

// txnByID finds a transaction by its transaction_id.
func (p *payments) txnByID(id string) *simTxn {
	return p.byTxnID[id]
}

// startShare checks a sharing order against the rules and accepts it
// PROCESSING; finishShare ends it.
func (p *payments) startShare(sub, txnID, outOrderNo string, receivers []simShareReceiver, unfreeze bool) (int, any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := &p.sharing
	if sh, ok := st.shares[outOrderNo]; ok {
		if sh.TransactionID != txnID || sh.SubMchID != sub {
			return invalid("out_order_no is another sharing order's")
		}
		return 200, p.shareJSON(sh)
	}
	t := p.txnByID(txnID)
	switch {
	case t == nil || !ownedBy(t, sub) || t.SubMchID == "":
		return 404, map[string]string{"code": "RESOURCE_NOT_EXISTS", "message": "no such transaction of this sub-merchant"}
	case !t.ProfitSharing:
		return invalid("the transaction was not taken for profit sharing")
	case st.minAge > 0 && p.o.Now().Sub(t.PaidAt) < st.minAge:
		return invalid("a transaction cannot be shared in the minute after its payment")
	case len(st.byTxn[txnID]) >= maxSharesPerTxn:
		return invalid("a transaction takes at most 50 sharing orders")
	case t.Frozen == 0:
		return invalid("nothing of the transaction is frozen: it was shared, unfrozen or refunded")
	}
	var sum int64
	for _, r := range receivers {
		if r.Type != "MERCHANT_ID" || r.Account != p.o.MchID || r.Amount <= 0 || r.Description == "" {
			return paramError("a receiver is the service provider's MERCHANT_ID with a positive amount and a description")
		}
		sum += r.Amount
	}
	if sum > t.Frozen {
		return 403, map[string]string{"code": "NOT_ENOUGH", "message": fmt.Sprintf("sharing %d of %d frozen", sum, t.Frozen)}
	}
	if sum*10000 > t.Total*st.cfg.MaxRatioBps {
		return invalid(fmt.Sprintf("the service provider may receive at most %d bps of the transaction", st.cfg.MaxRatioBps))
	}
	p.seq++
	now := p.o.Now()
	sh := &simShare{OutOrderNo: outOrderNo, OrderID: fmt.Sprintf("3008%016d", p.seq), TransactionID: txnID, OutTradeNo: t.OutTradeNo,
		SubMchID: sub, State: "PROCESSING", Unfreeze: unfreeze, Created: now, Returned: map[string]int64{}}
	for i, r := range receivers {
		r.Result, r.DetailID, r.CreateTime = "PENDING", fmt.Sprintf("3601%016d%02d", p.seq, i), now.Format(time.RFC3339)
		sh.Receivers = append(sh.Receivers, r)
	}
	// What is shared leaves the frozen money now, so that nothing else
	// takes it meanwhile.
	t.Frozen -= sum
	st.shares[outOrderNo] = sh
	st.byTxn[txnID] = append(st.byTxn[txnID], outOrderNo)
	delay, fails := time.Duration(st.cfg.DelayMS)*time.Millisecond, st.cfg.FailReceivers
	time.AfterFunc(delay, func() { p.finishShare(sh, t, fails) })
	return 200, p.shareJSON(sh)
}

// finishShare ends a sharing order: each receiver's part arrives (or is
// closed, and stays frozen), and with unfreeze everything still frozen
// goes to the sub-merchant, reported as a receiver of its own.
func (p *payments) finishShare(sh *simShare, t *simTxn, fails bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := &p.sharing
	now := p.o.Now().Format(time.RFC3339)
	closed := false
	for i := range sh.Receivers {
		r := &sh.Receivers[i]
		r.FinishTime = now
		if fails {
			r.Result, r.FailReason = "CLOSED", "ACCOUNT_ABNORMAL"
			t.Frozen += r.Amount
			closed = true
			continue
		}
		r.Result = "SUCCESS"
		st.balances[r.Account] += r.Amount
	}
	if sh.Unfreeze && !closed && t.Frozen > 0 {
		p.seq++
		sh.Receivers = append(sh.Receivers, simShareReceiver{Type: "MERCHANT_ID", Account: t.SubMchID, Amount: t.Frozen,
			Description: "解冻给分账方", Result: "SUCCESS", DetailID: fmt.Sprintf("3601%016d99", p.seq), CreateTime: now, FinishTime: now})
		st.balances[t.SubMchID] += t.Frozen
		t.Frozen = 0
	}
	sh.State, sh.Finished = "FINISHED", p.o.Now()
}

func (p *payments) shareJSON(sh *simShare) map[string]any {
	return map[string]any{"sub_mchid": sh.SubMchID, "transaction_id": sh.TransactionID, "out_order_no": sh.OutOrderNo,
		"order_id": sh.OrderID, "state": sh.State, "receivers": append([]simShareReceiver(nil), sh.Receivers...)}
}

func (p *payments) queryShare(r *http.Request, _ []byte) (int, any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := r.URL.Query()
	sh, ok := p.sharing.shares[r.PathValue("no")]
	if !ok || sh.SubMchID != q.Get("sub_mchid") || sh.TransactionID != q.Get("transaction_id") {
		return 404, map[string]string{"code": "RESOURCE_NOT_EXISTS", "message": "no such sharing order"}
	}
	return 200, p.shareJSON(sh)
}

func (p *payments) returnShare(_ *http.Request, body []byte) (int, any) {
	var in struct {
		SubMchID    string `json:"sub_mchid"`
		OrderID     string `json:"order_id"`
		OutOrderNo  string `json:"out_order_no"`
		OutReturnNo string `json:"out_return_no"`
		ReturnMchID string `json:"return_mchid"`
		Amount      int64  `json:"amount"`
		Description string `json:"description"`
	}
	if json.Unmarshal(body, &in) != nil || in.SubMchID == "" || in.OutReturnNo == "" || in.ReturnMchID == "" || in.Amount <= 0 || in.Description == "" ||
		(in.OrderID == "") == (in.OutOrderNo == "") {
		return paramError("sub_mchid, order_id or out_order_no, out_return_no, return_mchid, a positive amount and description are required")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := &p.sharing
	if rt, ok := st.returns[in.OutReturnNo]; ok {
		return 200, returnJSON(rt)
	}
	sh := st.shares[in.OutOrderNo]
	if in.OrderID != "" {
		sh = nil
		for _, s := range st.shares {
			if s.OrderID == in.OrderID {
				sh = s
			}
		}
	}
	if sh == nil || sh.SubMchID != in.SubMchID {
		return 404, map[string]string{"code": "RESOURCE_NOT_EXISTS", "message": "no such sharing order"}
	}
	var sent int64
	for _, r := range sh.Receivers {
		if r.Account == in.ReturnMchID && r.Account != sh.SubMchID && r.Result == "SUCCESS" {
			sent += r.Amount
		}
	}
	switch {
	case sh.State != "FINISHED":
		return invalid("the sharing order has not finished")
	case sent == 0:
		return invalid("return_mchid received nothing of this sharing order")
	case in.Amount > sent-sh.Returned[in.ReturnMchID]:
		return invalid(fmt.Sprintf("return %d: %d was shared to it, %d returned already", in.Amount, sent, sh.Returned[in.ReturnMchID]))
	case sh.Returns >= maxReturnsPerOrder:
		return invalid("a sharing order takes at most 20 returns")
	case p.o.Now().Sub(sh.Created) > returnWindow:
		return invalid("returns are taken within 180 days")
	}
	p.seq++
	rt := &simReturn{OutReturnNo: in.OutReturnNo, ReturnID: fmt.Sprintf("3008%016d", p.seq), OutOrderNo: sh.OutOrderNo, OrderID: sh.OrderID,
		SubMchID: sh.SubMchID, ReturnMchID: in.ReturnMchID, Amount: in.Amount, Result: "PROCESSING", Created: p.o.Now()}
	st.returns[in.OutReturnNo] = rt
	sh.Returns++
	if !st.cfg.ReturnsProcessing {
		p.settleReturn(rt)
	}
	return 200, returnJSON(rt)
}

// settleReturn ends a PROCESSING return: from the receiver's account to
// the sub-merchant's, or FAILED when the receiver's balance is short.
func (p *payments) settleReturn(rt *simReturn) {
	st := &p.sharing
	if st.balances[rt.ReturnMchID] < rt.Amount {
		rt.Result, rt.FailReason = "FAILED", "BALANCE_NOT_ENOUGH"
		return
	}
	st.balances[rt.ReturnMchID] -= rt.Amount
	st.balances[rt.SubMchID] += rt.Amount
	st.shares[rt.OutOrderNo].Returned[rt.ReturnMchID] += rt.Amount
	rt.Result, rt.Finished = "SUCCESS", p.o.Now()
}

func returnJSON(rt *simReturn) map[string]any {
	m := map[string]any{"sub_mchid": rt.SubMchID, "order_id": rt.OrderID, "out_order_no": rt.OutOrderNo, "out_return_no": rt.OutReturnNo,
		"return_id": rt.ReturnID, "return_mchid": rt.ReturnMchID, "amount": rt.Amount, "result": rt.Result,
		"create_time": rt.Created.Format(time.RFC3339)}
	if rt.FailReason != "" {
		m["fail_reason"] = rt.FailReason
	}
	return m
}

func (p *payments) queryReturn(r *http.Request, _ []byte) (int, any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := r.URL.Query()
	rt, ok := p.sharing.returns[r.PathValue("no")]
	if !ok || rt.SubMchID != q.Get("sub_mchid") || rt.OutOrderNo != q.Get("out_order_no") {
		return 404, map[string]string{"code": "RESOURCE_NOT_EXISTS", "message": "no such return"}
	}
	if rt.Result == "PROCESSING" && !p.sharing.cfg.ReturnsProcessing {
		p.settleReturn(rt)
	}
	return 200, returnJSON(rt)
}

func (p *payments) simSharing(w http.ResponseWriter, r *http.Request) {
	var in SharingConfig
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	if in.MaxRatioBps == 0 {
		in.MaxRatioBps = 3000
	}
	if in.DelayMS == 0 {
		in.DelayMS = 50
	}
	p.mu.Lock()
	st := &p.sharing
	st.cfg = in
	switch {
	case in.MinAgeMS < 0:
		st.minAge = 0
	case in.MinAgeMS == 0:
		st.minAge = defaultShareMinAge
	default:
		st.minAge = time.Duration(in.MinAgeMS) * time.Millisecond
	}
	if in.ProviderBalance != nil {
		st.balances[p.o.MchID] = *in.ProviderBalance
	}
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// SharingTxn is one sharing transaction's money as the simulator holds
// it (GET /sim/sharing). Nothing is made or lost: total - refunded =
// frozen + shared + unfrozen - from_balance, and what the platform kept
// (shared - returned) plus what the merchant kept (unfrozen + returned -
// from_balance) is what was paid less refunds, once nothing is frozen.
type SharingTxn struct {
	OutTradeNo string `json:"out_trade_no"`
	SubMchID   string `json:"sub_mchid"`
	Total      int64  `json:"total"`
	Refunded   int64  `json:"refunded"`
	Frozen     int64  `json:"frozen"`
	// Shared is what receivers got (less what returns took back),
	// Unfrozen what went to the sub-merchant by unfreezing, Returned what
	// returns took back, FromBalance what refunds took from the
	// sub-merchant's account.
	Shared      int64 `json:"shared"`
	Unfrozen    int64 `json:"unfrozen"`
	Returned    int64 `json:"returned"`
	FromBalance int64 `json:"from_balance"`
}

// SharingState is GET /sim/sharing.
type SharingState struct {
	Transactions []SharingTxn     `json:"transactions"`
	Balances     map[string]int64 `json:"balances"`
}

func (p *payments) simSharingState(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	out := SharingState{Balances: map[string]int64{}}
	for k, v := range p.sharing.balances {
		out.Balances[k] = v
	}
	// The refunds by trade in one pass: an hour's soak has tens of
	// thousands of each, and a scan of every refund per trade took longer
	// than the soak's check waits.
	refunded := map[string]int64{}
	for _, rf := range p.refunds {
		if rf.Status == "SUCCESS" {
			refunded[rf.OutTradeNo] += rf.Refund
		}
	}
	for _, t := range p.txns {
		if !t.ProfitSharing || t.TransactionID == "" {
			continue
		}
		st := SharingTxn{OutTradeNo: t.OutTradeNo, SubMchID: t.SubMchID, Total: t.Total, Frozen: t.Frozen, FromBalance: t.FromBalance,
			Refunded: refunded[t.OutTradeNo]}
		for _, no := range p.sharing.byTxn[t.TransactionID] {
			sh := p.sharing.shares[no]
			for _, r := range sh.Receivers {
				switch {
				case r.Result != "SUCCESS":
				case r.Account == t.SubMchID:
					st.Unfrozen += r.Amount
				default:
					st.Shared += r.Amount
				}
			}
			for _, v := range sh.Returned {
				st.Returned += v
			}
		}
		out.Transactions = append(out.Transactions, st)
	}
	p.mu.Unlock()
	sort.Slice(out.Transactions, func(i, j int) bool {
		return strings.Compare(out.Transactions[i].OutTradeNo, out.Transactions[j].OutTradeNo) < 0
	})
	writeJSON(w, out)
}

// partnerPrepay is the service-provider mode's JSAPI prepay.
func (p *payments) partnerPrepay(_ *http.Request, body []byte) (int, any) {
	var in struct {
		SpAppID     string `json:"sp_appid"`
		SpMchID     string `json:"sp_mchid"`
		SubAppID    string `json:"sub_appid"`
		SubMchID    string `json:"sub_mchid"`
		Description string `json:"description"`
		OutTradeNo  string `json:"out_trade_no"`
		NotifyURL   string `json:"notify_url"`
		SettleInfo  struct {
			ProfitSharing bool `json:"profit_sharing"`
		} `json:"settle_info"`
		Amount struct{ Total int64 }
		Payer  struct {
			SpOpenID string `json:"sp_openid"`
		}
	}
	if json.Unmarshal(body, &in) != nil || in.OutTradeNo == "" || in.Amount.Total <= 0 || in.SubMchID == "" || in.SpMchID != p.o.MchID || in.Payer.SpOpenID == "" {
		return paramError("bad partner prepay: sp_mchid, sub_mchid, out_trade_no, amount and payer.sp_openid are required")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.txns[in.OutTradeNo]; ok && t.State != "NOTPAY" {
		return 400, map[string]string{"code": "ORDERPAID", "message": "already " + t.State}
	}
	p.txns[in.OutTradeNo] = &simTxn{AppID: in.SpAppID, MchID: in.SpMchID, SubMchID: in.SubMchID, SubAppID: in.SubAppID,
		ProfitSharing: in.SettleInfo.ProfitSharing, OutTradeNo: in.OutTradeNo, NotifyURL: in.NotifyURL,
		OpenID: in.Payer.SpOpenID, Description: in.Description, Total: in.Amount.Total, State: "NOTPAY"}
	return 200, map[string]string{"prepay_id": "wx" + strings.ReplaceAll(in.OutTradeNo, "-", "")}
}

type sharingLine struct {
	at                                              time.Time
	sub, receiver, txn, wxID, outNo, kind, describe string
	amount                                          int64
}

// Kinds of the profit-sharing bill's lines.
const (
	sharingLineShare    = "分账"
	sharingLineUnfreeze = "解冻给分账方"
	sharingLineReturn   = "回退"
)

// sharingLines are the day's successful shares, unfreezes and returns as
// the profit-sharing bill has them (the bills' Drop and AmountOff faults
// apply by out_order_no or out_return_no); p.mu is held.
func (p *payments) sharingLines(day string) []sharingLine {
	c := p.billFaults
	dropped := map[string]bool{}
	for _, no := range c.Drop {
		dropped[no] = true
	}
	var lines []sharingLine
	for _, sh := range p.sharing.shares {
		if sh.State != "FINISHED" || !onDay(sh.Finished, day) || dropped[sh.OutOrderNo] {
			continue
		}
		for _, r := range sh.Receivers {
			if r.Result != "SUCCESS" {
				continue
			}
			kind := sharingLineShare
			if r.Account == sh.SubMchID {
				kind = sharingLineUnfreeze
			}
			lines = append(lines, sharingLine{at: sh.Finished, sub: sh.SubMchID, receiver: r.Account, txn: sh.TransactionID, wxID: sh.OrderID,
				outNo: sh.OutOrderNo, kind: kind, describe: r.Description, amount: r.Amount + c.AmountOff[sh.OutOrderNo]})
		}
	}
	for _, rt := range p.sharing.returns {
		if rt.Result != "SUCCESS" || !onDay(rt.Finished, day) || dropped[rt.OutReturnNo] {
			continue
		}
		lines = append(lines, sharingLine{at: rt.Finished, sub: rt.SubMchID, receiver: rt.ReturnMchID, txn: p.sharing.shares[rt.OutOrderNo].TransactionID,
			wxID: rt.ReturnID, outNo: rt.OutReturnNo, kind: sharingLineReturn, describe: "return", amount: rt.Amount + c.AmountOff[rt.OutReturnNo]})
	}
	sort.Slice(lines, func(i, j int) bool {
		if !lines[i].at.Equal(lines[j].at) {
			return lines[i].at.Before(lines[j].at)
		}
		return lines[i].outNo+lines[i].kind < lines[j].outNo+lines[j].kind
	})
	return lines
}

// sharingBill renders the profit-sharing bill: a line per share to a
// receiver, unfreeze to the sub-merchant and return, and a totals line.
func (p *payments) sharingBill(day string) []byte {
	var b strings.Builder
	b.WriteString("分账发起时间,分账方商户号,分账接收方,微信订单号,微信分账/回退单号,商户分账/回退单号,分账类型,处理结果,金额(元),分账描述\r\n")
	totals := map[string]int64{}
	lines := p.sharingLines(day)
	for _, l := range lines {
		totals[l.kind] += l.amount
		fields := []string{l.at.In(shanghai).Format(time.DateTime), l.sub, l.receiver, l.txn, l.wxID, l.outNo, l.kind, "SUCCESS", yuan(l.amount), l.describe}
		b.WriteString("`" + strings.Join(fields, ",`") + "\r\n")
	}
	b.WriteString("总条数,分账总金额,解冻总金额,回退总金额\r\n")
	fmt.Fprintf(&b, "`%d,`%s,`%s,`%s\r\n", len(lines), yuan(totals[sharingLineShare]), yuan(totals[sharingLineUnfreeze]), yuan(totals[sharingLineReturn]))
	return []byte(b.String())
}
