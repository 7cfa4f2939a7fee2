package order

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
)

// What a customer does with an order they placed: order it again, and
// urge the merchant about it.

// ReorderResponse is the answer of POST /v1/orders/{id}/reorder: a quote
// of the past order's lines at today's prices, and what changed since.
type ReorderResponse struct {
	ConfirmResponse
	// Dropped are the lines that cannot be ordered now: the dish is gone
	// or off sale, or a chosen option is gone, switched off, or no longer
	// fits its group.
	Dropped []ReorderLine `json:"dropped"`
	// Repriced are the lines kept whose unit price moved.
	Repriced []ReorderLine `json:"repriced"`
}

// ReorderLine names a line of the past order and what happened to it.
type ReorderLine struct {
	DishID          string `json:"dish_id"`
	Name            string `json:"name"`
	Reason          string `json:"reason,omitempty"`
	WasUnitPriceFen int64  `json:"was_unit_price_fen"`
	UnitPriceFen    int64  `json:"unit_price_fen,omitempty"`
}

// Reorder confirms the lines of one of the user's orders again, priced
// now, to the same address (or collected again) with the same remark, as
// soon as possible: a deliberate repeat (a
// new order even within the dedup window). Lines that cannot be ordered
// now are dropped and named; when none is left it is 409
// dish-unavailable naming them all.
func (s *Service) Reorder(ctx context.Context, userID, orderID int64) (ReorderResponse, error) {
	o, err := s.q.OrderGetByID(ctx, s.opts.Pool, orderID)
	if errors.Is(err, db.ErrNotFound) || (err == nil && o.UserID != userID) {
		return ReorderResponse{}, ErrOrderNotFound
	}
	if err != nil {
		return ReorderResponse{}, fmt.Errorf("read order: %w", err)
	}
	past, err := s.load(ctx, s.opts.Pool, o)
	if err != nil {
		return ReorderResponse{}, err
	}
	ids := make([]int64, len(past.Items))
	for i, it := range past.Items {
		ids[i], _ = strconv.ParseInt(it.DishID, 10, 64) // ours
	}
	rows, err := s.q.QuoteCart(ctx, s.opts.Pool, dbsqlc.QuoteCartParams{MerchantID: o.MerchantID, Ids: ids})
	if err != nil {
		return ReorderResponse{}, fmt.Errorf("reorder: merchant and dishes: %w", err)
	}
	byID := make(map[int64]quotedDish, len(rows))
	for _, r := range rows {
		if r.DishID != nil {
			if byID[*r.DishID], err = quotedDishFromRow(r); err != nil {
				return ReorderResponse{}, err
			}
		}
	}
	// The same way (a pickup order is collected again), for now: its
	// slot, if it had one, has passed or is its own.
	req := ConfirmRequest{MerchantID: strconv.FormatInt(o.MerchantID, 10), Address: &past.Address, Remark: past.Remark, Repeat: true,
		Fulfilment: o.Fulfilment}
	out := ReorderResponse{Dropped: []ReorderLine{}, Repriced: []ReorderLine{}}
	for i, it := range past.Items {
		line := ReorderLine{DishID: it.DishID, Name: it.Name, WasUnitPriceFen: it.UnitPriceFen}
		unit, reason := reorderable(byID, ids[i], it)
		if reason != "" {
			line.Reason = reason
			out.Dropped = append(out.Dropped, line)
			continue
		}
		if unit != it.UnitPriceFen {
			line.UnitPriceFen = unit
			out.Repriced = append(out.Repriced, line)
		}
		item := ConfirmItem{DishID: it.DishID, Qty: it.Qty, Options: []string{}}
		for _, opt := range it.Options {
			item.Options = append(item.Options, opt.ChoiceID)
		}
		req.Items = append(req.Items, item)
	}
	if len(req.Items) == 0 {
		names := make([]string, len(out.Dropped))
		for i, d := range out.Dropped {
			names[i] = d.Name
		}
		return ReorderResponse{}, problem.New(problem.DishUnavailable, "none of this order's dishes can be ordered now").
			With("dishes", names).With("dropped", out.Dropped)
	}
	if out.ConfirmResponse, err = s.Confirm(ctx, userID, req); err != nil {
		return ReorderResponse{}, err
	}
	return out, nil
}

