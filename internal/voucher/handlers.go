package voucher

import (
	"context"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// TemplateList is the answer of GET /admin/v1/voucher-templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
}

// OfferList is the answer of GET /v1/voucher-templates.
type OfferList struct {
	Offers []Offer `json:"offers"`
}

// WalletList is the answer of GET /v1/vouchers.
type WalletList struct {
	Vouchers []Voucher `json:"vouchers"`
}

// merchantParam reads the optional merchant_id query parameter.
func merchantParam(r *http.Request) (*int64, error) {
	q, err := web.Query(r, "merchant_id")
	if err != nil || !q.Has("merchant_id") {
		return nil, err
	}
	id, err := strconv.ParseInt(q.Get("merchant_id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, problem.New(problem.InvalidRequest, "merchant_id: must be an id (a string of digits)").With("parameter", "merchant_id")
	}
	return &id, nil
}

// HandleCreateTemplate serves POST /admin/v1/voucher-templates, exactly
// once per Idempotency-Key.
func HandleCreateTemplate(s *Service, idem *idempotency.Store) http.Handler {
	return idempotency.Creating(idem, s, false, auth.StaffScope, func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
		staff, _ := auth.StaffFrom(ctx)
		req, err := web.Decode[CreateTemplateRequest](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		t, err := s.CreateTemplate(ctx, tx, staff, req)
		if err != nil {
			return idempotency.Created{}, err
		}
		return idempotency.JSONCreated(http.StatusCreated, t, "Location", "/admin/v1/voucher-templates/"+t.ID)
	})
}

// HandleListTemplates serves GET /admin/v1/voucher-templates: a
// merchant's (merchant_id) or the platform's.
func HandleListTemplates(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, _ := auth.StaffFrom(r.Context())
		merchantID, err := merchantParam(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		ts, err := s.Templates(r.Context(), staff, merchantID)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, TemplateList{Templates: ts})
	})
}

// HandleGetTemplate serves GET /admin/v1/voucher-templates/{id}.
func HandleGetTemplate(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, _ := auth.StaffFrom(r.Context())
		id, err := web.PathID(r, ErrTemplateNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		t, err := s.Template(r.Context(), staff, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, t)
	})
}

// HandleUpdateTemplate serves PATCH /admin/v1/voucher-templates/{id}.
func HandleUpdateTemplate(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, _ := auth.StaffFrom(r.Context())
		id, err := web.PathID(r, ErrTemplateNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		req, err := web.Decode[UpdateTemplateRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		t, err := s.UpdateTemplate(r.Context(), staff, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, t)
	})
}

// HandleOffers serves GET /v1/voucher-templates: what anyone may claim
// now, the platform's and (merchant_id) a merchant's.
func HandleOffers(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		merchantID, err := merchantParam(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		offers, err := s.Offers(r.Context(), merchantID)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, OfferList{Offers: offers})
	})
}

// HandleClaim serves POST /v1/vouchers/claim: one voucher per request,
// exactly once per Idempotency-Key, never beyond the customer's limit or
// the template's budget.
func HandleClaim(s *Service, idem *idempotency.Store) http.Handler {
	return idempotency.Creating(idem, s, false, auth.UserScope, func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
		userID, _ := auth.UserID(ctx)
		req, err := web.Decode[ClaimRequest](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		v, err := s.Claim(ctx, tx, userID, req.id())
		if err != nil {
			return idempotency.Created{}, err
		}
		return idempotency.JSONCreated(http.StatusCreated, v)
	})
}

// HandleWallet serves GET /v1/vouchers: the customer's vouchers.
func HandleWallet(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		if _, err := web.Query(r); err != nil {
			web.Error(w, r, err)
			return
		}
		vs, err := s.Wallet(r.Context(), userID)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, WalletList{Vouchers: vs})
	})
}
