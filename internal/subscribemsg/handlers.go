package subscribemsg

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// GrantRequest is the body of PUT /v1/orders/{id}/subscriptions: the
// template ids the customer accepted in wx.requestSubscribeMessage.
type GrantRequest struct {
	TemplateIDs []string `json:"template_ids"`
}

// Validate checks the list's size.
func (r *GrantRequest) Validate() error {
	if len(r.TemplateIDs) == 0 || len(r.TemplateIDs) > 10 {
		return problem.Field("template_ids", "1 to 10 template ids")
	}
	return nil
}

// Grants is the answer: every template granted for the order so far and
// what became of it.
type Grants struct {
	OrderID       string  `json:"order_id"`
	Subscriptions []Grant `json:"subscriptions"`
}

// Grant is one accepted template.
type Grant struct {
	TemplateID string  `json:"template_id"`
	UsedFor    *string `json:"used_for"` // the status whose message took it
	Outcome    *string `json:"outcome"`  // sent, refused, rejected; null while pending
}

// HandleGrant serves PUT /v1/orders/{id}/subscriptions (the order's
// customer). Reporting a template twice changes nothing.
func HandleGrant(s *Sender) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, _ := auth.UserID(r.Context())
		orderID, err := web.PathID(r, problem.New(problem.NotFound, "no order %q", r.PathValue("id")))
		if err != nil {
			web.Error(w, r, err)
			return
		}
		req, err := web.Decode[GrantRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		o, err := s.q.OrderGetByID(r.Context(), s.opts.Pool, orderID)
		if errors.Is(err, db.ErrNotFound) || (err == nil && o.UserID != userID) {
			web.Error(w, r, problem.New(problem.NotFound, "no order %d", orderID))
			return
		}
		if err != nil {
			web.Error(w, r, err)
			return
		}
		for i, t := range req.TemplateIDs {
			if !s.Known(t) {
				web.Error(w, r, problem.Field(fmt.Sprintf("template_ids[%d]", i), "%q is not one of this service's subscribe message templates", t))
				return
			}
		}
		for _, t := range req.TemplateIDs {
			if err := s.q.OrderSubscriptionGrant(r.Context(), s.opts.Pool, dbsqlc.OrderSubscriptionGrantParams{OrderID: orderID, TemplateID: t}); err != nil {
				web.Error(w, r, err)
				return
			}
		}
		rows, err := s.q.OrderSubscriptionsOf(r.Context(), s.opts.Pool, orderID)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		out := Grants{OrderID: strconv.FormatInt(orderID, 10), Subscriptions: make([]Grant, 0, len(rows))}
		for _, g := range rows {
			out.Subscriptions = append(out.Subscriptions, Grant{TemplateID: g.TemplateID, UsedFor: g.UsedFor, Outcome: g.Outcome})
		}
		web.JSON(w, http.StatusOK, out)
	})
}
