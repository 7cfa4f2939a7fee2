package bill

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// matcher matches one day's bills with our records, in the run's
// transaction.
type matcher struct {
	s       *Service
	tx      pgx.Tx
	day     time.Time
	feeRate int64
	found   []Anomaly
	summary Summary
}

func fen(v int64) *int64 { return &v }

func (m *matcher) add(kind, ref string, bill, ours *int64, format string, args ...any) {
	m.found = append(m.found, Anomaly{Kind: kind, Ref: ref, Detail: fmt.Sprintf(format, args...), BillFen: bill, OursFen: ours})
}

// expectedFee is the signed rate of an amount, rounded half up to the
// fen (negative amounts, refunds, give back their fee).
func (m *matcher) expectedFee(amount int64) int64 {
	if amount < 0 {
		return -m.expectedFee(-amount)
	}
	return (amount*m.feeRate + 5000) / 10000
}

// match compares the bills with payments, refunds and the ledger,
// records what disagrees and posts the fees.
func (m *matcher) match(ctx context.Context, tb TradeBill, fb FundBill) error {
	m.summary = Summary{TradeRows: len(tb.Rows), PaidFen: tb.PaidFen, RefundedFen: tb.RefundedFen, FeeFen: tb.FeeFen,
		FundRows: fb.Rows, FundIncomeFen: fb.IncomeFen, FundExpenseFen: fb.ExpenseFen}
	var trades, refunds, txns []string
	for _, r := range tb.Rows {
		if r.State == "REFUND" {
			refunds = append(refunds, r.OutRefundNo)
		} else {
			trades = append(trades, r.OutTradeNo)
			txns = append(txns, r.TransactionID)
		}
	}
	start, end := m.day, m.day.AddDate(0, 0, 1)
	pays, err := m.s.q.BillPayments(ctx, m.tx, dbsqlc.BillPaymentsParams{OutTradeNos: trades, DayStart: &start, DayEnd: &end})
	if err != nil {
		return fmt.Errorf("read payments: %w", err)
	}
	refs, err := m.s.q.BillRefunds(ctx, m.tx, dbsqlc.BillRefundsParams{OutRefundNos: refunds, DayStart: start, DayEnd: end})
	if err != nil {
		return fmt.Errorf("read refunds: %w", err)
	}
	unexpected, err := m.s.q.BillUnexpected(ctx, m.tx, txns)
	if err != nil {
		return fmt.Errorf("read unexpected transactions: %w", err)
	}
	seenPay, seenRefund := map[int64]bool{}, map[int64]bool{}
	for _, r := range tb.Rows {
		if r.State == "REFUND" {
			if err := m.refundRow(ctx, r, refs, seenRefund); err != nil {
				return err
			}
			continue
		}
		if err := m.paymentRow(ctx, r, pays, unexpected, seenPay); err != nil {
			return err
		}
	}
	for _, p := range pays {
		if !seenPay[p.ID] && p.PaidAt != nil && !p.PaidAt.Before(start) && p.PaidAt.Before(end) && (p.Status == "SUCCESS" || p.Status == "REFUNDED") {
			m.add(MissingThere, p.OutTradeNo, nil, fen(p.AmountFen), "paid %s here, not in WeChat Pay's bill", p.PaidAt.In(Shanghai).Format(time.DateTime))
		}
	}
	for _, f := range refs {
		if !seenRefund[f.ID] && f.Status == "SUCCESS" {
			m.add(MissingThere, f.OutRefundNo, nil, fen(f.AmountFen), "refunded here, not in WeChat Pay's bill")
		}
	}
	m.fund(tb, fb)
	return nil
}

