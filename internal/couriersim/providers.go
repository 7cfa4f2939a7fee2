package couriersim

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/takeout/takeout/internal/courier"
)

// dadaAnswer writes Dada's envelope.
func dadaAnswer(w http.ResponseWriter, code int, msg string, result any) {
	status := "success"
	if code != courier.DadaOK {
		status = "fail"
	}
	writeJSON(w, map[string]any{"status": status, "code": code, "msg": msg, "result": result})
}

// dada serves the Dada-like API: a signed envelope whose body is the
// operation's JSON.
func (s *Server) dada(w http.ResponseWriter, r *http.Request) {
	if !s.gate(w, "dada") {
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var params map[string]string
	if err := json.Unmarshal(raw, &params); err != nil {
		dadaAnswer(w, 1001, "参数格式错误", nil)
		return
	}
	if params["app_key"] != s.opts.DadaAppKey || params["signature"] != courier.DadaSign(params, s.opts.DadaAppSecret) {
		dadaAnswer(w, 2001, "签名错误", nil)
		return
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(params["body"]), &body); err != nil {
		dadaAnswer(w, 1001, "body 格式错误", nil)
		return
	}
	b := dadaBody(body)
	switch op := r.PathValue("op"); op {
	case "queryDeliverFee":
		s.dadaQuote(w, b)
	case "addAfterQuery", "addOrder":
		s.dadaPlace(w, r, op, b)
	case "status/query":
		s.dadaQuery(w, b)
	case "formalCancel":
		s.dadaCancel(w, b)
	case "addTip":
		s.dadaTip(w, b)
	default:
		dadaAnswer(w, 1002, "接口不存在", nil)
	}
}

// dadaBody is an operation's body.
type dadaBody map[string]any

func (b dadaBody) str(k string) string  { v, _ := b[k].(string); return v }
func (b dadaBody) num(k string) float64 { v, _ := b[k].(float64); return v }

// dadaQuote prices an order: a deliveryNo that places it within the
// quote's life, unless its origin_id was placed.
func (s *Server) dadaQuote(w http.ResponseWriter, b dadaBody) {
	s.mu.Lock()
	outNo := b.str("origin_id")
	s.quoted[outNo]++
	if _, ok := s.orders[outNo]; ok {
		s.mu.Unlock()
		dadaAnswer(w, courier.DadaOrderExists, "订单已存在", nil)
		return
	}
	no := "DN" + rand.Text()[:16]
	fee := feeOf(b.num("receiver_lat"), b.num("receiver_lng"))
	s.quotes[no] = &quote{outNo: outNo, body: b, feeFen: fee, expires: s.opts.Now().Add(s.opts.QuoteTTL)}
	s.mu.Unlock()
	dadaAnswer(w, 0, "成功", map[string]any{"deliveryNo": no, "fee": float64(fee) / 100, "deliverFee": float64(fee) / 100,
		"distance": courierDistance(b.num("receiver_lat"), b.num("receiver_lng"))})
}

// dadaPlace places an order on a quote (addAfterQuery) or directly
// (addOrder); a repeated origin_id is refused as existing.
func (s *Server) dadaPlace(w http.ResponseWriter, r *http.Request, op string, b dadaBody) {
	s.mu.Lock()
	if op == "addAfterQuery" {
		q, ok := s.quotes[b.str("deliveryNo")]
		if !ok || s.opts.Now().After(q.expires) {
			s.mu.Unlock()
			dadaAnswer(w, courier.DadaQuoteExpired, "deliveryNo 已过期", nil)
			return
		}
		b = q.body
	}
	outNo := b.str("origin_id")
	if _, ok := s.orders[outNo]; ok {
		s.mu.Unlock()
		dadaAnswer(w, courier.DadaOrderExists, "订单已存在", nil)
		return
	}
	lat, lng := b.num("receiver_lat"), b.num("receiver_lng")
	o := s.place("dada", outNo, b.str("callback"), feeOf(lat, lng), lat, lng)
	if o == nil {
		s.mu.Unlock()
		dadaAnswer(w, courier.DadaCannotDeliver, "当前区域运力不足", nil)
		return
	}
	hang := take(&s.cfg.Dada.HangAfterPlace, s.cfg.Dada.HangRate)
	fee := o.FeeFen
	s.mu.Unlock()
	if hang {
		<-r.Context().Done() // the client gives up not knowing
		return
	}
	dadaAnswer(w, 0, "成功", map[string]any{"distance": 1000, "fee": float64(fee) / 100})
}

// dadaQuery reports an order as Dada knows it.
func (s *Server) dadaQuery(w http.ResponseWriter, b dadaBody) {
	s.mu.Lock()
	o, ok := s.orders[b.str("order_id")]
	if !ok {
		s.mu.Unlock()
		dadaAnswer(w, courier.DadaNoSuchOrder, "订单不存在", nil)
		return
	}
	res := map[string]any{
		"orderId": o.OutNo, "statusCode": o.Code, "statusMsg": string(o.Status), "transporterId": o.RiderID, "transporterName": o.RiderName,
		"transporterPhone": o.RiderPhone, "transporterLat": strconv.FormatFloat(o.lat, 'f', 6, 64), "transporterLng": strconv.FormatFloat(o.lng, 'f', 6, 64),
		"deliveryFee": float64(o.FeeFen) / 100, "tips": float64(o.TipFen) / 100, "deductFee": float64(o.CancelFee) / 100, "updateTime": o.UpdatedAt.Unix(),
	}
	s.mu.Unlock()
	dadaAnswer(w, 0, "成功", res)
}

// dadaCancel cancels an order for its merchant, with the fee deducted.
func (s *Server) dadaCancel(w http.ResponseWriter, b dadaBody) {
	s.mu.Lock()
	o, ok := s.orders[b.str("order_id")]
	if !ok {
		s.mu.Unlock()
		dadaAnswer(w, courier.DadaNoSuchOrder, "订单不存在", nil)
		return
	}
	fee, ok, cbs := s.cancel(o, b.str("cancel_reason"))
	s.mu.Unlock()
	s.send(cbs)
	if !ok {
		dadaAnswer(w, 2176, "订单状态不能取消", nil)
		return
	}
	dadaAnswer(w, 0, "成功", map[string]any{"deduct_fee": float64(fee) / 100})
}

// dadaTip adds a tip to an order waiting for a rider: it finds one.
func (s *Server) dadaTip(w http.ResponseWriter, b dadaBody) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[b.str("order_id")]
	if !ok || o.Status != courier.Placed {
		dadaAnswer(w, 2005, "订单状态不能加小费", nil)
		return
	}
	o.TipFen += int64(b.num("tips")*100 + 0.5)
	o.noRider = false
	dadaAnswer(w, 0, "成功", nil)
}

