package order

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// HandleConfirm serves POST /v1/orders/confirm.
func HandleConfirm(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		req, err := web.Decode[ConfirmRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		resp, err := s.Confirm(r.Context(), userID, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, resp)
	})
}

// HandleSubmit serves POST /v1/orders: the Idempotency-Key is required,
// and a replayed answer is the original, byte for byte, marked with
// Idempotent-Replayed: true.
func HandleSubmit(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		key, err := idempotency.ParseKey(r.Header.Get("Idempotency-Key"))
		if err != nil {
			web.Error(w, r, err)
			return
		}
		req, err := DecodeSubmit(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		out, err := s.Submit(r.Context(), userID, key, req.ConfirmToken, PlacedReply)
		if err != nil {
			if p, ok := problem.As(err); ok && p.Type == problem.RequestInProgress {
				w.Header().Set("Retry-After", strconv.Itoa(retryAfter(p)))
			}
			web.Error(w, r, err)
			return
		}
		if loc := out.Response.Header("Location"); loc != "" {
			web.AddLogAttrs(r.Context(), slog.String("order_id", loc[strings.LastIndexByte(loc, '/')+1:]))
		}
		idempotency.WriteResponse(w, out)
	})
}

// PlacedReply is HandleSubmit's answer to a submit, as stored for its key and
// replayed: 201 with the new order, or 200 with the order its token had
// placed already (duplicate: true), and its Location either way.
func PlacedReply(p Placed) (idempotency.Response, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return idempotency.Response{}, err
	}
	status := http.StatusCreated
	if p.Duplicate {
		status = http.StatusOK
	}
	return idempotency.Response{Status: status, Body: body, Headers: map[string]string{
		"Content-Type": "application/json", "Location": "/v1/orders/" + p.ID,
	}}, nil
}

func retryAfter(p *problem.Error) int {
	if n, ok := p.Extra["retry_after"].(int); ok {
		return n
	}
	return 1
}

// HandleGet serves GET /v1/orders/{id}.
func HandleGet(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			web.Error(w, r, ErrOrderNotFound)
			return
		}
		web.AddLogAttrs(r.Context(), slog.Int64("order_id", id))
		o, err := s.Get(r.Context(), userID, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, o)
	})
}

// HandleList serves GET /v1/orders?cursor=&limit=.
func HandleList(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		q, err := web.Query(r, "cursor", "limit")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		limit := 20
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				web.Error(w, r, problem.Field("limit", "must be between 1 and 100"))
				return
			}
			limit = n
		}
		page, err := s.List(r.Context(), userID, q.Get("cursor"), limit)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, page)
	})
}
