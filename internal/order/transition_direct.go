package order

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/statemachine"
)

// DirectTransition is an order transition prepared outside a
// transaction, from the order as read, for one statement that writes it
// together with the caller's own change (payment_succeed): the order's
// new status and version, its history row and its outbox event. The
// statement moves the order only from the status and version read, so a
// change in between fails it and the caller runs the transaction path.
type DirectTransition struct {
	OrderID int64
	From    statemachine.Status
	To      statemachine.Status
	// Version is the order's version as read; the transition makes it
	// Version+1.
	Version int64
	// UpdatedAt is the order's update time after the transition, which
	// the event states.
	UpdatedAt time.Time
	Actor     string
	Reason    string
	// EventID, EventType and EventBody are the outbox event, nil when
	// there is no outbox.
	EventID   *string
	EventType *string
	EventBody []byte
}

// PrepareDirect decides event on the order o, with its items, as read,
// and renders what the transition writes. ok is false when no single
// statement can write it: the state table refuses it or has already
// applied it (the transaction path explains, or replays), or it has
// effects beyond the outbox event (stock, jobs, the payment side, a
// customer message, a webhook), which the transaction path runs.
func (s *Service) PrepareDirect(o dbsqlc.Order, items []dbsqlc.OrderItem, event statemachine.Event, actor Actor, reason string) (DirectTransition, bool, error) {
	if !owns(actor, o) {
		return DirectTransition{}, false, nil
	}
	d, err := statemachine.Decide(o.Status, event, actor.Kind)
	if err != nil || d.Replay {
		return DirectTransition{}, false, nil //nolint:nilerr // refused: the transaction path answers it
	}
	t := d.Transition
	if slices.ContainsFunc(t.Effects, func(e statemachine.Effect) bool { return e != statemachine.Notify }) ||
		s.opts.WebhookEnabled || (s.opts.Messages != nil && s.opts.Messages.Queues(t.To)) {
		return DirectTransition{}, false, nil
	}
	row := o
	row.Status, row.Version, row.UpdatedAt = t.To, o.Version+1, s.now()
	dt := DirectTransition{OrderID: o.ID, From: t.From, To: t.To, Version: o.Version, UpdatedAt: row.UpdatedAt,
		Actor: actor.String(), Reason: reason}
	if s.opts.Events == nil {
		return dt, true, nil
	}
	var addr Address
	if err := json.Unmarshal(o.Address, &addr); err != nil {
		return DirectTransition{}, false, fmt.Errorf("decode address: %w", err)
	}
	typ := eventType(t.To)
	ev, err := orderEvent(row, orderFromRow(row, items, addr), typ, row.Version, row.UpdatedAt)
	if err != nil {
		return DirectTransition{}, false, err
	}
	if dt.EventBody, err = s.opts.Events.Body(ev); err != nil {
		return DirectTransition{}, false, err
	}
	dt.EventID, dt.EventType = &ev.ID, &typ
	return dt, true, nil
}

// DirectApplied counts a transition that the caller's statement
// committed, and tells the outbox its event was written.
func (s *Service) DirectApplied(dt DirectTransition) {
	s.transitions.WithLabelValues(string(dt.From), string(dt.To)).Inc()
	if s.opts.Events != nil && dt.EventID != nil {
		s.opts.Events.Wrote()
	}
}
