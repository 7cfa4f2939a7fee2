// Package fulfilment is how a shop's orders reach their customers:
// delivered, collected at the counter, or both, now or in a time slot
// chosen ahead. A leaf package: the catalog keeps a shop's rules and
// lists its slots, the order capability holds a cart to them.
//
// Slots are cut from the shop's openings (package hours), day by day in
// its time zone: from the start of each opening, every SlotMinutes, as
// long as the slot ends by the opening's close. A slot can be ordered
// until its cut-off: LeadMinutes before it starts, and for today's slots
// also the shop's same-day cut-off, a time of day after which it takes
// orders only for later days.
package fulfilment

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/takeout/takeout/internal/hours"
)

// The ways an order reaches its customer.
const (
	Delivery = "delivery"
	Pickup   = "pickup"
)

// Rules are a shop's ways of fulfilment; at least one of delivery and
// pickup. Scheduled is nil when the shop takes orders only for now.
type Rules struct {
	Delivery  bool        `json:"delivery"`
	Pickup    bool        `json:"pickup"`
	Scheduled *Scheduling `json:"scheduled"`
}

// Scheduling is how a shop takes orders for later.
type Scheduling struct {
	// SlotMinutes is the length of a slot.
	SlotMinutes int `json:"slot_minutes"`
	// LeadMinutes is how long before its start a slot stops taking
	// orders: the kitchen's preparation time.
	LeadMinutes int `json:"lead_minutes"`
	// DaysAhead is how many days after today have slots (0: today only).
	DaysAhead int `json:"days_ahead"`
	// Capacity is how many orders a slot takes.
	Capacity int `json:"capacity"`
	// SameDayCutoff ("HH:MM", optional) is the time of day after which
	// today's slots take no more orders.
	SameDayCutoff string `json:"same_day_cutoff,omitempty"`
	// PrintBeforeMinutes is how long before its slot an accepted
	// scheduled order's tickets print.
	PrintBeforeMinutes int `json:"print_before_minutes"`
}

// Limits of the rules.
const (
	MinSlotMinutes  = 10
	MaxSlotMinutes  = 240
	MaxLeadMinutes  = 24 * 60
	MaxDaysAhead    = 7
	MaxCapacity     = 10_000
	MaxPrintMinutes = 24 * 60
)

// Default is a shop's rules until it says otherwise: delivery, now.
func Default() Rules { return Rules{Delivery: true} }

// Check reports rules out of range, naming the field.
func (r Rules) Check() (field string, err error) {
	if !r.Delivery && !r.Pickup {
		return "delivery", fmt.Errorf("offer delivery, pickup or both")
	}
	s := r.Scheduled
	if s == nil {
		return "", nil
	}
	switch {
	case s.SlotMinutes < MinSlotMinutes || s.SlotMinutes > MaxSlotMinutes:
		return "scheduled.slot_minutes", fmt.Errorf("must be between %d and %d", MinSlotMinutes, MaxSlotMinutes)
	case s.LeadMinutes < 0 || s.LeadMinutes > MaxLeadMinutes:
		return "scheduled.lead_minutes", fmt.Errorf("must be between 0 and %d", MaxLeadMinutes)
	case s.DaysAhead < 0 || s.DaysAhead > MaxDaysAhead:
		return "scheduled.days_ahead", fmt.Errorf("must be between 0 and %d", MaxDaysAhead)
	case s.Capacity < 1 || s.Capacity > MaxCapacity:
		return "scheduled.capacity", fmt.Errorf("must be between 1 and %d", MaxCapacity)
	case s.PrintBeforeMinutes < 0 || s.PrintBeforeMinutes > MaxPrintMinutes:
		return "scheduled.print_before_minutes", fmt.Errorf("must be between 0 and %d", MaxPrintMinutes)
	}
	if s.SameDayCutoff != "" {
		if _, err := clock(s.SameDayCutoff); err != nil {
			return "scheduled.same_day_cutoff", err
		}
	}
	return "", nil
}

// Offers reports whether the shop fulfils orders the way named.
func (r Rules) Offers(way string) bool {
	switch way {
	case Delivery:
		return r.Delivery
	case Pickup:
		return r.Pickup
	}
	return false
}

// FromDB reads rules as merchants.fulfilment keeps them.
func FromDB(b []byte) (Rules, error) {
	var r Rules
	if err := json.Unmarshal(b, &r); err != nil {
		return Rules{}, fmt.Errorf("fulfilment rules: %w", err)
	}
	return r, nil
}

// Slot is a stretch of time an order is fulfilled in; Cutoff is the last
// moment it can be ordered.
type Slot struct {
	Start  time.Time
	End    time.Time
	Cutoff time.Time
}

// Slots are the slots of the shop open for orders at now, in order:
// none when it takes no orders for later.
func (r Rules) Slots(sched hours.Schedule, now time.Time) []Slot {
	s := r.Scheduled
	if s == nil {
		return nil
	}
	loc := sched.Location
	if loc == nil {
		loc = time.UTC
	}
	local := now.In(loc)
	today := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	sameDay := time.Time{} // no same-day cut-off
	if m, err := clock(s.SameDayCutoff); err == nil && s.SameDayCutoff != "" {
		sameDay = today.Add(time.Duration(m) * time.Minute)
	}
	step := time.Duration(s.SlotMinutes) * time.Minute
	lead := time.Duration(s.LeadMinutes) * time.Minute
	var out []Slot
	for d := 0; d <= s.DaysAhead; d++ {
		day := today.AddDate(0, 0, d)
		for _, o := range sched.OpeningsOn(day) {
			for start := o.From; !start.Add(step).After(o.To); start = start.Add(step) {
				slot := Slot{Start: start, End: start.Add(step), Cutoff: start.Add(-lead)}
				if d == 0 && !sameDay.IsZero() && sameDay.Before(slot.Cutoff) {
					slot.Cutoff = sameDay
				}
				if now.Before(slot.Cutoff) || now.Equal(slot.Cutoff) {
					out = append(out, slot)
				}
			}
		}
	}
	return out
}

// Find is the slot starting at start among the slots open at now.
func (r Rules) Find(sched hours.Schedule, now, start time.Time) (Slot, bool) {
	for _, s := range r.Slots(sched, now) {
		if s.Start.Equal(start) {
			return s, true
		}
	}
	return Slot{}, false
}

// PickupDay is the day a pickup order is collected on, in the shop's
// time zone: its slot's, or the day it is placed.
func PickupDay(loc *time.Location, slotStart *time.Time, placed time.Time) time.Time {
	t := placed
	if slotStart != nil {
		t = *slotStart
	}
	t = t.In(loc)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// clock reads "HH:MM" as minutes after midnight.
func clock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || len(h) != 2 || len(m) != 2 || err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, fmt.Errorf("must be a time of day, HH:MM (e.g. 10:30)")
	}
	return hh*60 + mm, nil
}
