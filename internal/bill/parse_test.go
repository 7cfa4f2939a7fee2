package bill

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseYuan(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"`0.01", 1, false},
		{"12.30", 1230, false},
		{"12.3", 1230, false},
		{"7", 700, false},
		{"-0.01", -1, false},
		{"`0.36000", 36, false},
		{"90071992547409.91", 9007199254740991, false}, // beyond a float64's exact integers
		{"0.005", 0, true},
		{"0.00001", 0, true},
		{"", 0, true},
		{".5", 0, true},
		{"1,234.00", 0, true},
		{"1e3", 0, true},
		{"--1", 0, true},
	} {
		got, err := ParseYuan(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseYuan(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

const tradeBill = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注\r\n" +
	"`2026-12-05 12:00:01,`wxapp,`1900000109,`0,`,`4200001,`T1-1,`oU,`JSAPI,`SUCCESS,`OTHERS,`CNY,`55.00,`0.00,`,`,`0.00,`0.00,`,`,`takeout,`,`0.33,`0.60%,`55.00,`0.00,`\r\n" +
	"`2026-12-05 13:00:00,`wxapp,`1900000109,`0,`,`4200001,`T1-1,`oU,`JSAPI,`REFUND,`OTHERS,`CNY,`55.00,`0.00,`5030001,`R1-1-P1,`10.00,`0.00,`ORIGINAL,`SUCCESS,`takeout,`,`-0.06,`0.60%,`55.00,`10.00,`\r\n" +
	"总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额\r\n" +
	"`2,`55.00,`10.00,`0.00,`0.27000,`55.00,`10.00\r\n"

func TestParseTradeBill(t *testing.T) {
	b, err := ParseTradeBill([]byte(tradeBill))
	if err != nil {
		t.Fatal(err)
	}
	want := TradeBill{Count: 2, PaidFen: 5500, RefundedFen: 1000, FeeFen: 27, Rows: []TradeRow{
		{Time: "2026-12-05 12:00:01", TransactionID: "4200001", OutTradeNo: "T1-1", State: "SUCCESS", TotalFen: 5500, FeeFen: 33},
		{Time: "2026-12-05 13:00:00", TransactionID: "4200001", OutTradeNo: "T1-1", State: "REFUND", TotalFen: 5500, RefundID: "5030001",
			OutRefundNo: "R1-1-P1", RefundFen: 1000, RefundStatus: "SUCCESS", FeeFen: -6},
	}}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Totals that are not the lines': refused whole.
	bad := []byte(tradeBill[:len(tradeBill)-len("`2,`55.00,`10.00,`0.00,`0.27000,`55.00,`10.00\r\n")] + "`2,`55.01,`10.00,`0.00,`0.27000,`55.00,`10.00\r\n")
	if _, err := ParseTradeBill(bad); !errors.Is(err, ErrBillMalformed) {
		t.Errorf("totals off by a fen: %v", err)
	}
	if _, err := ParseTradeBill([]byte("garbage")); !errors.Is(err, ErrBillMalformed) {
		t.Errorf("garbage: %v", err)
	}
}

func TestDue(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.ParseInLocation(time.DateTime, s, Shanghai)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	dates := func(ds []time.Time) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Format(time.DateOnly))
		}
		return out
	}
	for name, tt := range map[string]struct {
		now, first string
		done       map[string]bool
		want       []string
	}{
		"before ten, yesterday's bill is not out": {"2026-12-07 09:59:59", "2026-12-05 08:00:00", nil, []string{"2026-12-05"}},
		"at ten it is":                     {"2026-12-07 10:00:00", "2026-12-05 08:00:00", nil, []string{"2026-12-05", "2026-12-06"}},
		"done days are not run again":      {"2026-12-07 11:00:00", "2026-12-05 08:00:00", map[string]bool{"2026-12-05": true}, []string{"2026-12-06"}},
		"three months back at most":        {"2026-12-07 11:00:00", "2025-01-01 08:00:00", nil, nil},
		"nothing before the first payment": {"2026-12-07 11:00:00", "2026-12-07 08:00:00", nil, nil},
	} {
		got := dates(Due(at(tt.now), at(tt.first), tt.done))
		if name == "three months back at most" {
			if len(got) != 90 || got[0] != "2026-09-08" || got[89] != "2026-12-06" {
				t.Errorf("%s: %d dates, %v..", name, len(got), got[:2])
			}
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestParseSharingBill(t *testing.T) {
	t.Parallel()
	const header = "分账发起时间,分账方商户号,分账接收方,微信订单号,微信分账/回退单号,商户分账/回退单号,分账类型,处理结果,金额(元),分账描述\r\n"
	const lines = "`2026-12-07 10:00:00,`1900000222,`1900000109,`4200000001,`3008000001,`S1-1,`分账,`SUCCESS,`2.75,`commission\r\n" +
		"`2026-12-07 10:00:00,`1900000222,`1900000222,`4200000001,`3008000001,`S1-1,`解冻给分账方,`SUCCESS,`52.25,`解冻给分账方\r\n" +
		"`2026-12-07 11:00:00,`1900000222,`1900000109,`4200000001,`3008000002,`B1-1-P1,`回退,`SUCCESS,`1.37,`return\r\n"
	const totals = "总条数,分账总金额,解冻总金额,回退总金额\r\n"
	b, err := ParseSharingBill([]byte(header + lines + totals + "`3,`2.75,`52.25,`1.37\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Rows) != 3 || b.SharedFen != 275 || b.UnfrozenFen != 5225 || b.ReturnedFen != 137 || b.Rows[2].OutNo != "B1-1-P1" || b.Rows[1].Receiver != "1900000222" {
		t.Errorf("read %+v", b)
	}
	for name, raw := range map[string]string{
		"totals off by a fen": header + lines + totals + "`3,`2.76,`52.25,`1.37\r\n",
		"a line too few":      header + lines + totals + "`4,`2.75,`52.25,`1.37\r\n",
		"an unknown type":     header + strings.Replace(lines, "回退", "退回", 1) + totals + "`3,`2.75,`52.25,`1.37\r\n",
		"no amount column":    strings.Replace(header, "金额(元)", "金额", 1) + lines + totals + "`3,`2.75,`52.25,`1.37\r\n",
	} {
		if _, err := ParseSharingBill([]byte(raw)); !errors.Is(err, ErrBillMalformed) {
			t.Errorf("%s: %v, want ErrBillMalformed", name, err)
		}
	}
}
