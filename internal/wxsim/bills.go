package wxsim

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1" //nolint:gosec // G505: the bill's hash is SHA1, as WeChat Pay publishes it
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/takeout/takeout/internal/payment/wxpay"
)

// WeChat Pay's bills (对账单), from the simulator's own records: the
// trade bill (every payment and refund of a day, with its fee) and the
// fund bill (the basic account's movements), as documented: a bill of a
// day in Asia/Shanghai is ready from 10:00 the next day and kept three
// months; asking for one answers a download URL that lives five minutes
// and the SHA1 of the bill (uncompressed); the file is a CSV whose
// fields start with a backtick, amounts in yuan, ending in a totals line.
// Knobs (/sim/bills/config) make a bill disagree with what happened, one
// kind at a time.

// billFeeBps is the fee the simulator charges: 0.6% of each payment,
// given back in proportion with each refund, rounded to the fen.
const billFeeBps = 60

// billURLLife is how long a download URL lives.
const billURLLife = 5 * time.Minute

// BillConfig is the body of POST /sim/bills/config.
type BillConfig struct {
	// Now is the bills' clock (RFC 3339): which days' bills are ready. Empty is
	// the simulator's clock.
	Now string `json:"now"`
	// WrongHash answers a hash that is not the bill's.
	WrongHash bool `json:"wrong_hash"`
	// ExpiredURLs answers download URLs that have already expired.
	ExpiredURLs bool `json:"expired_urls"`
	// Drop leaves these out_trade_no and out_refund_no out of the trade bill.
	Drop []string `json:"drop"`
	// Extra adds a payment nobody made (out_trade_no T-EXTRA-...).
	Extra bool `json:"extra"`
	// AmountOff and FeeOff add fen to a payment's (or refund's) amount or
	// fee in the trade bill.
	AmountOff map[string]int64 `json:"amount_off"`
	FeeOff    map[string]int64 `json:"fee_off"`
	// RefundStatus reports these refunds with another status.
	RefundStatus map[string]string `json:"refund_status"`
	// FundOff adds fen to the fund bill's income from payments.
	FundOff int64 `json:"fund_off"`
}

type billFile struct {
	body    []byte
	expires time.Time
}

var shanghai = time.FixedZone("CST", 8*3600)

// billNow is the bills' clock; p.mu is held.
func (p *payments) billNow() time.Time {
	if !p.billClock.IsZero() {
		return p.billClock
	}
	return p.o.Now()
}

func yuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
}

// feeOf is the fee of an amount, rounded half up to the fen.
func feeOf(fen int64) int64 { return (fen*billFeeBps + 5000) / 10000 }

func onDay(t time.Time, day string) bool {
	return !t.IsZero() && t.In(shanghai).Format(time.DateOnly) == day
}

type tradeLine struct {
	at                                     time.Time
	outTradeNo, txn, outRefundNo, refundID string
	state, refundStatus                    string
	total, refund, fee                     int64
}

