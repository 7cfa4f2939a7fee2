package payment

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/payment/wxpay"
)

// sent is one request as the platform received it.
type sent struct {
	method, path string
	query        map[string]string
	keys         []string // the body's member names, nested ones as parent.child
}

// recordingPlatform answers every request with a signed 200 of answer and
// records what it was sent.
func recordingPlatform(t *testing.T, answer string) (*Client, func() sent) {
	t.Helper()
	platform, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	merchant, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var last sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s := sent{method: r.Method, path: r.URL.Path, query: map[string]string{}}
		for k, v := range r.URL.Query() {
			s.query[k] = v[0]
		}
		if len(body) > 0 {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Errorf("%s %s: body not JSON: %v", r.Method, r.URL.Path, err)
			}
			s.keys = keysOf("", m)
		}
		mu.Lock()
		last = s
		mu.Unlock()
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sig, _ := wxpay.SignSHA256WithRSA(platform, []byte(ts+"\nn1\n"+answer+"\n"))
		w.Header().Set("Wechatpay-Timestamp", ts)
		w.Header().Set("Wechatpay-Nonce", "n1")
		w.Header().Set("Wechatpay-Serial", "SIM")
		w.Header().Set("Wechatpay-Signature", sig)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	c := NewClient(ClientOptions{Base: srv.URL, Merchant: wxpay.Merchant{MchID: "1900000109", Serial: "M1", Key: merchant},
		Platform: wxpay.NewKeyring(wxpay.PublicKey{Serial: "SIM", Key: &platform.PublicKey}), AppID: "wxd678efh567hg6787",
		NotifyURL: "https://example.com/notify", HTTP: &http.Client{Timeout: 5 * time.Second}, Now: time.Now})
	return c, func() sent { mu.Lock(); defer mu.Unlock(); return last }
}