// meituanAnswer writes Meituan's envelope.
func meituanAnswer(w http.ResponseWriter, code int, msg string, data any) {
	writeJSON(w, map[string]any{"code": code, "message": msg, "data": data})
}

// meituan serves the Meituan-like API: signed form posts.
func (s *Server) meituan(w http.ResponseWriter, r *http.Request) {
	if !s.gate(w, "meituan") {
		return
	}
	if err := r.ParseForm(); err != nil {
		meituanAnswer(w, 1, "参数错误", nil)
		return
	}
	f := r.PostForm
	if f.Get("appkey") != s.opts.MeituanAppKey || f.Get("sign") != courier.MeituanSign(f, s.opts.MeituanAppSecret) {
		meituanAnswer(w, 8, "签名验证失败", nil)
		return
	}
	micro := func(k string) float64 { v, _ := strconv.ParseInt(f.Get(k), 10, 64); return float64(v) / 1e6 }
	outNo := f.Get("delivery_id")
	s.mu.Lock()
	switch r.PathValue("op") {
	case "preCreateByShop":
		s.quoted[outNo]++
		fee := feeOf(micro("receiver_lat"), micro("receiver_lng"))
		s.mu.Unlock()
		meituanAnswer(w, 0, "成功", map[string]any{"delivery_fee": float64(fee) / 100, "delivery_distance": 1000})
		return
	case "createByShop":
		if _, ok := s.orders[outNo]; ok {
			s.mu.Unlock()
			meituanAnswer(w, courier.MeituanOrderExists, "订单已存在", nil)
			return
		}
		o := s.place("meituan", outNo, s.meituanCallbackURL(), feeOf(micro("receiver_lat"), micro("receiver_lng")), micro("receiver_lat"), micro("receiver_lng"))
		if o == nil {
			s.mu.Unlock()
			meituanAnswer(w, 5, "运力不足，暂不可下单", nil)
			return
		}
		hang := take(&s.cfg.Meituan.HangAfterPlace, s.cfg.Meituan.HangRate)
		data := map[string]any{"delivery_id": outNo, "mt_peisong_id": o.Ref, "order_id": outNo, "delivery_fee": float64(o.FeeFen) / 100}
		s.mu.Unlock()
		if hang {
			<-r.Context().Done()
			return
		}
		meituanAnswer(w, 0, "成功", data)
		return
	case "status/query":
		o, ok := s.orders[outNo]
		if !ok {
			s.mu.Unlock()
			meituanAnswer(w, courier.MeituanNoSuchOrder, "订单不存在", nil)
			return
		}
		data := map[string]any{
			"delivery_id": o.OutNo, "mt_peisong_id": o.Ref, "status": o.Code, "courier_id": o.RiderID, "courier_name": o.RiderName,
			"courier_phone": o.RiderPhone, "operate_time": o.UpdatedAt.Unix(), "deduct_fee": float64(o.CancelFee) / 100,
			"courier_lat": int64(o.lat * 1e6), "courier_lng": int64(o.lng * 1e6),
		}
		s.mu.Unlock()
		meituanAnswer(w, 0, "成功", data)
		return
	case "delete":
		o, ok := s.orders[outNo]
		if !ok {
			s.mu.Unlock()
			meituanAnswer(w, courier.MeituanNoSuchOrder, "订单不存在", nil)
			return
		}
		fee, ok, cbs := s.cancel(o, f.Get("cancel_reason"))
		s.mu.Unlock()
		s.send(cbs)
		if !ok {
			meituanAnswer(w, 7, "订单状态不允许取消", nil)
			return
		}
		meituanAnswer(w, 0, "成功", map[string]any{"delivery_id": outNo, "deduct_fee": float64(fee) / 100})
		return
	}
	s.mu.Unlock()
	meituanAnswer(w, 2, "接口不存在", nil)
}

// meituanCallbackURL is where Meituan calls back: set in its console
// (Options), or by POST /couriersim/config. Callers hold s.mu.
func (s *Server) meituanCallbackURL() string {
	if s.cfg.MeituanCallbackURL != "" {
		return s.cfg.MeituanCallbackURL
	}
	return s.opts.MeituanCallbackURL
}

// Expire makes Dada's quotes expire now (for tests of a stale quote).
func (s *Server) Expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.quotes {
		q.expires = time.Time{}
	}
}
