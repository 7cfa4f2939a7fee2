package courier

import (
	"context"
	"crypto/sha1" //nolint:gosec // G505: the provider's documented signature
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Meituan is the client of a Meituan-like delivery API (美团配送开放平台):
// form posts signed with sha1(secret + the sorted non-empty parameters),
// a quote without a token (preCreateByShop), orders created by shop
// (createByShop), and callbacks signed the same way over every field, so
// a callback's status is taken as it is. Statuses may skip steps, and a
// rider reassigned repeats "taken" with another courier.
type Meituan struct {
	Base      string
	AppKey    string
	AppSecret string
	ShopID    string
	HTTP      *http.Client
	Now       func() time.Time
}

// Meituan's answer codes the client acts on.
const (
	MeituanOK          = 0
	MeituanOrderExists = 1006 // 订单已存在
	MeituanNoSuchOrder = 4    // 订单不存在
)

// Meituan's delivery statuses.
const (
	MeituanWaiting   = 0  // 待调度
	MeituanArrived   = 15 // 骑手已到店
	MeituanTaken     = 20 // 已接单
	MeituanPickedUp  = 30 // 已取货
	MeituanDelivered = 50 // 已送达
	MeituanCancelled = 99 // 已取消
)

// MeituanStatus maps a Meituan status to ours.
func MeituanStatus(code int) Status {
	switch code {
	case MeituanWaiting:
		return Placed
	case MeituanTaken:
		return Assigned
	case MeituanArrived:
		return Arrived
	case MeituanPickedUp:
		return PickedUp
	case MeituanDelivered:
		return Delivered
	case MeituanCancelled:
		return Cancelled
	}
	return ""
}

// Name implements Provider.
func (*Meituan) Name() string { return "meituan" }

// MeituanSign is Meituan's signature: the secret, then each non-empty
// parameter's name and value sorted by name, sha1, lower case.
func MeituanSign(form url.Values, secret string) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		if k != "sign" && form.Get(k) != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(secret)
	for _, k := range keys {
		b.WriteString(k + form.Get(k))
	}
	sum := sha1.Sum([]byte(b.String())) //nolint:gosec // G401: the provider's documented signature
	return hex.EncodeToString(sum[:])
}

type meituanAnswer struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (m *Meituan) call(ctx context.Context, path string, form url.Values) (json.RawMessage, error) {
	form.Set("appkey", m.AppKey)
	form.Set("timestamp", strconv.FormatInt(m.Now().Unix(), 10))
	form.Set("version", "1.0")
	form.Set("sign", MeituanSign(form, m.AppSecret))
	a, err := postJSON[meituanAnswer](ctx, m.HTTP, m.Base+path, "application/x-www-form-urlencoded", form.Encode())
	if err != nil {
		return nil, fmt.Errorf("meituan %s: %w", path, err)
	}
	switch a.Code {
	case MeituanOK:
		return a.Data, nil
	case MeituanOrderExists:
		return nil, ErrAlreadyPlaced
	case MeituanNoSuchOrder:
		return nil, ErrUnknownOrder
	}
	return nil, &RefusedError{Code: strconv.Itoa(a.Code), Message: a.Message}
}

// micro writes a coordinate as Meituan takes it: degrees times 10^6.
func micro(deg float64) string { return strconv.FormatInt(int64(math.Round(deg*1e6)), 10) }

func (m *Meituan) orderForm(r Request) url.Values {
	return url.Values{
		"delivery_id": {r.OutNo}, "order_id": {r.OutNo}, "shop_id": {m.ShopID}, "delivery_service_code": {"100005"},
		"receiver_name": {r.Name}, "receiver_address": {r.Address}, "receiver_phone": {r.Phone},
		"receiver_lng": {micro(r.Lng)}, "receiver_lat": {micro(r.Lat)},
		"goods_value": {strconv.FormatFloat(yuanOfFen(r.ValueFen), 'f', 2, 64)}, "goods_weight": {"1"}, "note": {r.Remark},
	}
}

