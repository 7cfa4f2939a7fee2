// Package statemachine is the one place the order lifecycle is defined:
// a declarative table of transitions (from, event, to, who may trigger it,
// side effects) and Machine.Decide, which says what an event means for an order in
// a given status. It is a leaf: the order package applies decisions in
// SQL (compare-and-set on status and version, history row, effects and
// jobs in one transaction).
package statemachine

import (
	"fmt"
	"slices"
	"strings"
)

// Status is an order status.
type Status string

// The statuses.
const (
	PendingPayment Status = "PENDING_PAYMENT"
	Paid           Status = "PAID"
	Accepted       Status = "ACCEPTED"
	Ready          Status = "READY" // prepared, waiting for the rider
	Delivering     Status = "DELIVERING"
	Completed      Status = "COMPLETED"
	Cancelled      Status = "CANCELLED"
	Refunding      Status = "REFUNDING"
	Refunded       Status = "REFUNDED"
)

// Statuses lists every status, in lifecycle order.
func Statuses() []Status {
	return []Status{PendingPayment, Paid, Accepted, Ready, Delivering, Completed, Cancelled, Refunding, Refunded}
}

// Event is what happens to an order.
type Event string

// The events.
const (
	Pay          Event = "pay"           // payment confirmed (callback or active query)
	Cancel       Event = "cancel"        // the user (or an admin for them) cancels
	Timeout      Event = "timeout"       // unpaid at the pay deadline
	Accept       Event = "accept"        // the merchant takes the order
	Reject       Event = "reject"        // the merchant refuses a paid order
	Refund       Event = "refund"        // the merchant cancels an accepted order (e.g. sold out)
	MarkReady    Event = "ready"         // the food is prepared, waiting for pickup
	Dispatch     Event = "dispatch"      // the merchant hands it to delivery
	PickUp       Event = "pick_up"       // the customer collected a pickup order at the counter
	Complete     Event = "complete"      // delivered: the merchant says so or the customer confirms receipt
	AutoComplete Event = "auto_complete" // delivering for too long: taken as delivered
	RefundDone   Event = "refunded"      // the refund succeeded
	AutoAccept   Event = "auto_accept"   // not accepted by the accept deadline; the merchant's rule accepts
	AutoReject   Event = "auto_reject"   // not accepted by the accept deadline; the merchant's rule rejects and refunds
)

// Actor kinds: who triggers an event.
type Actor string

// The actors.
const (
	User     Actor = "user"
	Merchant Actor = "merchant"
	Admin    Actor = "admin"
	System   Actor = "system"  // jobs: timeouts, auto-complete
	Payment  Actor = "payment" // payment callbacks and queries
)

// Effect is a side effect of a transition, run in its transaction.
type Effect string

// The effects.
const (
	ReleaseStock         Effect = "release_stock"          // return reserved stock, exactly once
	ConsumeStock         Effect = "consume_stock"          // the reserved stock left with the order: no longer on hand
	RequestRefund        Effect = "request_refund"         // start the refund of the payment
	ScheduleAutoComplete Effect = "schedule_auto_complete" // job that completes a forgotten delivery
	Notify               Effect = "notify"                 // the order's event: live board, webhook, customer message
	ClosePayment         Effect = "close_payment"          // close the order's open payment at the provider
	ReleaseVoucher       Effect = "release_voucher"        // give back the voucher the order holds, if it still holds it
	ReleasePromotions    Effect = "release_promotions"     // give back the promotions' budget and the first-order claim the order took
	// The accept deadline's two effects are written by the transition's
	// own UPDATE of the order (OrderTransition, payment_settle), not by a
	// statement of their own.
	StartAcceptDeadline   Effect = "start_accept_deadline"   // the order records when it must be accepted by, and what then (its merchant's rule)
	AcceptDeadlineApplied Effect = "accept_deadline_applied" // the order records that the system moved it on at its deadline
	// QueuePrints inserts the tickets the accepted order owes its
	// merchant's printers: the print outbox, in the accept's transaction.
	QueuePrints Effect = "queue_prints"
	// ReleaseSlot gives a scheduled order's time slot back to its
	// capacity, exactly once; it runs before ReleaseStock, in the order
	// the placement took them.
	ReleaseSlot Effect = "release_slot"
	// UploadShipping tells WeChat how the order went out (dispatched, or
	// collected), once per order: the upload's row and job, in the
	// transition's transaction.
	UploadShipping Effect = "upload_shipping"
	// ShareProfit records the share of a completed order's payment (the
	// service-provider mode's profit sharing) and its job.
	ShareProfit Effect = "share_profit"
	// DispatchCourier opens the order's courier delivery and its job,
	// when its merchant dispatches to couriers on this transition (on
	// accept, or when ready): the courier package.
	DispatchCourier Effect = "dispatch_courier"
	// CancelCourier cancels the order's active courier delivery, if it
	// has one: a job, queued in the transition's transaction.
	CancelCourier Effect = "cancel_courier"
)

