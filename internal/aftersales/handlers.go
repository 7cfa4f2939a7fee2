package aftersales

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/web"
)

// checkPhotos accepts at most 9 absolute https URLs with a host: the
// mini-program loads images only over https.
func checkPhotos(photos []string) error {
	if len(photos) > 9 {
		return problem.Field("photos", "at most 9")
	}
	for i, p := range photos {
		u, err := url.Parse(p)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || len(p) > 1024 {
			return problem.Field(fmt.Sprintf("photos[%d]", i), "must be an https URL of at most 1024 characters, e.g. https://cdn.example.com/photo.jpg")
		}
	}
	return nil
}

// Note is the body of reject, escalate and agree: words the other side
// reads (required to reject or escalate).
type Note struct {
	Note string `json:"note"`
}

func (n Note) check(required bool) error {
	c := utf8.RuneCountInString(n.Note)
	switch {
	case required && c == 0:
		return problem.Field("note", "required: the other side reads why")
	case c > 200:
		return problem.Field("note", "at most 200 characters")
	}
	return nil
}

// Validate checks the note's length; whether it is required is the
// route's.
func (n *Note) Validate() error { return n.check(false) }

// Decision is the body of POST /admin/v1/after-sales/{id}/decide.
type Decision struct {
	Agree *bool  `json:"agree"`
	Note  string `json:"note"`
}

// Validate checks the decision is given, with its note.
func (d *Decision) Validate() error {
	if d.Agree == nil {
		return problem.Field("agree", "required: true refunds, false refuses for good")
	}
	return Note{Note: d.Note}.check(true)
}

// List is the answer of the list routes.
type List struct {
	AfterSales []AfterSale `json:"after_sales"`
}

// HandleCreate serves POST /v1/orders/{id}/after-sales (the order's
// customer): a request, once per Idempotency-Key, which it requires.
func HandleCreate(s *Service, idem *idempotency.Store, pool db.Beginner) http.Handler {
	create := idempotency.Creating(idem, pool, true, auth.UserScope, func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
		userID, _ := auth.UserID(ctx)
		id, err := web.PathID(r, order.ErrOrderNotFound)
		if err != nil {
			return idempotency.Created{}, err
		}
		req, err := web.Decode[Request](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		a, err := s.Create(ctx, tx, userID, id, req)
		if err != nil {
			return idempotency.Created{}, err
		}
		return idempotency.JSONCreated(http.StatusCreated, a)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.enabled() {
			web.Error(w, r, ErrDisabled)
			return
		}
		create.ServeHTTP(w, r)
	})
}

// HandleOfOrder serves GET /v1/orders/{id}/after-sales (the order's
// customer).
func HandleOfOrder(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		id, err := web.PathID(r, order.ErrOrderNotFound)
		if err == nil {
			err = web.CheckQuery(r)
		}
		if err == nil && !s.enabled() {
			err = ErrDisabled
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		list, err := s.OfOrder(r.Context(), userID, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, List{AfterSales: list})
	})
}

// HandleEscalate serves POST /v1/after-sales/{id}/escalate (the
// customer): a rejected request goes to the platform.
func HandleEscalate(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		id, err := web.PathID(r, errNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		n, err := web.Decode[Note](r)
		if err == nil {
			err = n.check(true)
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		a, err := s.Escalate(r.Context(), userID, id, n.Note)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, a)
	})
}

func deciderOf(staff auth.Staff) order.Actor {
	if staff.Role.Admin {
		return order.Actor{Kind: statemachine.Admin, Name: staff.Subject}
	}
	return order.Actor{Kind: statemachine.Merchant, MerchantID: staff.Role.MerchantID, Name: staff.Subject}
}

// HandleList serves GET /admin/v1/after-sales?status=&merchant_id=&after=
// (merchant staff see their merchant's; admins all, or one merchant's).
func HandleList(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := web.Query(r, "status", "merchant_id", "after")
		if err == nil && !s.enabled() {
			err = ErrDisabled
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		status := q.Get("status")
		if status == "" {
			status = Requested
		}
		if !slices.Contains([]string{Requested, Agreed, Rejected, Escalated, Refused}, status) {
			web.Error(w, r, problem.New(problem.InvalidRequest, "status: requested, agreed, rejected, escalated or refused").With("parameter", "status"))
			return
		}
		ids := map[string]int64{}
		for _, name := range []string{"merchant_id", "after"} {
			if v := q.Get(name); v != "" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n <= 0 {
					web.Error(w, r, problem.New(problem.InvalidRequest, "%s: a positive id", name).With("parameter", name))
					return
				}
				ids[name] = n
			}
		}
		staff, _ := auth.StaffFrom(r.Context())
		merchantID := ids["merchant_id"]
		if !staff.Role.Admin {
			if merchantID != 0 && merchantID != staff.Role.MerchantID {
				web.Error(w, r, problem.New(problem.Forbidden, "staff see their own merchant's requests"))
				return
			}
			merchantID = staff.Role.MerchantID
		}
		list, err := s.List(r.Context(), status, merchantID, ids["after"])
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, List{AfterSales: list})
	})
}

// Staff actions on a request.
const (
	ActionAgree  = "agree"
	ActionReject = "reject"
	ActionDecide = "decide"
)

// HandleAction serves POST /admin/v1/after-sales/{id}/{agree,reject}
// (staff of the request's merchant, or admins) and .../decide (admins,
// for an escalated request).
func HandleAction(s *Service, action string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, _ := auth.StaffFrom(r.Context())
		id, err := web.PathID(r, errNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		var a AfterSale
		switch action {
		case ActionDecide:
			d, derr := web.Decode[Decision](r)
			if derr != nil {
				web.Error(w, r, derr)
				return
			}
			a, err = s.Decide(r.Context(), deciderOf(staff), id, *d.Agree, d.Note)
		default:
			n, derr := decodeOptional[Note](r)
			if derr == nil && action == ActionReject {
				derr = n.check(true)
			}
			if derr != nil {
				web.Error(w, r, derr)
				return
			}
			if action == ActionReject {
				a, err = s.Reject(r.Context(), deciderOf(staff), id, n.Note)
			} else {
				a, err = s.Agree(r.Context(), deciderOf(staff), id, n.Note)
			}
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, a)
	})
}

// decodeOptional decodes a body that may be left out (agree needs none).
func decodeOptional[T any](r *http.Request) (T, error) {
	var zero T
	if r.ContentLength == 0 {
		return zero, nil
	}
	return web.Decode[T](r)
}
