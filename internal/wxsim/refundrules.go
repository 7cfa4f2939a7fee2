package wxsim

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

// WeChat Pay's rules for the refunds of one payment, as documented: at
// most 50 of one transaction, at least a minute apart (a refund sooner is
// answered 429 FREQUENCY_LIMITED), and the refund API's documented
// errors on demand (/sim/refund-rules), each answered with its status.

// maxRefundsPerTrade is the platform's limit of refunds of one payment.
const maxRefundsPerTrade = 50

// defaultRefundGap is the platform's least time between two refunds of
// one payment.
const defaultRefundGap = time.Minute

// refundErrorStatus is the HTTP status WeChat Pay answers each refund
// error code with.
var refundErrorStatus = map[string]int{
	"SYSTEM_ERROR": 500, "NOT_ENOUGH": 403, "USER_ACCOUNT_ABNORMAL": 403, "FREQUENCY_LIMITED": 429, "INVALID_REQUEST": 400,
	"PARAM_ERROR": 400, "NO_AUTH": 403, "SIGN_ERROR": 401, "MCH_NOT_EXISTS": 400, "RESOURCE_NOT_EXISTS": 404, "REQUEST_BLOCKED": 403,
}

// RefundError makes the next Times refund calls answer Code.
type RefundError struct {
	Code  string `json:"code"`
	Times int    `json:"times"`
}

// RefundRules is the body of POST /sim/refund-rules: the gap between two
// refunds of a payment (nil leaves it; 0 turns the rule off) and the
// errors to answer the next refund calls with, in order (replacing any
// not yet answered).
type RefundRules struct {
	GapMS  *int          `json:"gap_ms"`
	Errors []RefundError `json:"errors"`
}

// RefundTaken is a refund the platform accepted, and when.
type RefundTaken struct {
	OutRefundNo string    `json:"out_refund_no"`
	At          time.Time `json:"at"`
}

// RefundLog is the answer of GET /sim/refunds: the refunds accepted, by
// out_trade_no, in the order they were.
type RefundLog struct {
	Trades map[string][]RefundTaken `json:"trades"`
}

// refundRefusal answers a new refund of trade the rules refuse, or
// returns 0; p.mu is held.
func (p *payments) refundRefusal(trade string, now time.Time) (int, any) {
	taken := p.refundLog[trade]
	switch {
	case len(taken) >= maxRefundsPerTrade:
		return 400, map[string]string{"code": "INVALID_REQUEST", "message": "the payment has been refunded 50 times, the most it may be"}
	case len(taken) > 0 && p.refundGap > 0 && now.Sub(taken[len(taken)-1].At) < p.refundGap:
		return 429, map[string]string{"code": "FREQUENCY_LIMITED", "message": "refunds of one payment must be a minute apart"}
	}
	return 0, nil
}

// nextRefundError takes the next error the rules want answered, or
// returns 0; p.mu is held.
func (p *payments) nextRefundError() (int, any) {
	for len(p.refundErrors) > 0 && p.refundErrors[0].Times <= 0 {
		p.refundErrors = p.refundErrors[1:]
	}
	if len(p.refundErrors) == 0 {
		return 0, nil
	}
	e := &p.refundErrors[0]
	e.Times--
	return refundErrorStatus[e.Code], map[string]string{"code": e.Code, "message": "simulated " + e.Code}
}

func (p *payments) simRefundRules(w http.ResponseWriter, r *http.Request) {
	var in RefundRules
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	for _, e := range in.Errors {
		if _, ok := refundErrorStatus[e.Code]; !ok || e.Times < 1 {
			http.Error(w, "errors: a documented refund error code, times at least 1", 400)
			return
		}
	}
	p.mu.Lock()
	if in.GapMS != nil {
		p.refundGap = time.Duration(*in.GapMS) * time.Millisecond
	}
	p.refundErrors = slices.Clone(in.Errors)
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (p *payments) simRefunds(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	out := RefundLog{Trades: map[string][]RefundTaken{}}
	for trade, taken := range p.refundLog {
		out.Trades[trade] = append([]RefundTaken(nil), taken...)
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