// OneStatement reports whether the one-statement path of a transition
// (payment_settle: db/functions) writes effect e itself. It writes the
// history row and the outbox event, which is Notify's part for the live
// board, and the accept deadline of an order it makes PAID; order.Service declines the path too when Notify means more
// under its configuration (a webhook, a customer message). Any other
// effect runs only in the transaction path, so a transition with one
// never takes the one-statement path.
func (e Effect) OneStatement() bool { return e == Notify || e == StartAcceptDeadline }

// OneStatement reports whether every effect of t is one the
// one-statement path writes.
func (t Transition) OneStatement() bool {
	for _, e := range t.Effects {
		if !e.OneStatement() {
			return false
		}
	}
	return true
}

// Transition is one row of the table.
type Transition struct {
	From    Status
	Event   Event
	To      Status
	Actors  []Actor
	Effects []Effect
	// Why, for the diagram.
	Why string
}

// Table returns the lifecycle. Nothing outside it is a transition.
func Table() []Transition {
	return []Transition{
		{PendingPayment, Pay, Paid, []Actor{Payment}, []Effect{StartAcceptDeadline, Notify}, "payment callback or active query"},
		{PendingPayment, Cancel, Cancelled, []Actor{User, Admin}, []Effect{ReleaseSlot, ReleaseStock, ReleaseVoucher, ReleasePromotions, ClosePayment, Notify}, "user cancels"},
		{PendingPayment, Timeout, Cancelled, []Actor{System}, []Effect{ReleaseSlot, ReleaseStock, ReleaseVoucher, ReleasePromotions, Notify}, "pay deadline passed"},
		{Paid, Accept, Accepted, []Actor{Merchant, Admin}, []Effect{QueuePrints, DispatchCourier, Notify}, "merchant accepts"},
		{Paid, Reject, Refunding, []Actor{Merchant, Admin}, []Effect{ReleaseSlot, ReleaseStock, ReleaseVoucher, ReleasePromotions, RequestRefund, Notify}, "merchant rejects"},
		{Paid, Cancel, Refunding, []Actor{User, Admin}, []Effect{ReleaseSlot, ReleaseStock, ReleaseVoucher, ReleasePromotions, RequestRefund, Notify}, "user cancels before acceptance"},
		{Paid, AutoAccept, Accepted, []Actor{System}, []Effect{AcceptDeadlineApplied, QueuePrints, DispatchCourier, Notify}, "accept deadline passed: accepted by the merchant's rule"},
		{Paid, AutoReject, Refunding, []Actor{System}, []Effect{AcceptDeadlineApplied, ReleaseSlot, ReleaseStock, ReleaseVoucher, ReleasePromotions, RequestRefund, Notify}, "accept deadline passed: rejected and refunded by the merchant's rule"},
		{Accepted, MarkReady, Ready, []Actor{Merchant, Admin}, []Effect{DispatchCourier, Notify}, "food prepared: the rider or the customer is told"},
		{Accepted, Dispatch, Delivering, []Actor{Merchant, Admin, System}, []Effect{ConsumeStock, ScheduleAutoComplete, UploadShipping, Notify}, "merchant dispatches, or the courier picked it up (READY is optional)"},
		{Accepted, Refund, Refunding, []Actor{Merchant, Admin}, []Effect{ReleaseSlot, ReleaseStock, CancelCourier, RequestRefund, Notify}, "merchant cancels (e.g. sold out)"},
		{Ready, Dispatch, Delivering, []Actor{Merchant, Admin, System}, []Effect{ConsumeStock, ScheduleAutoComplete, UploadShipping, Notify}, "the rider picked it up"},
		{Ready, PickUp, Completed, []Actor{Merchant, Admin}, []Effect{ConsumeStock, UploadShipping, ShareProfit, Notify}, "the customer collected a pickup order"},
		{Ready, Refund, Refunding, []Actor{Merchant, Admin}, []Effect{ReleaseSlot, ReleaseStock, CancelCourier, RequestRefund, Notify}, "merchant cancels a prepared order"},
		{Delivering, Complete, Completed, []Actor{User, Merchant, Admin, System}, []Effect{ShareProfit, Notify}, "delivered (the merchant or the courier says so), or the customer confirms receipt"},
		{Delivering, AutoComplete, Completed, []Actor{System}, []Effect{ShareProfit, Notify}, "auto-complete after a timeout"},
		{Refunding, RefundDone, Refunded, []Actor{Payment, Admin}, []Effect{Notify}, "refund callback or query, or settled by an operator"},
		// Partial refunds that come to all that was paid end the order too.
		// A voucher goes back with a whole refund before acceptance (the
		// customer loses nothing by the merchant's refusal); once the
		// kitchen accepted, it was spent.
		{Paid, RefundDone, Refunded, []Actor{Payment, Admin}, []Effect{ReleaseSlot, ReleaseStock, ReleaseVoucher, ReleasePromotions, Notify}, "partial refunds came to all that was paid"},
		{Accepted, RefundDone, Refunded, []Actor{Payment, Admin}, []Effect{ReleaseSlot, ReleaseStock, CancelCourier, Notify}, "partial refunds came to all that was paid"},
		{Ready, RefundDone, Refunded, []Actor{Payment, Admin}, []Effect{ReleaseSlot, ReleaseStock, CancelCourier, Notify}, "partial refunds came to all that was paid"},
		{Delivering, RefundDone, Refunded, []Actor{Payment, Admin}, []Effect{Notify}, "partial refunds came to all that was paid"},
		{Completed, RefundDone, Refunded, []Actor{Payment, Admin}, []Effect{Notify}, "partial refunds came to all that was paid"},
	}
}