// Quote implements Provider (preCreateByShop): a price, no token.
func (m *Meituan) Quote(ctx context.Context, r Request) (Quote, error) {
	res, err := m.call(ctx, "/api/order/preCreateByShop", m.orderForm(r))
	if err != nil {
		return Quote{}, err
	}
	var out struct {
		DeliveryFee float64 `json:"delivery_fee"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return Quote{}, fmt.Errorf("meituan preCreateByShop: %w", err)
	}
	return Quote{Provider: m.Name(), FeeFen: fenOfYuan(out.DeliveryFee), Expires: m.Now().Add(3 * time.Minute)}, nil
}

// Place implements Provider (createByShop).
func (m *Meituan) Place(ctx context.Context, r Request, _ Quote) (Placement, error) {
	res, err := m.call(ctx, "/api/order/createByShop", m.orderForm(r))
	if err != nil {
		return Placement{}, err
	}
	var out struct {
		MtPeisongID string  `json:"mt_peisong_id"`
		DeliveryFee float64 `json:"delivery_fee"`
	}
	if err := json.Unmarshal(res, &out); err != nil || out.MtPeisongID == "" {
		return Placement{}, fmt.Errorf("meituan createByShop: malformed data")
	}
	return Placement{Ref: out.MtPeisongID, FeeFen: fenOfYuan(out.DeliveryFee)}, nil
}

// meituanStatus is a status query's data and a callback's fields.
type meituanStatus struct {
	Status       int     `json:"status"`
	CourierID    string  `json:"courier_id"`
	CourierName  string  `json:"courier_name"`
	CourierPhone string  `json:"courier_phone"`
	OperateTime  int64   `json:"operate_time"`
	CancelReason string  `json:"cancel_reason"`
	DeductFee    float64 `json:"deduct_fee"`
	Lat          int64   `json:"courier_lat"`
	Lng          int64   `json:"courier_lng"`
}

func (s meituanStatus) update() (Update, error) {
	u := Update{
		Status: MeituanStatus(s.Status), RiderID: s.CourierID, RiderName: s.CourierName, RiderPhone: s.CourierPhone,
		At: time.Unix(s.OperateTime, 0), CancelFeeFen: fenOfYuan(s.DeductFee), Reason: s.CancelReason,
	}
	if u.Status == "" {
		return Update{}, fmt.Errorf("meituan: unknown status %d", s.Status)
	}
	if s.Lat != 0 || s.Lng != 0 {
		lat, lng := float64(s.Lat)/1e6, float64(s.Lng)/1e6
		u.Lat, u.Lng = &lat, &lng
	}
	return u, nil
}

// Query implements Provider (status/query).
func (m *Meituan) Query(ctx context.Context, outNo string) (Update, error) {
	res, err := m.call(ctx, "/api/order/status/query", url.Values{"delivery_id": {outNo}})
	if err != nil {
		return Update{}, err
	}
	var s meituanStatus
	if err := json.Unmarshal(res, &s); err != nil {
		return Update{}, fmt.Errorf("meituan status/query: %w", err)
	}
	return s.update()
}

// Cancel implements Provider (delete).
func (m *Meituan) Cancel(ctx context.Context, outNo, reason string) (int64, error) {
	res, err := m.call(ctx, "/api/order/delete", url.Values{"delivery_id": {outNo}, "cancel_reason_id": {"101"}, "cancel_reason": {reason}})
	if err != nil {
		return 0, err
	}
	var out struct {
		DeductFee float64 `json:"deduct_fee"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return 0, fmt.Errorf("meituan delete: %w", err)
	}
	return fenOfYuan(out.DeductFee), nil
}

// TakesTips implements Provider: Meituan's delivery API has none.
func (*Meituan) TakesTips() bool { return false }

// Tip implements Provider.
func (*Meituan) Tip(context.Context, string, int64) error { return ErrUnsupported }

// Callback implements Provider: every field is signed, so the update is
// trusted.
func (m *Meituan) Callback(r *http.Request) (Callback, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, 1<<16)
	if err := r.ParseForm(); err != nil {
		return Callback{}, fmt.Errorf("meituan callback: %w", err)
	}
	f := r.PostForm
	if f.Get("appkey") != m.AppKey || subtle.ConstantTimeCompare([]byte(MeituanSign(f, m.AppSecret)), []byte(f.Get("sign"))) != 1 {
		return Callback{}, errors.New("meituan callback: bad signature")
	}
	code, err := strconv.Atoi(f.Get("status"))
	if err != nil {
		return Callback{}, fmt.Errorf("meituan callback: status: %w", err)
	}
	at, _ := strconv.ParseInt(f.Get("timestamp"), 10, 64)
	s := meituanStatus{Status: code, CourierID: f.Get("courier_id"), CourierName: f.Get("courier_name"), CourierPhone: f.Get("courier_phone"),
		OperateTime: at, CancelReason: f.Get("cancel_reason")}
	u, err := s.update()
	if err != nil {
		return Callback{}, err
	}
	return Callback{OutNo: f.Get("delivery_id"), Update: u, Trusted: true}, nil
}

// Acknowledge implements Provider: Meituan wants {"code":0}.
func (*Meituan) Acknowledge(w http.ResponseWriter, ok bool) {
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"code":1}`))
		return
	}
	_, _ = w.Write([]byte(`{"code":0}`))
}