func keysOf(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		out = append(out, prefix+k)
		switch v := v.(type) {
		case map[string]any:
			out = append(out, keysOf(prefix+k+".", v)...)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					out = append(out, keysOf(prefix+k+"[].", em)...)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The service-provider mode's requests as WeChat Pay documents them (the
// partner JSAPI prepay, query, close and refunds; profit sharing, unfreeze,
// returns, their queries and the bill): method, path, query parameters
// and the body's members, nested ones included.
func TestPartnerRequestsAsDocumented(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sub := SubMerchant{MchID: "1900000222", AppID: "wx0123456789abcdef"}
	for _, tc := range []struct {
		name   string
		answer string
		call   func(c *Client) error
		want   sent
	}{
		{"jsapi prepay", `{"prepay_id":"wx201410272009395522657a690389285100"}`, func(c *Client) error {
			_, err := c.Prepay(ctx, PrepayRequest{Description: "d", OutTradeNo: "T1-1", TimeExpire: time.Now(), AmountFen: 100, OpenID: "o1", Sub: sub})
			return err
		}, sent{method: "POST", path: "/v3/pay/partner/transactions/jsapi", query: map[string]string{}, keys: []string{
			"amount", "amount.currency", "amount.total", "description", "notify_url", "out_trade_no", "payer", "payer.sp_openid",
			"settle_info", "settle_info.profit_sharing", "sp_appid", "sp_mchid", "sub_appid", "sub_mchid", "time_expire"}}},
		{"query", `{"out_trade_no":"T1-1","trade_state":"NOTPAY"}`, func(c *Client) error {
			_, err := c.Query(ctx, sub, "T1-1")
			return err
		}, sent{method: "GET", path: "/v3/pay/partner/transactions/out-trade-no/T1-1", query: map[string]string{"sp_mchid": "1900000109", "sub_mchid": "1900000222"}}},
		{"close", `{}`, func(c *Client) error { return c.Close(ctx, sub, "T1-1") },
			sent{method: "POST", path: "/v3/pay/partner/transactions/out-trade-no/T1-1/close", query: map[string]string{}, keys: []string{"sp_mchid", "sub_mchid"}}},
		{"refund", `{"out_refund_no":"R1-1","status":"PROCESSING"}`, func(c *Client) error {
			_, err := c.Refund(ctx, RefundRequest{OutTradeNo: "T1-1", OutRefundNo: "R1-1", Reason: "r", RefundFen: 10, TotalFen: 100, Sub: sub})
			return err
		}, sent{method: "POST", path: "/v3/refund/domestic/refunds", query: map[string]string{}, keys: []string{
			"amount", "amount.currency", "amount.refund", "amount.total", "notify_url", "out_refund_no", "out_trade_no", "reason", "sub_mchid"}}},
		{"query refund", `{"out_refund_no":"R1-1","status":"SUCCESS"}`, func(c *Client) error {
			_, err := c.QueryRefund(ctx, sub, "R1-1")
			return err
		}, sent{method: "GET", path: "/v3/refund/domestic/refunds/R1-1", query: map[string]string{"sub_mchid": "1900000222"}}},
		{"share", `{"order_id":"3008","state":"PROCESSING"}`, func(c *Client) error {
			_, err := c.Share(ctx, ShareRequest{Sub: sub, TransactionID: "4200", OutOrderNo: "S1-1", AmountFen: 6, Description: "commission"})
			return err
		}, sent{method: "POST", path: "/v3/profitsharing/orders", query: map[string]string{}, keys: []string{
			"appid", "out_order_no", "receivers", "receivers[].account", "receivers[].amount", "receivers[].description", "receivers[].type",
			"sub_mchid", "transaction_id", "unfreeze_unsplit"}}},
		{"unfreeze", `{"order_id":"3008","state":"PROCESSING"}`, func(c *Client) error {
			_, err := c.Unfreeze(ctx, sub, "4200", "S1-1", "all to the merchant")
			return err
		}, sent{method: "POST", path: "/v3/profitsharing/orders/unfreeze", query: map[string]string{}, keys: []string{
			"description", "out_order_no", "sub_mchid", "transaction_id"}}},
		{"query share", `{"order_id":"3008","state":"FINISHED"}`, func(c *Client) error {
			_, err := c.QueryShare(ctx, sub, "4200", "S1-1")
			return err
		}, sent{method: "GET", path: "/v3/profitsharing/orders/S1-1", query: map[string]string{"sub_mchid": "1900000222", "transaction_id": "4200"}}},
		{"return", `{"return_id":"3008","result":"SUCCESS"}`, func(c *Client) error {
			_, err := c.ReturnShare(ctx, sub, "S1-1", "B1-1", 6, "refund")
			return err
		}, sent{method: "POST", path: "/v3/profitsharing/return-orders", query: map[string]string{}, keys: []string{
			"amount", "description", "out_order_no", "out_return_no", "return_mchid", "sub_mchid"}}},
		{"query return", `{"return_id":"3008","result":"SUCCESS"}`, func(c *Client) error {
			_, err := c.QueryReturn(ctx, sub, "S1-1", "B1-1")
			return err
		}, sent{method: "GET", path: "/v3/profitsharing/return-orders/B1-1", query: map[string]string{"sub_mchid": "1900000222", "out_order_no": "S1-1"}}},
		{"bill", `{"hash_type":"SHA1","hash_value":"x","download_url":"u"}`, func(c *Client) error {
			_, err := c.SharingBill(ctx, "2026-12-06")
			return err
		}, sent{method: "GET", path: "/v3/profitsharing/bills", query: map[string]string{"bill_date": "2026-12-06", "tar_type": "GZIP"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, last := recordingPlatform(t, tc.answer)
			if err := tc.call(c); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, last(), cmp.AllowUnexported(sent{})); diff != "" {
				t.Errorf("(-documented +sent):\n%s", diff)
			}
		})
	}
}

// A partner notification's names read as the merchant mode's, and a
// payment is checked against its sub-merchant too.
func TestPartnerTransactions(t *testing.T) {
	t.Parallel()
	var tr Transaction
	raw := `{"sp_appid":"wx8888888888888888","sp_mchid":"1230000109","sub_appid":"wxd678efh567hg6999","sub_mchid":"1900000109",
		"out_trade_no":"1217752501201407033233368018","transaction_id":"1217752501201407033233368018","trade_state":"SUCCESS",
		"payer":{"sp_openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o","sub_openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},"amount":{"total":100,"payer_total":100,"currency":"CNY"}}`
	if err := json.Unmarshal([]byte(raw), &tr); err != nil {
		t.Fatal(err)
	}
	tr.normalize()
	if tr.MchID != "1230000109" || tr.AppID != "wx8888888888888888" || tr.SubMchID != "1900000109" || tr.Payer.OpenID != "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o" {
		t.Fatalf("normalized: %+v", tr)
	}
	sub := "1900000109"
	p := dbsqlc.Payment{Mchid: "1230000109", Appid: "wx8888888888888888", AmountFen: 100, Currency: "CNY", SubMchid: &sub}
	for name, tc := range map[string]struct {
		edit func(*Transaction)
		want string
	}{
		"its sub-merchant":         {func(*Transaction) {}, ""},
		"another sub-merchant":     {func(t *Transaction) { t.SubMchID = "1900000333" }, anomalySubMchID},
		"no sub-merchant at all":   {func(t *Transaction) { t.SubMchID = "" }, anomalySubMchID},
		"another service provider": {func(t *Transaction) { t.MchID = "1230000999" }, anomalyMchID},
	} {
		got := tr
		tc.edit(&got)
		if kind, detail := mismatch(got, p); kind != tc.want {
			t.Errorf("%s: %q (%s), want %q", name, kind, detail, tc.want)
		}
	}
	if kind, _ := mismatch(paid("T1-1", "4200", 100), dbsqlc.Payment{Mchid: testMchID, Appid: testAppID, AmountFen: 100, Currency: "CNY", SubMchid: &sub}); kind != anomalySubMchID {
		t.Errorf("a merchant-mode transaction for a sub-merchant's payment: %q", kind)
	}
}