// tradeLines are the day's payments and refunds as the trade bill has
// them, faults applied; p.mu is held.
func (p *payments) tradeLines(day string) []tradeLine {
	c := p.billFaults
	dropped := map[string]bool{}
	for _, no := range c.Drop {
		dropped[no] = true
	}
	var lines []tradeLine
	for _, t := range p.txns {
		at, err := time.Parse(time.RFC3339, t.SuccessTime)
		if err != nil || !onDay(at, day) || dropped[t.OutTradeNo] {
			continue
		}
		lines = append(lines, tradeLine{at: at, outTradeNo: t.OutTradeNo, txn: t.TransactionID, state: "SUCCESS",
			total: t.Total + c.AmountOff[t.OutTradeNo], fee: feeOf(t.Total) + c.FeeOff[t.OutTradeNo]})
	}
	for _, rf := range p.refunds {
		t := p.txns[rf.OutTradeNo]
		if rf.Status != "SUCCESS" || !onDay(rf.SucceededAt, day) || dropped[rf.OutRefundNo] || t == nil {
			continue
		}
		status := "SUCCESS"
		if s, ok := c.RefundStatus[rf.OutRefundNo]; ok {
			status = s
		}
		lines = append(lines, tradeLine{at: rf.SucceededAt, outTradeNo: rf.OutTradeNo, txn: t.TransactionID, outRefundNo: rf.OutRefundNo,
			refundID: rf.RefundID, state: "REFUND", refundStatus: status, total: t.Total,
			refund: rf.Refund + c.AmountOff[rf.OutRefundNo], fee: -feeOf(rf.Refund) + c.FeeOff[rf.OutRefundNo]})
	}
	if c.Extra {
		at, _ := time.ParseInLocation(time.DateOnly+" 15:04", day+" 12:00", shanghai)
		lines = append(lines, tradeLine{at: at, outTradeNo: "T-EXTRA-" + day, txn: "4200EXTRA" + strings.ReplaceAll(day, "-", ""), state: "SUCCESS", total: 1234, fee: feeOf(1234)})
	}
	sort.Slice(lines, func(i, j int) bool {
		if !lines[i].at.Equal(lines[j].at) {
			return lines[i].at.Before(lines[j].at)
		}
		return lines[i].outTradeNo+lines[i].outRefundNo < lines[j].outTradeNo+lines[j].outRefundNo
	})
	return lines
}

// tradeBill renders the trade bill (bill_type ALL).
func (p *payments) tradeBill(day string) []byte {
	var b bytes.Buffer
	b.WriteString("交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类," +
		"应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注\r\n")
	var paid, refunded, fees int64
	lines := p.tradeLines(day)
	for _, l := range lines {
		appID := ""
		if t := p.txns[l.outTradeNo]; t != nil {
			appID = t.AppID
		}
		refundAmount, refundType := "0.00", ""
		if l.state == "REFUND" {
			refundAmount, refundType = yuan(l.refund), "ORIGINAL"
			refunded += l.refund
		} else {
			paid += l.total
		}
		fees += l.fee
		fields := []string{l.at.In(shanghai).Format(time.DateTime), appID, p.o.MchID, "0", "", l.txn, l.outTradeNo, "oUser", "JSAPI", l.state,
			"OTHERS", "CNY", yuan(l.total), "0.00", l.refundID, l.outRefundNo, refundAmount, "0.00", refundType, l.refundStatus,
			"takeout", "", yuan(l.fee), "0.60%", yuan(l.total), refundAmount, ""}
		b.WriteString("`" + strings.Join(fields, ",`") + "\r\n")
	}
	b.WriteString("总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额\r\n")
	fmt.Fprintf(&b, "`%d,`%s,`%s,`0.00,`%s000,`%s,`%s\r\n", len(lines), yuan(paid), yuan(refunded), yuan(fees), yuan(paid), yuan(refunded))
	return b.Bytes()
}

// fundBill renders the fund bill of the basic account.
func (p *payments) fundBill(day string) []byte {
	var b bytes.Buffer
	b.WriteString("记账时间,微信支付业务单号,资金流水单号,业务名称,业务类型,收支类型,收支金额（元）,账户结余（元）,资金变更提交申请人,备注,业务凭证号\r\n")
	var balance, in, out int64
	var nIn, nOut int
	row := func(at time.Time, ref, name, kind, dir string, fen int64) {
		if dir == "收入" {
			balance += fen
			in += fen
			nIn++
		} else {
			balance -= fen
			out += fen
			nOut++
		}
		fields := []string{at.In(shanghai).Format(time.DateTime), ref, "F" + ref, name, kind, dir, yuan(fen), yuan(balance), "system", "", ref}
		b.WriteString("`" + strings.Join(fields, ",`") + "\r\n")
	}
	off := p.billFaults.FundOff
	for _, l := range p.tradeLines(day) {
		if l.state == "SUCCESS" {
			fen := l.total + off
			off = 0
			row(l.at, l.txn, "交易收款", "交易", "收入", fen)
			if l.fee > 0 {
				row(l.at, l.txn, "交易手续费", "扣除交易手续费", "支出", l.fee)
			}
			continue
		}
		row(l.at, l.refundID, "退款", "退款", "支出", l.refund)
		if l.fee < 0 {
			row(l.at, l.refundID, "退还手续费", "退还交易手续费", "收入", -l.fee)
		}
	}
	b.WriteString("资金流水总笔数,收入笔数,收入金额,支出笔数,支出金额\r\n")
	fmt.Fprintf(&b, "`%d,`%d,`%s,`%d,`%s\r\n", nIn+nOut, nIn, yuan(in), nOut, yuan(out))
	return b.Bytes()
}

