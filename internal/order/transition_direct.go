package order

import (
	"time"

	"github.com/takeout/takeout/internal/statemachine"
)

// DirectTransition is an order transition that one statement decides and
// writes together with the caller's own change (payment_settle): it
// moves the order it finds from From to To, writes the history row and
// renders the outbox event from the order as it writes it. The order is
// not read first: the statement moves it only when it is at From, and
// otherwise fails and the caller runs the transaction path.
type DirectTransition struct {
	From statemachine.Status
	To   statemachine.Status
	// UpdatedAt is the order's update time after the transition, which
	// the event states.
	UpdatedAt time.Time
	Actor     string
	Reason    string
	// EventType is the outbox event's type, nil when there is no outbox.
	EventType *string
}

// PrepareDirect decides event by actor on an order at from, without
// reading it. ok is false when no single statement can write it: the
// state table has no such transition, the actor would have to be checked
// against the order (a user or a merchant), or the transition has an
// effect the statement does not write (Transition.OneStatement: stock,
// jobs, the payment side; notifyBeyondOutbox: a webhook, a customer
// message), which the transaction path (ApplyTx) runs. Both read the
// same table and the same configuration, so an effect added to a
// transition sends it down the transaction path.
func (s *Service) PrepareDirect(from statemachine.Status, event statemachine.Event, actor Actor, reason string) (DirectTransition, bool) {
	if actor.Kind == statemachine.User || actor.Kind == statemachine.Merchant {
		return DirectTransition{}, false
	}
	d, err := s.lifecycle.Decide(from, event, actor.Kind)
	if err != nil || d.Replay {
		return DirectTransition{}, false
	}
	t := d.Transition
	if !t.OneStatement() || s.notifyBeyondOutbox(t.To) {
		return DirectTransition{}, false
	}
	dt := DirectTransition{From: t.From, To: t.To, UpdatedAt: s.now(), Actor: actor.String(), Reason: reason}
	if s.opts.Events != nil {
		typ := eventType(t.To)
		dt.EventType = &typ
	}
	return dt, true
}

// DirectApplied counts a transition that the caller's statement
// committed, and tells the outbox its event was written.
func (s *Service) DirectApplied(dt DirectTransition) {
	s.transitions.WithLabelValues(string(dt.From), string(dt.To)).Inc()
	if s.opts.Events != nil && dt.EventType != nil {
		s.opts.Events.Wrote()
	}
}
