package promotion

import (
	"context"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// List is the answer of GET /admin/v1/merchants/{id}/promotions.
type List struct {
	Promotions []Promotion `json:"promotions"`
}

var errMerchantNotFound = problem.New(problem.NotFound, "no such merchant")

// HandleCreate serves POST /admin/v1/merchants/{id}/promotions, exactly
// once per Idempotency-Key: a merchant's staff for their merchant, an
// admin for any.
func HandleCreate(s *Service, idem *idempotency.Store) http.Handler {
	return idempotency.Creating(idem, s, false, auth.StaffScope, func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
		staff, ok := auth.StaffFrom(ctx)
		if !ok {
			return idempotency.Created{}, problem.New(problem.Unauthorized, "staff token required")
		}
		merchantID, err := web.PathID(r, errMerchantNotFound)
		if err != nil {
			return idempotency.Created{}, err
		}
		req, err := web.Decode[CreateRequest](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		p, err := s.Create(ctx, tx, staff, merchantID, req)
		if err != nil {
			return idempotency.Created{}, err
		}
		c, err := idempotency.JSONCreated(http.StatusCreated, p, "Location", "/admin/v1/promotions/"+p.ID)
		c.AfterCommit = func() { s.Changed(ctx, merchantID) }
		return c, err
	})
}

// HandleList serves GET /admin/v1/merchants/{id}/promotions.
func HandleList(s *Service) http.Handler {
	return staffHandler(errMerchantNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		ps, err := s.Promotions(r.Context(), staff, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, List{Promotions: ps})
	})
}

// HandleGet serves GET /admin/v1/promotions/{id}.
func HandleGet(s *Service) http.Handler {
	return staffHandler(ErrNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		p, err := s.Get(r.Context(), staff, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, p)
	})
}

// HandleUpdate serves PATCH /admin/v1/promotions/{id}.
func HandleUpdate(s *Service) http.Handler {
	return staffHandler(ErrNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		req, err := web.Decode[UpdateRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		p, err := s.Update(r.Context(), staff, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, p)
	})
}

// staffHandler adapts a handler that needs the staff member and the {id}
// path parameter.
func staffHandler(notFound error, h func(http.ResponseWriter, *http.Request, auth.Staff, int64)) http.Handler {
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
		h(w, r, staff, id)
	})
}