// bill answers GET /v3/bill/tradebill, /v3/bill/fundflowbill and
// /v3/profitsharing/bills.
func (p *payments) bill(kind string) merchantHandler {
	return func(r *http.Request, _ []byte) (int, any) {
		q := r.URL.Query()
		day := q.Get("bill_date")
		d, err := time.ParseInLocation(time.DateOnly, day, shanghai)
		if err != nil || (q.Get("tar_type") != "" && q.Get("tar_type") != "GZIP") {
			return 400, map[string]string{"code": "PARAM_ERROR", "message": "bill_date: YYYY-MM-DD; tar_type: GZIP"}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		now := p.billNow()
		switch {
		case now.Before(d.AddDate(0, 0, 1).Add(10 * time.Hour)):
			return 400, map[string]string{"code": "STATEMENT_CREATING", "message": "the bill of " + day + " is ready from 10:00 the next day"}
		case now.Sub(d) > 92*24*time.Hour:
			return 400, map[string]string{"code": "INVALID_REQUEST", "message": "bills are kept three months"}
		}
		var raw []byte
		switch kind {
		case "trade":
			if len(p.tradeLines(day)) == 0 {
				return 400, map[string]string{"code": "NO_STATEMENT_EXIST", "message": "no bill: nothing happened on " + day}
			}
			raw = p.tradeBill(day)
		case "sharing":
			if len(p.sharingLines(day)) == 0 {
				return 400, map[string]string{"code": "NO_STATEMENT_EXIST", "message": "no profit-sharing bill: nothing was shared on " + day}
			}
			raw = p.sharingBill(day)
		default:
			raw = p.fundBill(day)
		}
		sum := sha1.Sum(raw) //nolint:gosec // G401: WeChat Pay's bill hash
		hash := hex.EncodeToString(sum[:])
		if p.billFaults.WrongHash {
			hash = strings.Repeat("0", len(hash))
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		token := randHex(16)
		expires := p.o.Now().Add(billURLLife)
		if p.billFaults.ExpiredURLs {
			expires = p.o.Now().Add(-time.Second)
		}
		p.billFiles[token] = billFile{body: gz.Bytes(), expires: expires}
		return 200, map[string]string{"hash_type": "SHA1", "hash_value": hash,
			"download_url": "http://" + r.Host + "/v3/billdownload/file?token=" + token}
	}
}

// download serves a bill's file (gzip), while its URL lives. The
// platform does not sign the file: its hash, given with the URL, is what
// proves it.
func (p *payments) download(w http.ResponseWriter, r *http.Request) {
	a, err := wxpay.ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil || a.MchID != p.o.MchID ||
		wxpay.VerifySHA256WithRSA(p.o.MerchantKey, wxpay.RequestMessage(r.Method, r.URL.RequestURI(), a.Timestamp, a.Nonce, nil), a.Signature) != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"code":"SIGN_ERROR","message":"bad authorization"}`))
		return
	}
	p.mu.Lock()
	f, ok := p.billFiles[r.URL.Query().Get("token")]
	live := ok && p.o.Now().Before(f.expires)
	p.mu.Unlock()
	if !live {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":"INVALID_REQUEST","message":"the download URL expired: ask for the bill again"}`))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(f.body)
}

func (p *payments) simBillConfig(w http.ResponseWriter, r *http.Request) {
	var in BillConfig
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var clock time.Time
	if in.Now != "" {
		t, err := time.Parse(time.RFC3339, in.Now)
		if err != nil {
			http.Error(w, "now: RFC 3339", 400)
			return
		}
		clock = t
	}
	p.mu.Lock()
	p.billFaults, p.billClock = in, clock
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