// reorderable prices a past line now, or says why it cannot be ordered.
func reorderable(byID map[int64]quotedDish, dishID int64, it Item) (int64, string) {
	d, ok := byID[dishID]
	switch {
	case !ok:
		return 0, "the dish is no longer on the menu"
	case !d.OnSale:
		return 0, "the dish is not for sale now"
	}
	chosen := make([]string, len(it.Options))
	for i, o := range it.Options {
		chosen[i] = o.ChoiceID
	}
	opts, off, err := chooseOptions("options", d, chosen)
	switch {
	case err != nil:
		return 0, "its options changed"
	case len(off) > 0:
		return 0, "an option is not available now"
	}
	unit := d.PriceFen
	for _, o := range opts {
		unit += o.DeltaFen
	}
	return unit, ""
}

// urgeable are the statuses in which a customer waits on the merchant.
var urgeable = []string{string(statemachine.Paid), string(statemachine.Accepted), string(statemachine.Ready), string(statemachine.Delivering)}

// Urged is the answer of POST /v1/orders/{id}/urge.
type Urged struct {
	OrderID    string    `json:"order_id"`
	UrgeCount  int32     `json:"urge_count"`
	UrgedAt    time.Time `json:"urged_at"`
	NextUrgeAt time.Time `json:"next_urge_at"`
}

// ErrUrgedRecently is an urge within the interval of the last one; its
// retry_after_s says when the next may be sent.
func errUrgedRecently(wait time.Duration) error {
	secs := int64(math.Ceil(wait.Seconds()))
	return problem.New(problem.RateLimited, "you urged this order less than a while ago; you may again in %d seconds", secs).
		With("retry_after_s", secs)
}

// Urge nudges the merchant about one of the user's orders that it is
// working on (paid, accepted, ready or delivering), at most once per
// UrgeInterval: an order event (order.urged) to the merchant, written
// with the urge. Concurrent urges make one.
func (s *Service) Urge(ctx context.Context, userID, orderID int64) (Urged, error) {
	return db.WithTxV(ctx, s.opts.Pool, func(tx pgx.Tx) (Urged, error) {
		now := s.now()
		notAfter := now.Add(-s.opts.UrgeInterval)
		row, err := s.q.OrderUrge(ctx, tx, dbsqlc.OrderUrgeParams{Now: &now, ID: orderID, UserID: userID, Statuses: urgeable, NotAfter: &notAfter})
		if errors.Is(err, db.ErrNotFound) {
			return Urged{}, s.whyNotUrged(ctx, tx, userID, orderID, now)
		}
		if err != nil {
			return Urged{}, fmt.Errorf("urge order: %w", err)
		}
		if err := s.notifyUrge(ctx, tx, row, now); err != nil {
			return Urged{}, err
		}
		return Urged{OrderID: strconv.FormatInt(row.ID, 10), UrgeCount: row.UrgeCount, UrgedAt: now, NextUrgeAt: now.Add(s.opts.UrgeInterval)}, nil
	})
}

// whyNotUrged explains an urge that changed nothing.
func (s *Service) whyNotUrged(ctx context.Context, tx pgx.Tx, userID, orderID int64, now time.Time) error {
	o, err := s.q.OrderGetByID(ctx, tx, orderID)
	switch {
	case errors.Is(err, db.ErrNotFound) || (err == nil && o.UserID != userID):
		return ErrOrderNotFound
	case err != nil:
		return fmt.Errorf("read order: %w", err)
	case !slices.Contains(urgeable, string(o.Status)):
		return problem.New(problem.OrderStatusConflict, "cannot urge an order that is %s: only one the merchant is working on", o.Status).
			With("current_status", o.Status)
	case o.UrgedAt != nil:
		return errUrgedRecently(o.UrgedAt.Add(s.opts.UrgeInterval).Sub(now))
	}
	// It moved out of an urgeable status and back between the two reads.
	return problem.New(problem.OrderStatusConflict, "the order just changed; retry").With("current_status", o.Status)
}

// notifyUrge writes the order.urged event (its id names the urge's
// number, so each urge is one event however often its job runs).
func (s *Service) notifyUrge(ctx context.Context, tx pgx.Tx, row dbsqlc.Order, now time.Time) error {
	if !s.opts.WebhookEnabled && s.opts.Events == nil {
		return nil
	}
	out, err := s.load(ctx, tx, row)
	if err != nil {
		return err
	}
	return s.publish(ctx, tx, row, out, "order.urged", int64(row.UrgeCount), now)
}
