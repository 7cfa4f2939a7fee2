package courier

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is a delivery's status: where one placement of an order with a
// courier provider is.
type Status string

// The statuses, in the order a delivery goes through them.
const (
	Quoted    Status = "QUOTED"    // dispatch decided and priced; not placed yet
	Placed    Status = "PLACED"    // the provider took it; waiting for a rider
	Assigned  Status = "ASSIGNED"  // a rider took it
	Arrived   Status = "ARRIVED"   // the rider is at the shop
	PickedUp  Status = "PICKED_UP" // the rider has the food: the order is DELIVERING
	Delivered Status = "DELIVERED" // handed to the customer: the order is COMPLETED
	Cancelled Status = "CANCELLED" // cancelled, by us or the provider
	Failed    Status = "FAILED"    // the provider could not place or carry it
)

// Statuses lists every status, in lifecycle order.
func Statuses() []Status {
	return []Status{Quoted, Placed, Assigned, Arrived, PickedUp, Delivered, Cancelled, Failed}
}

// progress is a status's place along the way; the two ends that are not
// a delivery (cancelled, failed) come after every step.
func progress(s Status) int {
	switch s {
	case Quoted:
		return 0
	case Placed:
		return 1
	case Assigned:
		return 2
	case Arrived:
		return 3
	case PickedUp:
		return 4
	case Delivered:
		return 5
	default:
		return 6
	}
}

// Terminal reports whether a delivery in s is over.
func (s Status) Terminal() bool { return s == Delivered || s == Cancelled || s == Failed }

// Valid reports whether s is a status.
func (s Status) Valid() bool { return slices.Contains(Statuses(), s) }

// Transition is one row of the delivery's table.
type Transition struct {
	From, To Status
	Why      string
}

// Table returns the delivery's lifecycle. A provider may skip steps (a
// callback lost, a rider quick at the counter), so every step leads to
// any later one; any step but the end may be cancelled or fail. Nothing
// leads back.
func Table() []Transition {
	var out []Transition
	steps := []Status{Quoted, Placed, Assigned, Arrived, PickedUp, Delivered}
	why := map[Status]string{
		Placed: "the provider took it", Assigned: "a rider took it", Arrived: "the rider is at the shop",
		PickedUp: "the rider picked it up", Delivered: "handed over",
	}
	for i, from := range steps[:len(steps)-1] {
		for _, to := range steps[i+1:] {
			w := why[to]
			if to != steps[i+1] {
				w += " (steps skipped)"
			}
			out = append(out, Transition{from, to, w})
		}
		out = append(out, Transition{from, Cancelled, "cancelled by us or the provider"}, Transition{from, Failed, "the provider cannot place or carry it"})
	}
	return out
}

// Allowed reports whether the table leads from one status to another.
func Allowed(from, to Status) bool {
	return slices.ContainsFunc(Table(), func(t Transition) bool { return t.From == from && t.To == to })
}

// Outcome is what an update means for a delivery.
type Outcome int

// The outcomes.
const (
	// Stale: an update older than the last applied, behind it, or the
	// same again; nothing changes.
	Stale Outcome = iota
	// Advance: the delivery moves to the update's status.
	Advance
	// Reassign: the same status with another rider; the rider changes,
	// the status stays.
	Reassign
	// Catch: a step further along reported after a newer update (a
	// callback delayed across a reassignment): the status moves, the
	// rider and the time stay the newer update's.
	Catch
)

// State is what an update is judged against: a delivery's status, its
// rider and the provider's time of the last update applied.
type State struct {
	Status Status
	Rider  string
	At     *time.Time
}

// Decide says what an update (status, rider, the provider's time) means
// for a delivery in state. The status only moves forward, to the
// furthest step reported, whatever order the reports arrive in; the
// rider is the one of the latest report. So an update older than the
// last one applied never changes the rider (a callback delayed behind a
// newer one must not undo it), and moves the status only when it is
// further along (a step reported late across a reassignment). A status
// behind the current one is stale: providers send steps again (a rider
// dropping an order puts Dada's back to waiting), and ours never go
// back; a new rider arrives as a reassignment instead.
func Decide(cur State, to Status, rider string, at time.Time) Outcome {
	if cur.Status.Terminal() || !to.Valid() || to == Quoted {
		return Stale
	}
	older := cur.At != nil && !at.IsZero() && at.Before(*cur.At)
	switch {
	case Allowed(cur.Status, to) && older:
		return Catch
	case Allowed(cur.Status, to):
		return Advance
	case !older && rider != "" && cur.Rider != "" && rider != cur.Rider && progress(to) <= progress(cur.Status) &&
		progress(cur.Status) <= progress(PickedUp) && progress(to) >= progress(Assigned):
		return Reassign
	default:
		return Stale
	}
}

// Mermaid renders the table as a mermaid state diagram (docs/delivery.md).
func Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	b.WriteString("    [*] --> QUOTED: dispatch\n")
	for _, t := range Table() {
		fmt.Fprintf(&b, "    %s --> %s: %s\n", t.From, t.To, t.Why)
	}
	for _, s := range Statuses() {
		if s.Terminal() {
			fmt.Fprintf(&b, "    %s --> [*]\n", s)
		}
	}
	return b.String()
}
