package order

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/web"
)

func orderID(r *http.Request) (int64, error) {
	id, err := web.PathID(r, ErrOrderNotFound)
	if err != nil {
		return 0, err
	}
	web.AddLogAttrs(r.Context(), slog.Int64("order_id", id))
	return id, nil
}

func writeApplied(w http.ResponseWriter, a Applied) {
	if a.Replayed {
		// The event had happened already: the answer is the order as it is.
		w.Header().Set("Idempotent-Replayed", "true")
	}
	web.JSON(w, http.StatusOK, a.Order)
}

// HandleCancel serves POST /v1/orders/{id}/cancel: an unpaid order is
// cancelled and its stock released; a paid one not yet accepted moves to
// REFUNDING. Cancelling again answers with the order as it is.
func HandleCancel(s *Service) http.Handler {
	return handleUserAction(s, statemachine.Cancel, "cancelled by the user")
}

// HandleConfirmReceipt serves POST /v1/orders/{id}/complete: the customer
// confirms a delivering order arrived (COMPLETED); confirming again
// answers with the order as it is. Auto-complete covers those who never
// confirm.
func HandleConfirmReceipt(s *Service) http.Handler {
	return handleUserAction(s, statemachine.Complete, "receipt confirmed by the user")
}

func handleUserAction(s *Service, event statemachine.Event, reason string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		id, err := orderID(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		a, err := s.Apply(r.Context(), id, event, Actor{Kind: statemachine.User, UserID: userID}, reason)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		writeApplied(w, a)
	})
}

// HandleReorder serves POST /v1/orders/{id}/reorder: a new quote of one's
// past order, priced now, naming what changed.
func HandleReorder(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		id, err := orderID(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		out, err := s.Reorder(r.Context(), userID, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, out)
	})
}

// HandleUrge serves POST /v1/orders/{id}/urge: a nudge to the merchant,
// at most once per interval (429 with Retry-After sooner).
func HandleUrge(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		id, err := orderID(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		out, err := s.Urge(r.Context(), userID, id)
		if p, ok := problem.As(err); ok && p.Type == problem.RateLimited {
			w.Header().Set("Retry-After", fmt.Sprint(p.Extra["retry_after_s"]))
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, out)
	})
}

// staffActor maps a staff member to the state table's actor.
func staffActor(st auth.Staff) Actor {
	if st.Role.Admin {
		return Actor{Kind: statemachine.Admin, Name: st.Subject}
	}
	return Actor{Kind: statemachine.Merchant, MerchantID: st.Role.MerchantID, Name: st.Subject}
}

// HandleStaffAction serves POST /admin/v1/orders/{id}/{accept,reject,
// ready,dispatch,complete,refund} for event. Merchant staff act on their own
// merchant's orders (others are 404); admins on any.
func HandleStaffAction(s *Service, event statemachine.Event) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, _ := auth.StaffFrom(r.Context())
		id, err := orderID(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		a, err := s.Apply(r.Context(), id, event, staffActor(st), string(event)+" by "+st.Subject)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		writeApplied(w, a)
	})
}

// HandleSearch serves GET /admin/v1/orders?status=&merchant_id=&user_id=
// &from=&to=&cursor=&limit=: orders newest first. Merchant staff see only
// their merchant's.
func HandleSearch(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, _ := auth.StaffFrom(r.Context())
		q, err := web.Query(r, "status", "merchant_id", "user_id", "from", "to", "cursor", "limit")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		var p SearchFilter
		if v := statemachine.Status(q.Get("status")); v != "" {
			if !slices.Contains(statemachine.Statuses(), v) {
				web.Error(w, r, problem.Field("status", "unknown status %q", v))
				return
			}
			p.Status = &v
		}
		if p.MerchantID, err = optionalID(q.Get("merchant_id"), "merchant_id"); err != nil {
			web.Error(w, r, err)
			return
		}
		if !st.Role.Admin {
			if p.MerchantID != nil && *p.MerchantID != st.Role.MerchantID {
				web.Error(w, r, auth.ErrOtherMerchant)
				return
			}
			p.MerchantID = &st.Role.MerchantID
		}
		if p.UserID, err = optionalID(q.Get("user_id"), "user_id"); err != nil {
			web.Error(w, r, err)
			return
		}
		if p.CreatedFrom, err = optionalTime(q.Get("from"), "from"); err != nil {
			web.Error(w, r, err)
			return
		}
		if p.CreatedTo, err = optionalTime(q.Get("to"), "to"); err != nil {
			web.Error(w, r, err)
			return
		}
		limit := 50
		if v := q.Get("limit"); v != "" {
			if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 200 {
				web.Error(w, r, problem.Field("limit", "must be between 1 and 200"))
				return
			}
		}
		if c := q.Get("cursor"); c != "" {
			id, err := decodeCursor(c)
			if err != nil {
				web.Error(w, r, problem.Field("cursor", "not a cursor this API returned"))
				return
			}
			p.BeforeID = &id
		}
		page, err := s.Search(r.Context(), p, limit)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, page)
	})
}

func optionalID(v, field string) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	id, err := parseID(field, v)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

func optionalTime(v, field string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, problem.Field(field, "must be an RFC 3339 time, e.g. 2026-11-30T08:00:00Z")
	}
	return &t, nil
}
