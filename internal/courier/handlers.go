package courier

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// Rider is who carries the order. The customer sees a masked phone.
type Rider struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
}

// Location is where the rider was last seen.
type Location struct {
	Lat float64   `json:"lat"`
	Lng float64   `json:"lng"`
	At  time.Time `json:"at"`
}

// View is a delivery as the customer sees it (GET
// /v1/orders/{id}/delivery).
type View struct {
	OrderID   string    `json:"order_id"`
	Status    Status    `json:"status"`
	Provider  string    `json:"provider"`
	Attempt   int32     `json:"attempt"`
	Rider     *Rider    `json:"rider"`
	Location  *Location `json:"location"`
	UpdatedAt time.Time `json:"updated_at"`
}

// StaffView is a delivery as the merchant and operators see it: with
// our and the provider's numbers, the fees and why it ended.
type StaffView struct {
	View
	ID           string `json:"id"`
	MerchantID   string `json:"merchant_id"`
	OutNo        string `json:"out_no"`
	FeeFen       *int64 `json:"fee_fen"`
	TipFen       int64  `json:"tip_fen"`
	CancelFeeFen int64  `json:"cancel_fee_fen"`
	Reason       string `json:"reason"`
	// Final is true when this delivery failed or was cancelled and no
	// other follows it: the merchant must see to the order.
	Final bool `json:"final"`
}

// MaskPhone hides the middle of a phone number: 138****5678.
func MaskPhone(p string) string {
	r := []rune(p)
	if len(r) < 7 {
		return "****"
	}
	return string(r[:3]) + "****" + string(r[len(r)-4:])
}

func view(d dbsqlc.Delivery, phone func(string) string) View {
	v := View{OrderID: strconv.FormatInt(d.OrderID, 10), Status: Status(d.Status), Provider: d.Provider, Attempt: d.Attempt, UpdatedAt: d.UpdatedAt.UTC()}
	if d.RiderName != "" {
		v.Rider = &Rider{Name: d.RiderName, Phone: phone(d.RiderPhone)}
	}
	if d.Latitude != nil && d.Longitude != nil && d.LocatedAt != nil {
		v.Location = &Location{Lat: *d.Latitude, Lng: *d.Longitude, At: d.LocatedAt.UTC()}
	}
	return v
}

func staffView(d dbsqlc.Delivery, final bool) StaffView {
	return StaffView{
		View: view(d, MaskPhone), ID: strconv.FormatInt(d.ID, 10), MerchantID: strconv.FormatInt(d.MerchantID, 10), OutNo: d.OutNo,
		FeeFen: d.FeeFen, TipFen: d.TipFen, CancelFeeFen: d.CancelFeeFen, Reason: d.Reason, Final: final,
	}
}

var errNoDelivery = problem.New(problem.NotFound, "this order has no courier delivery")

// OfOrder is the latest delivery of the user's order.
func (s *Service) OfOrder(ctx context.Context, userID, orderID int64) (View, error) {
	var d dbsqlc.Delivery
	err := db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		o, err := s.q.OrderGetByID(ctx, tx, orderID)
		if errors.Is(err, db.ErrNotFound) || (err == nil && o.UserID != userID) {
			return problem.New(problem.NotFound, "no such order")
		}
		if err != nil {
			return err
		}
		d, err = s.q.DeliveryLatest(ctx, tx, orderID)
		if errors.Is(err, db.ErrNotFound) {
			return errNoDelivery
		}
		return err
	})
	if err != nil {
		return View{}, err
	}
	return view(d, MaskPhone), nil
}

// HandleOfOrder serves GET /v1/orders/{id}/delivery: where the courier
// is with the user's order.
func HandleOfOrder(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, ok := auth.UserID(r.Context())
		if !ok {
			web.Error(w, r, problem.New(problem.Unauthorized, "login required"))
			return
		}
		id, err := web.PathID(r, problem.New(problem.NotFound, "no such order"))
		if err != nil {
			web.Error(w, r, err)
			return
		}
		if !s.Enabled() {
			web.Error(w, r, errNoDelivery)
			return
		}
		v, err := s.OfOrder(r.Context(), userID, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, v)
	})
}

// Deliveries is a list of deliveries.
type Deliveries struct {
	Deliveries []StaffView `json:"deliveries"`
}

// List lists deliveries, newest first: the staff's merchant's (an admin
// names one or sees all), of status or active ones, since a time.
func (s *Service) List(ctx context.Context, staff auth.Staff, merchantID int64, status string, active *bool, finalOnly bool, since time.Time) ([]StaffView, error) {
	if !staff.Role.Admin {
		if merchantID != 0 && merchantID != staff.Role.MerchantID {
			return nil, auth.ErrOtherMerchant
		}
		merchantID = staff.Role.MerchantID
	}
	p := dbsqlc.DeliveriesListParams{Active: active, FinalOnly: finalOnly, Since: since, MaxRows: 200}
	if merchantID != 0 {
		p.MerchantID = &merchantID
	}
	if status != "" {
		p.Status = &status
	}
	rows, err := s.q.DeliveriesList(ctx, s.o.Pool, p)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	out := make([]StaffView, 0, len(rows))
	for _, r := range rows {
		out = append(out, staffView(r.Delivery, r.Final))
	}
	return out, nil
}