func (m *matcher) paymentRow(ctx context.Context, r TradeRow, pays []dbsqlc.BillPaymentsRow, unexpected []dbsqlc.BillUnexpectedRow, seen map[int64]bool) error {
	i := slices.IndexFunc(pays, func(p dbsqlc.BillPaymentsRow) bool {
		return p.OutTradeNo == r.OutTradeNo && (p.TransactionID == nil || *p.TransactionID == r.TransactionID)
	})
	if i < 0 {
		// A transaction we did not expect is given back as a refund:
		// known, and its refund is matched on its own row.
		if k := slices.IndexFunc(unexpected, func(u dbsqlc.BillUnexpectedRow) bool { return u.TransactionID == r.TransactionID }); k >= 0 {
			m.summary.Matched++
			return nil
		}
		m.add(MissingHere, r.OutTradeNo, fen(r.TotalFen), nil, "WeChat Pay has transaction %s paid at %s; we have no such payment", r.TransactionID, r.Time)
		return nil
	}
	p := pays[i]
	seen[p.ID] = true
	m.summary.Matched++
	switch {
	case p.AmountFen != r.TotalFen:
		m.add(Amount, r.OutTradeNo, fen(r.TotalFen), fen(p.AmountFen), "the bill's amount is not the payment's")
	case p.Status != "SUCCESS" && p.Status != "REFUNDED":
		m.add(Status, r.OutTradeNo, fen(r.TotalFen), fen(p.AmountFen), "WeChat Pay has it paid; here it is %s", p.Status)
	case p.LedgerFen != p.AmountFen:
		m.add(Ledger, r.OutTradeNo, fen(r.TotalFen), fen(p.LedgerFen), "the ledger has %d fen in WeChat clearing for it", p.LedgerFen)
	}
	if want := m.expectedFee(r.TotalFen); r.FeeFen != want {
		m.add(Fee, r.OutTradeNo, fen(r.FeeFen), fen(want), "a fee of %d fen is not %d basis points of %d", r.FeeFen, m.feeRate, r.TotalFen)
	}
	return m.postFee(ctx, "fee:"+r.TransactionID, p.OrderID, p.MerchantID, &p.ID, r.TransactionID, r.FeeFen)
}

func (m *matcher) refundRow(ctx context.Context, r TradeRow, refs []dbsqlc.BillRefundsRow, seen map[int64]bool) error {
	i := slices.IndexFunc(refs, func(f dbsqlc.BillRefundsRow) bool { return f.OutRefundNo == r.OutRefundNo })
	if i < 0 {
		m.add(MissingHere, r.OutRefundNo, fen(r.RefundFen), nil, "WeChat Pay has refund %s of %s; we asked for no such refund", r.RefundID, r.OutTradeNo)
		return nil
	}
	f := refs[i]
	seen[f.ID] = true
	m.summary.Matched++
	switch {
	case f.AmountFen != r.RefundFen:
		m.add(Amount, r.OutRefundNo, fen(r.RefundFen), fen(f.AmountFen), "the bill's refund is not ours")
	case r.RefundStatus != "SUCCESS" || f.Status != "SUCCESS":
		m.add(Status, r.OutRefundNo, fen(r.RefundFen), fen(f.AmountFen), "WeChat Pay has it %s; here it is %s", r.RefundStatus, f.Status)
	case f.LedgerFen != f.AmountFen:
		m.add(Ledger, r.OutRefundNo, fen(r.RefundFen), fen(f.LedgerFen), "the ledger took %d fen out of WeChat clearing for it", f.LedgerFen)
	}
	if want := m.expectedFee(-r.RefundFen); r.FeeFen != want {
		m.add(Fee, r.OutRefundNo, fen(r.FeeFen), fen(want), "a fee given back of %d fen is not %d basis points of %d", -r.FeeFen, m.feeRate, r.RefundFen)
	}
	return m.postFee(ctx, "fee:"+r.RefundID, f.OrderID, f.MerchantID, nil, r.RefundID, r.FeeFen)
}

// postFee posts a fee the bill tells (once per journal).
func (m *matcher) postFee(ctx context.Context, journal string, orderID, merchantID int64, paymentID *int64, ref string, fee int64) error {
	if fee == 0 {
		return nil
	}
	if err := m.s.q.LedgerPostFee(ctx, m.tx, dbsqlc.LedgerPostFeeParams{Journal: journal, OrderID: orderID, MerchantID: merchantID,
		PaymentID: paymentID, Ref: ref, FeeFen: fee}); err != nil {
		return fmt.Errorf("post fee %s: %w", journal, err)
	}
	m.summary.FeesPosted++
	return nil
}

