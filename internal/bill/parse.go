package bill

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ParseYuan reads an amount in yuan as WeChat Pay's bills write it
// ("`12.30", "-0.01", "0.36000") into fen, without floating point:
// digits after the second decimal must be zeros (a fen is the smallest
// amount that moves).
func ParseYuan(s string) (int64, error) {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "`"))
	neg := strings.HasPrefix(s, "-")
	digits := strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(digits, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) || len(whole) > 15 {
		return 0, fmt.Errorf("amount %q: not yuan", s)
	}
	if len(frac) > 2 {
		if strings.Trim(frac[2:], "0") != "" {
			return 0, fmt.Errorf("amount %q: finer than a fen", s)
		}
		frac = frac[:2]
	}
	frac += strings.Repeat("0", 2-len(frac))
	yuan, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", s, err)
	}
	fen, _ := strconv.ParseInt(frac, 10, 64)
	v := yuan*100 + fen
	if neg {
		v = -v
	}
	return v, nil
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// TradeRow is one line of a trade bill: a payment (State SUCCESS) or a
// refund (State REFUND).
type TradeRow struct {
	Time          string
	TransactionID string
	OutTradeNo    string
	State         string
	TotalFen      int64
	RefundID      string
	OutRefundNo   string
	RefundFen     int64
	RefundStatus  string
	FeeFen        int64
}

// TradeBill is a parsed trade bill and its totals line.
type TradeBill struct {
	Rows                 []TradeRow
	Count                int
	PaidFen, RefundedFen int64
	FeeFen               int64
}

// FundBill is what a fund bill's lines add up to, by business type.
type FundBill struct {
	Rows int
	// IncomeFen and ExpenseFen are its totals line.
	IncomeFen, ExpenseFen int64
	// ByType sums the lines by business type and direction (交易/收入,
	// 退款/支出, 扣除交易手续费/支出, 退还交易手续费/收入).
	ByType map[string]int64
}

// ErrBillMalformed is a bill that cannot be read, or whose totals do not
// add up to its lines.
var ErrBillMalformed = errors.New("bill malformed")

// readCSV reads a bill: a header, lines, a totals header and a totals
// line; fields start with a backtick.
func readCSV(raw []byte) (header []string, rows [][]string, totals []string, err error) {
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(raw, []byte("\ufeff"))))
	r.FieldsPerRecord = -1
	all, err := r.ReadAll()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %w", ErrBillMalformed, err)
	}
	if len(all) < 3 {
		return nil, nil, nil, fmt.Errorf("%w: %d lines, want a header, a totals header and totals", ErrBillMalformed, len(all))
	}
	for _, rec := range all {
		for i := range rec {
			rec[i] = strings.TrimPrefix(strings.TrimSpace(rec[i]), "`")
		}
	}
	return all[0], all[1 : len(all)-2], all[len(all)-1], nil
}

// columns maps a header's names to their indexes, requiring each name.
func columns(header []string, names ...string) (map[string]int, error) {
	at := map[string]int{}
	for i, h := range header {
		at[h] = i
	}
	for _, n := range names {
		if _, ok := at[n]; !ok {
			return nil, fmt.Errorf("%w: no column %q", ErrBillMalformed, n)
		}
	}
	return at, nil
}

// ParseTradeBill reads a trade bill (bill_type ALL) and checks its totals
// line against its lines.
func ParseTradeBill(raw []byte) (TradeBill, error) {
	header, rows, totals, err := readCSV(raw)
	if err != nil {
		return TradeBill{}, err
	}
	col, err := columns(header, "交易时间", "微信订单号", "商户订单号", "交易状态", "应结订单金额", "微信退款单号", "商户退款单号", "退款金额", "退款状态", "手续费")
	if err != nil {
		return TradeBill{}, err
	}
	var b TradeBill
	for i, rec := range rows {
		if len(rec) != len(header) {
			return TradeBill{}, fmt.Errorf("%w: line %d has %d fields, want %d", ErrBillMalformed, i+2, len(rec), len(header))
		}
		row := TradeRow{Time: rec[col["交易时间"]], TransactionID: rec[col["微信订单号"]], OutTradeNo: rec[col["商户订单号"]],
			State: rec[col["交易状态"]], RefundID: rec[col["微信退款单号"]], OutRefundNo: rec[col["商户退款单号"]], RefundStatus: rec[col["退款状态"]]}
		for name, into := range map[string]*int64{"应结订单金额": &row.TotalFen, "退款金额": &row.RefundFen, "手续费": &row.FeeFen} {
			if *into, err = ParseYuan(rec[col[name]]); err != nil {
				return TradeBill{}, fmt.Errorf("%w: line %d %s: %w", ErrBillMalformed, i+2, name, err)
			}
		}
		if row.State == "REFUND" {
			b.RefundedFen += row.RefundFen
		} else {
			b.PaidFen += row.TotalFen
		}
		b.FeeFen += row.FeeFen
		b.Rows = append(b.Rows, row)
	}
	if len(totals) < 5 {
		return TradeBill{}, fmt.Errorf("%w: a totals line of %d fields", ErrBillMalformed, len(totals))
	}
	count, cerr := strconv.Atoi(totals[0])
	paid, perr := ParseYuan(totals[1])
	refunded, rerr := ParseYuan(totals[2])
	fee, ferr := ParseYuan(totals[4])
	if err := errors.Join(cerr, perr, rerr, ferr); err != nil {
		return TradeBill{}, fmt.Errorf("%w: totals: %w", ErrBillMalformed, err)
	}
	if count != len(b.Rows) || paid != b.PaidFen || refunded != b.RefundedFen || fee != b.FeeFen {
		return TradeBill{}, fmt.Errorf("%w: the totals (%d lines, %d paid, %d refunded, %d fees) are not its lines' (%d, %d, %d, %d)",
			ErrBillMalformed, count, paid, refunded, fee, len(b.Rows), b.PaidFen, b.RefundedFen, b.FeeFen)
	}
	b.Count = count
	return b, nil
}

