package courier

import (
	"context"
	"crypto/md5" //nolint:gosec // G501: the provider's documented signature
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Dada is the client of a Dada-like courier API (达达开放平台): JSON posts
// signed with md5(secret + the sorted parameters + secret), a quote
// (queryDeliverFee) whose deliveryNo places the order (addAfterQuery)
// within three minutes, tips, and a cancel that deducts a fee once a
// rider took the order. Its callbacks are signed over the order id, the
// client id and the time only, with no secret: anyone may send one, and
// its status is never taken on its word (Callback.Trusted is false): the
// order is queried.
type Dada struct {
	Base      string
	AppKey    string
	AppSecret string
	SourceID  string
	// ShopNo is the merchant's shop at Dada; CityCode its city.
	ShopNo   string
	CityCode string
	HTTP     *http.Client
	Now      func() time.Time
}

// Dada's answer codes the client acts on.
const (
	DadaOK             = 0
	DadaOrderExists    = 2105 // 订单已存在: the origin_id was placed
	DadaQuoteExpired   = 2076 // deliveryNo 已过期
	DadaCannotDeliver  = 2003 // 超出配送范围 and the like: refused
	DadaTipUnsupported = 2201
	DadaNoSuchOrder    = 2004 // 订单不存在
)

// Dada's order statuses (order_status, statusCode).
const (
	DadaWaiting    = 1    // 待接单
	DadaToPickUp   = 2    // 待取货: a rider took it
	DadaDelivering = 3    // 配送中: picked up
	DadaDone       = 4    // 已完成
	DadaCancelled  = 5    // 已取消
	DadaExpired    = 7    // 已过期
	DadaReturning  = 9    // 妥投异常之物品返回中
	DadaReturned   = 10   // 妥投异常之物品返回完成
	DadaArrived    = 100  // 骑士到店
	DadaFailed     = 1000 // 创建运单失败
)

// DadaStatus maps a Dada status to ours.
func DadaStatus(code int) Status {
	switch code {
	case DadaWaiting:
		return Placed
	case DadaToPickUp:
		return Assigned
	case DadaArrived:
		return Arrived
	case DadaDelivering, DadaReturning:
		return PickedUp
	case DadaDone:
		return Delivered
	case DadaCancelled, DadaExpired, DadaReturned:
		return Cancelled
	case DadaFailed:
		return Failed
	}
	return ""
}

// Name implements Provider.
func (*Dada) Name() string { return "dada" }

// DadaSign is Dada's request signature: the parameters' names and values
// sorted by name and joined, between the secret twice, md5, upper case.
func DadaSign(params map[string]string, secret string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if k != "signature" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(secret)
	for _, k := range keys {
		b.WriteString(k + params[k])
	}
	b.WriteString(secret)
	sum := md5.Sum([]byte(b.String())) //nolint:gosec // G401: the provider's documented signature
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// DadaCallbackSign is the signature of a Dada callback: the values of
// client_id, order_id and update_time sorted and joined, md5. It covers
// neither the status nor any secret.
func DadaCallbackSign(clientID, orderID, updateTime string) string {
	v := []string{clientID, orderID, updateTime}
	slices.Sort(v)
	sum := md5.Sum([]byte(strings.Join(v, ""))) //nolint:gosec // G401: the provider's documented signature
	return hex.EncodeToString(sum[:])
}

type dadaAnswer struct {
	Status string          `json:"status"`
	Code   int             `json:"code"`
	Msg    string          `json:"msg"`
	Result json.RawMessage `json:"result"`
}

// call posts body to path and returns the result of a success; a
// refusal is a *RefusedError (ErrAlreadyPlaced, ErrQuoteExpired for
// theirs).
func (d *Dada) call(ctx context.Context, path string, body any) (json.RawMessage, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	params := map[string]string{
		"app_key": d.AppKey, "body": string(b), "format": "json", "v": "1.0",
		"source_id": d.SourceID, "timestamp": strconv.FormatInt(d.Now().Unix(), 10),
	}
	params["signature"] = DadaSign(params, d.AppSecret)
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	a, err := postJSON[dadaAnswer](ctx, d.HTTP, d.Base+path, "application/json", string(raw))
	if err != nil {
		return nil, fmt.Errorf("dada %s: %w", path, err)
	}
	switch a.Code {
	case DadaOK:
		return a.Result, nil
	case DadaOrderExists:
		return nil, ErrAlreadyPlaced
	case DadaQuoteExpired:
		return nil, ErrQuoteExpired
	case DadaTipUnsupported:
		return nil, ErrUnsupported
	case DadaNoSuchOrder:
		return nil, ErrUnknownOrder
	}
	return nil, &RefusedError{Code: strconv.Itoa(a.Code), Message: a.Msg}
}

// Quote implements Provider (queryDeliverFee).
func (d *Dada) Quote(ctx context.Context, r Request) (Quote, error) {
	res, err := d.call(ctx, "/api/order/queryDeliverFee", d.orderBody(r))
	if err != nil {
		return Quote{}, err
	}
	var out struct {
		DeliveryNo string  `json:"deliveryNo"`
		Fee        float64 `json:"fee"`
	}
	if err := json.Unmarshal(res, &out); err != nil || out.DeliveryNo == "" {
		return Quote{}, fmt.Errorf("dada queryDeliverFee: malformed result")
	}
	// A deliveryNo places the order within three minutes.
	return Quote{Provider: d.Name(), Token: out.DeliveryNo, FeeFen: fenOfYuan(out.Fee), Expires: d.Now().Add(3 * time.Minute)}, nil
}

func (d *Dada) orderBody(r Request) map[string]any {
	return map[string]any{
		"shop_no": d.ShopNo, "origin_id": r.OutNo, "city_code": d.CityCode, "cargo_price": yuanOfFen(r.ValueFen),
		"is_prepay": 0, "receiver_name": r.Name, "receiver_address": r.Address, "receiver_phone": r.Phone,
		"receiver_lat": r.Lat, "receiver_lng": r.Lng, "callback": r.CallbackURL, "info": r.Remark,
	}
}

// Place implements Provider: on the quote's deliveryNo (addAfterQuery),
// or, with none, directly (addOrder).
func (d *Dada) Place(ctx context.Context, r Request, q Quote) (Placement, error) {
	var res json.RawMessage
	var err error
	if q.Token != "" {
		res, err = d.call(ctx, "/api/order/addAfterQuery", map[string]any{"deliveryNo": q.Token})
	} else {
		res, err = d.call(ctx, "/api/order/addOrder", d.orderBody(r))
	}
	if err != nil {
		return Placement{}, err
	}
	var out struct {
		Fee float64 `json:"fee"`
	}
	_ = json.Unmarshal(res, &out) // the fee is the quote's when absent
	fee := fenOfYuan(out.Fee)
	if fee == 0 {
		fee = q.FeeFen
	}
	// Dada knows the order by our origin_id.
	return Placement{Ref: r.OutNo, FeeFen: fee}, nil
}

// Query implements Provider (status/query).
func (d *Dada) Query(ctx context.Context, outNo string) (Update, error) {
	res, err := d.call(ctx, "/api/order/status/query", map[string]any{"order_id": outNo})
	if err != nil {
		return Update{}, err
	}
	var out struct {
		StatusCode       int     `json:"statusCode"`
		TransporterID    string  `json:"transporterId"`
		TransporterName  string  `json:"transporterName"`
		TransporterPhone string  `json:"transporterPhone"`
		TransporterLat   string  `json:"transporterLat"`
		TransporterLng   string  `json:"transporterLng"`
		UpdateTime       int64   `json:"updateTime"`
		DeductFee        float64 `json:"deductFee"`
		Tips             float64 `json:"tips"`
		CancelReason     string  `json:"cancelReason"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return Update{}, fmt.Errorf("dada status/query: %w", err)
	}
	u := Update{
		Status: DadaStatus(out.StatusCode), RiderID: out.TransporterID, RiderName: out.TransporterName, RiderPhone: out.TransporterPhone,
		At: time.Unix(out.UpdateTime, 0), CancelFeeFen: fenOfYuan(out.DeductFee), Reason: out.CancelReason,
	}
	tips := fenOfYuan(out.Tips)
	u.TipFen = &tips
	if u.Status == "" {
		return Update{}, fmt.Errorf("dada status/query: unknown status %d", out.StatusCode)
	}
	if lat, err := strconv.ParseFloat(out.TransporterLat, 64); err == nil {
		if lng, err := strconv.ParseFloat(out.TransporterLng, 64); err == nil {
			u.Lat, u.Lng = &lat, &lng
		}
	}
	return u, nil
}

// Cancel implements Provider (formalCancel).
func (d *Dada) Cancel(ctx context.Context, outNo, reason string) (int64, error) {
	res, err := d.call(ctx, "/api/order/formalCancel", map[string]any{"order_id": outNo, "cancel_reason_id": 10000, "cancel_reason": reason})
	if err != nil {
		return 0, err
	}
	var out struct {
		DeductFee float64 `json:"deduct_fee"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return 0, fmt.Errorf("dada formalCancel: %w", err)
	}
	return fenOfYuan(out.DeductFee), nil
}

// TakesTips implements Provider.
func (*Dada) TakesTips() bool { return true }

// Tip implements Provider (addTip).
func (d *Dada) Tip(ctx context.Context, outNo string, fen int64) error {
	_, err := d.call(ctx, "/api/order/addTip", map[string]any{"order_id": outNo, "tips": yuanOfFen(fen), "city_code": d.CityCode})
	return err
}

// dadaCallback is the body of Dada's status callback.
type dadaCallback struct {
	ClientID     string `json:"client_id"`
	OrderID      string `json:"order_id"`
	OrderStatus  int    `json:"order_status"`
	CancelReason string `json:"cancel_reason"`
	UpdateTime   int64  `json:"update_time"`
	Signature    string `json:"signature"`
	DmID         int64  `json:"dm_id"`
	DmName       string `json:"dm_name"`
	DmMobile     string `json:"dm_mobile"`
}

// Callback implements Provider. The signature proves nothing but that
// the sender knew the order id: the update is not trusted.
func (d *Dada) Callback(r *http.Request) (Callback, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		return Callback{}, err
	}
	var c dadaCallback
	if err := json.Unmarshal(raw, &c); err != nil {
		return Callback{}, fmt.Errorf("dada callback: %w", err)
	}
	want := DadaCallbackSign(c.ClientID, c.OrderID, strconv.FormatInt(c.UpdateTime, 10))
	if c.OrderID == "" || subtle.ConstantTimeCompare([]byte(want), []byte(c.Signature)) != 1 {
		return Callback{}, errors.New("dada callback: bad signature")
	}
	rider := ""
	if c.DmID != 0 {
		rider = strconv.FormatInt(c.DmID, 10)
	}
	return Callback{OutNo: c.OrderID, Update: Update{
		Status: DadaStatus(c.OrderStatus), RiderID: rider, RiderName: c.DmName, RiderPhone: c.DmMobile,
		At: time.Unix(c.UpdateTime, 0), Reason: c.CancelReason,
	}}, nil
}

// Acknowledge implements Provider: Dada takes HTTP 200 as received and
// sends the callback again otherwise.
func (*Dada) Acknowledge(w http.ResponseWriter, ok bool) {
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"status":"fail"}`))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// postJSON posts body and decodes the answer. A request that never
// reached the provider, or an answer that it is unavailable, is a
// *RefusedError (nothing was done); any other failure leaves the outcome
// unknown.
func postJSON[T any](ctx context.Context, hc *http.Client, url, contentType, body string) (T, error) {
	var zero T
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body)) //nolint:gosec // G704: the provider's configured base URL
	if err != nil {
		return zero, err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := hc.Do(req) //nolint:gosec // G704: the provider's configured base URL
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return zero, &RefusedError{Code: "unreachable", Message: err.Error()}
		}
		return zero, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return zero, err
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusBadGateway:
		return zero, &RefusedError{Code: "HTTP " + strconv.Itoa(resp.StatusCode), Message: "unavailable"}
	case resp.StatusCode != http.StatusOK:
		return zero, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		return zero, err
	}
	return out, nil
}