// fund checks the fund bill adds up to the trade bill: payments in,
// refunds out, fees out and given back.
func (m *matcher) fund(tb TradeBill, fb FundBill) {
	var feesTaken, feesBack int64
	for _, r := range tb.Rows {
		if r.FeeFen > 0 {
			feesTaken += r.FeeFen
		} else {
			feesBack -= r.FeeFen
		}
	}
	for _, c := range []struct {
		ref         string
		trade, fund int64
	}{
		{"交易/收入", tb.PaidFen, fb.ByType["交易/收入"]},
		{"退款/支出", tb.RefundedFen, fb.ByType["退款/支出"]},
		{"扣除交易手续费/支出", feesTaken, fb.ByType["扣除交易手续费/支出"]},
		{"退还交易手续费/收入", feesBack, fb.ByType["退还交易手续费/收入"]},
	} {
		if c.trade != c.fund {
			m.add(Fund, c.ref, fen(c.fund), fen(c.trade), "the fund bill's %s is %d fen; the trade bill's lines come to %d", c.ref, c.fund, c.trade)
		}
	}
}

// sharing matches the profit-sharing bill with our profit-sharing
// requests: each line with the request of its number (a share's line to
// the platform with its commission, its unfreeze line with what it
// unfroze, a return's with what came back), and each request that
// succeeded on the day with its lines.
func (m *matcher) sharing(ctx context.Context, sb SharingBill) error {
	m.summary.SharingRows, m.summary.SharedFen, m.summary.UnfrozenFen, m.summary.ReturnedFen = len(sb.Rows), sb.SharedFen, sb.UnfrozenFen, sb.ReturnedFen
	nos := make([]string, 0, len(sb.Rows))
	for _, r := range sb.Rows {
		nos = append(nos, r.OutNo)
	}
	start, end := m.day, m.day.AddDate(0, 0, 1)
	ours, err := m.s.q.BillSharings(ctx, m.tx, dbsqlc.BillSharingsParams{OutNos: nos, DayStart: &start, DayEnd: &end})
	if err != nil {
		return fmt.Errorf("read profit sharing: %w", err)
	}
	type key struct{ no, line string }
	billed := map[key]bool{}
	for _, r := range sb.Rows {
		billed[key{r.OutNo, r.Type}] = true
		i := slices.IndexFunc(ours, func(s dbsqlc.BillSharingsRow) bool { return s.OutNo == r.OutNo })
		if i < 0 {
			m.add(MissingHere, r.OutNo, fen(r.AmountFen), nil, "%s of %s in WeChat Pay's profit-sharing bill, no such request here", r.Type, r.TransactionID)
			continue
		}
		s := ours[i]
		want := s.AmountFen
		if r.Type == SharingUnfreeze {
			want = s.UnfrozenFen
		}
		switch {
		case s.Status != "SUCCESS":
			m.add(Status, r.OutNo, fen(r.AmountFen), fen(want), "%s succeeded at WeChat Pay, %s here", r.Type, s.Status)
		case r.AmountFen != want:
			m.add(Amount, r.OutNo, fen(r.AmountFen), fen(want), "%s: %d fen in the bill, %d here", r.Type, r.AmountFen, want)
		default:
			m.summary.Matched++
		}
	}
	for _, s := range ours {
		if s.Status != "SUCCESS" {
			continue
		}
		lines := []string{SharingReturn}
		amounts := []int64{s.AmountFen}
		if s.Kind == "share" {
			lines, amounts = []string{SharingShare, SharingUnfreeze}, []int64{s.AmountFen, s.UnfrozenFen}
		}
		// One anomaly per request (its number is the reference), naming
		// the lines the bill lacks.
		var missing []string
		var missingFen int64
		for i, line := range lines {
			if amounts[i] > 0 && !billed[key{s.OutNo, line}] {
				missing, missingFen = append(missing, line), missingFen+amounts[i]
			}
		}
		if len(missing) > 0 {
			m.add(MissingThere, s.OutNo, nil, fen(missingFen), "%s succeeded here, not in WeChat Pay's profit-sharing bill", strings.Join(missing, ", "))
		}
	}
	return nil
}