// ParseFundBill reads a fund bill and checks its totals line against its
// lines.
func ParseFundBill(raw []byte) (FundBill, error) {
	header, rows, totals, err := readCSV(raw)
	if err != nil {
		return FundBill{}, err
	}
	col, err := columns(header, "业务类型", "收支类型", "收支金额（元）")
	if err != nil {
		return FundBill{}, err
	}
	b := FundBill{ByType: map[string]int64{}}
	var in, out int64
	for i, rec := range rows {
		if len(rec) != len(header) {
			return FundBill{}, fmt.Errorf("%w: line %d has %d fields, want %d", ErrBillMalformed, i+2, len(rec), len(header))
		}
		fen, err := ParseYuan(rec[col["收支金额（元）"]])
		if err != nil {
			return FundBill{}, fmt.Errorf("%w: line %d: %w", ErrBillMalformed, i+2, err)
		}
		dir := rec[col["收支类型"]]
		switch dir {
		case "收入":
			in += fen
		case "支出":
			out += fen
		default:
			return FundBill{}, fmt.Errorf("%w: line %d: direction %q", ErrBillMalformed, i+2, dir)
		}
		b.ByType[rec[col["业务类型"]]+"/"+dir] += fen
		b.Rows++
	}
	if len(totals) < 5 {
		return FundBill{}, fmt.Errorf("%w: a totals line of %d fields", ErrBillMalformed, len(totals))
	}
	ti, ierr := ParseYuan(totals[2])
	to, oerr := ParseYuan(totals[4])
	if err := errors.Join(ierr, oerr); err != nil {
		return FundBill{}, fmt.Errorf("%w: totals: %w", ErrBillMalformed, err)
	}
	if ti != in || to != out {
		return FundBill{}, fmt.Errorf("%w: the totals (%d in, %d out) are not its lines' (%d, %d)", ErrBillMalformed, ti, to, in, out)
	}
	b.IncomeFen, b.ExpenseFen = in, out
	return b, nil
}

// SharingRow is one line of the profit-sharing bill: a share to a
// receiver, an unfreeze to the sub-merchant, or a return.
type SharingRow struct {
	Time, SubMchID, Receiver, TransactionID, WxID, OutNo, Type, Result string
	AmountFen                                                          int64
}

// The profit-sharing bill's line types.
const (
	SharingShare    = "分账"
	SharingUnfreeze = "解冻给分账方"
	SharingReturn   = "回退"
)

// SharingBill is a day's profit-sharing bill.
type SharingBill struct {
	Rows                                []SharingRow
	SharedFen, UnfrozenFen, ReturnedFen int64
}

// ParseSharingBill reads a profit-sharing bill and checks its totals line
// against its lines.
func ParseSharingBill(raw []byte) (SharingBill, error) {
	header, rows, totals, err := readCSV(raw)
	if err != nil {
		return SharingBill{}, err
	}
	col, err := columns(header, "分账发起时间", "分账方商户号", "分账接收方", "微信订单号", "微信分账/回退单号", "商户分账/回退单号", "分账类型", "处理结果", "金额(元)")
	if err != nil {
		return SharingBill{}, err
	}
	var b SharingBill
	for i, rec := range rows {
		if len(rec) != len(header) {
			return SharingBill{}, fmt.Errorf("%w: line %d has %d fields, want %d", ErrBillMalformed, i+2, len(rec), len(header))
		}
		row := SharingRow{Time: rec[col["分账发起时间"]], SubMchID: rec[col["分账方商户号"]], Receiver: rec[col["分账接收方"]],
			TransactionID: rec[col["微信订单号"]], WxID: rec[col["微信分账/回退单号"]], OutNo: rec[col["商户分账/回退单号"]],
			Type: rec[col["分账类型"]], Result: rec[col["处理结果"]]}
		if row.AmountFen, err = ParseYuan(rec[col["金额(元)"]]); err != nil {
			return SharingBill{}, fmt.Errorf("%w: line %d: %w", ErrBillMalformed, i+2, err)
		}
		switch row.Type {
		case SharingShare:
			b.SharedFen += row.AmountFen
		case SharingUnfreeze:
			b.UnfrozenFen += row.AmountFen
		case SharingReturn:
			b.ReturnedFen += row.AmountFen
		default:
			return SharingBill{}, fmt.Errorf("%w: line %d: type %q", ErrBillMalformed, i+2, row.Type)
		}
		b.Rows = append(b.Rows, row)
	}
	if len(totals) < 4 {
		return SharingBill{}, fmt.Errorf("%w: a totals line of %d fields", ErrBillMalformed, len(totals))
	}
	count, cerr := strconv.Atoi(totals[0])
	shared, serr := ParseYuan(totals[1])
	unfrozen, uerr := ParseYuan(totals[2])
	returned, rerr := ParseYuan(totals[3])
	if err := errors.Join(cerr, serr, uerr, rerr); err != nil {
		return SharingBill{}, fmt.Errorf("%w: totals: %w", ErrBillMalformed, err)
	}
	if count != len(b.Rows) || shared != b.SharedFen || unfrozen != b.UnfrozenFen || returned != b.ReturnedFen {
		return SharingBill{}, fmt.Errorf("%w: the totals (%d lines, %d shared, %d unfrozen, %d returned) are not its lines' (%d, %d, %d, %d)",
			ErrBillMalformed, count, shared, unfrozen, returned, len(b.Rows), b.SharedFen, b.UnfrozenFen, b.ReturnedFen)
	}
	return b, nil
}