// Decision is what an event means for an order in some status.
type Decision struct {
	// Transition is the row to apply; nil when nothing changes.
	Transition *Transition
	// Replay is true when the event already happened: the order is where
	// the event would have taken it, and the caller answers with it as is.
	Replay bool
}

// ConflictError is an event the table does not allow in the current
// status (409 order-status-conflict).
type ConflictError struct {
	Current Status
	Event   Event
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("cannot %s an order that is %s", e.Event, e.Current)
}

// ForbiddenError is an actor the table does not allow for the event.
type ForbiddenError struct {
	Actor Actor
	Event Event
}

func (e *ForbiddenError) Error() string { return fmt.Sprintf("%s may not %s orders", e.Actor, e.Event) }

// Machine is a lifecycle: a table of transitions and the decisions it
// makes. The service runs Default; a test may run another table.
type Machine struct {
	table []Transition
}

// New returns the machine of table.
func New(table []Transition) *Machine { return &Machine{table: table} }

// Default returns the machine of Table: the service's lifecycle.
func Default() *Machine { return New(Table()) }

// Decide says what event by actor means for an order in status current.
// Repeating an event that already happened is a replay, not an error.
func (m *Machine) Decide(current Status, event Event, actor Actor) (Decision, error) {
	allowed := false
	for _, t := range m.table {
		if t.Event == event && slices.Contains(t.Actors, actor) {
			allowed = true
			if t.From == current {
				return Decision{Transition: &t}, nil
			}
		}
	}
	if !allowed {
		return Decision{}, &ForbiddenError{Actor: actor, Event: event}
	}
	for _, t := range m.table {
		if t.Event == event && t.To == current {
			return Decision{Replay: true}, nil
		}
	}
	return Decision{}, &ConflictError{Current: current, Event: event}
}

// Terminal reports whether no transition leaves s.
func Terminal(s Status) bool {
	for _, t := range Table() {
		if t.From == s {
			return false
		}
	}
	return true
}

// Mermaid renders the table as a mermaid state diagram (the README's).
func Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	b.WriteString("    [*] --> PENDING_PAYMENT: submit\n")
	for _, t := range Table() {
		actors := make([]string, len(t.Actors))
		for i, a := range t.Actors {
			actors[i] = string(a)
		}
		fmt.Fprintf(&b, "    %s --> %s: %s (%s)\n", t.From, t.To, t.Event, strings.Join(actors, ", "))
	}
	for _, s := range Statuses() {
		if Terminal(s) {
			fmt.Fprintf(&b, "    %s --> [*]\n", s)
		}
	}
	return b.String()
}