// HandleList serves GET
// /admin/v1/deliveries?merchant_id=&status=&active=&final=&since=:
// final=true lists the orders the couriers gave up on.
func HandleList(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, ok := auth.StaffFrom(r.Context())
		if !ok {
			web.Error(w, r, problem.New(problem.Unauthorized, "staff token required"))
			return
		}
		q, err := web.Query(r, "merchant_id", "status", "active", "final", "since")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		var merchantID int64
		if v := q.Get("merchant_id"); v != "" {
			if merchantID, err = strconv.ParseInt(v, 10, 64); err != nil || merchantID <= 0 {
				web.Error(w, r, problem.New(problem.InvalidRequest, "merchant_id: a positive id").With("parameter", "merchant_id"))
				return
			}
		}
		status := q.Get("status")
		if status != "" && !slices.Contains(Statuses(), Status(status)) {
			web.Error(w, r, problem.New(problem.InvalidRequest, "status: one of QUOTED, PLACED, ASSIGNED, ARRIVED, PICKED_UP, DELIVERED, CANCELLED, FAILED").With("parameter", "status"))
			return
		}
		var active, final *bool
		for name, dst := range map[string]**bool{"active": &active, "final": &final} {
			if v := q.Get(name); v != "" {
				b, err := strconv.ParseBool(v)
				if err != nil {
					web.Error(w, r, problem.New(problem.InvalidRequest, "%s: true or false", name).With("parameter", name))
					return
				}
				*dst = &b
			}
		}
		since := time.Now().Add(-24 * time.Hour)
		if v := q.Get("since"); v != "" {
			if since, err = time.Parse(time.RFC3339, v); err != nil {
				web.Error(w, r, problem.New(problem.InvalidRequest, "since: an RFC 3339 time").With("parameter", "since"))
				return
			}
		}
		if !s.Enabled() {
			web.JSON(w, http.StatusOK, Deliveries{Deliveries: []StaffView{}})
			return
		}
		list, err := s.List(r.Context(), staff, merchantID, status, active, final != nil && *final, since)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, Deliveries{Deliveries: list})
	})
}

// DispatchRequest sets when a merchant's delivery orders go to a
// courier.
type DispatchRequest struct {
	Dispatch string `json:"dispatch"`
}

// Validate checks the choice.
func (r *DispatchRequest) Validate() error {
	if !slices.Contains([]string{DispatchOff, DispatchAccept, DispatchReady}, r.Dispatch) {
		return problem.Field("dispatch", "off (the merchant dispatches), accept (on accepting an order) or ready (when it is ready)")
	}
	return nil
}

// DispatchSetting is a merchant's courier dispatch.
type DispatchSetting struct {
	MerchantID string `json:"merchant_id"`
	Dispatch   string `json:"dispatch"`
	Version    int64  `json:"version"`
}

// HandleSetDispatch serves PUT /admin/v1/merchants/{id}/courier: the
// merchant's staff or an admin choose when its orders go to a courier.
func HandleSetDispatch(pool *pgxpool.Pool) http.Handler {
	notFound := problem.New(problem.NotFound, "no such merchant")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, ok := auth.StaffFrom(r.Context())
		if !ok {
			web.Error(w, r, problem.New(problem.Unauthorized, "staff token required"))
			return
		}
		id, err := web.PathID(r, notFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		if !staff.CanManage(id) {
			web.Error(w, r, auth.ErrOtherMerchant)
			return
		}
		req, err := web.Decode[DispatchRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		row, err := dbsqlc.New().MerchantSetCourierDispatch(r.Context(), pool, dbsqlc.MerchantSetCourierDispatchParams{ID: id, CourierDispatch: req.Dispatch})
		if errors.Is(err, db.ErrNotFound) {
			web.Error(w, r, notFound)
			return
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, DispatchSetting{MerchantID: strconv.FormatInt(row.ID, 10), Dispatch: row.CourierDispatch, Version: row.Version})
	})
}

// HandleCallback serves POST /v1/couriers/{provider}/callback: a
// provider's status callback, checked by its signature. An update whose
// status the signature does not cover, or a cancel (whose fee it does
// not say), is confirmed by asking the provider. The provider is asked to send it again when it could not be
// applied.
func HandleCallback(s *Service, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := web.CheckQuery(r); err != nil {
			web.Error(w, r, err)
			return
		}
		var p Provider
		if s.Enabled() {
			p = s.provider(chi.URLParam(r, "provider"))
		}
		if p == nil {
			web.Error(w, r, problem.New(problem.NotFound, "no such courier provider"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		cb, err := p.Callback(r)
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			web.Error(w, r, problem.New(problem.BodyTooLarge, "the callback is larger than %d bytes", maxBody))
			return
		}
		if err != nil {
			web.Logger(r.Context()).WarnContext(r.Context(), "courier callback rejected", "provider", p.Name(), "err", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		// A cancel is asked about even when signed: the callback does not
		// say what the provider deducted for it.
		if cb.Trusted && cb.Update.Status != Cancelled {
			err = s.Apply(r.Context(), cb.OutNo, cb.Update, sourceCallback)
		} else {
			err = s.Sync(r.Context(), cb.OutNo)
		}
		if errors.Is(err, errUnknownDelivery) {
			// Not ours (or long gone): asking again will not change that.
			p.Acknowledge(w, true)
			return
		}
		if err != nil {
			web.Logger(r.Context()).ErrorContext(r.Context(), "courier callback", "provider", p.Name(), "out_no", cb.OutNo, "err", err)
			p.Acknowledge(w, false)
			return
		}
		p.Acknowledge(w, true)
	})
}
