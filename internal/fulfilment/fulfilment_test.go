package fulfilment_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/hours"
)

func TestSlots(t *testing.T) {
	t.Parallel()
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, shanghai)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	periods, err := hours.ParsePeriods([]hours.PeriodJSON{
		{Day: "mon", Open: "11:00", Close: "12:00"},
		{Day: "mon", Open: "17:00", Close: "18:10"}, // the last 10 minutes make no whole slot
		{Day: "tue", Open: "23:00", Close: "01:00"}, // past midnight: Tuesday's
		{Day: "wed", Open: "11:00", Close: "12:00"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// 2026-12-07 is a Monday; Wednesday 2026-12-09 is closed.
	week := hours.Schedule{Location: shanghai, Weekly: periods, Closed: []string{"2026-12-09"}}
	rules := func(lead, ahead int, cutoff string) fulfilment.Rules {
		return fulfilment.Rules{Delivery: true, Scheduled: &fulfilment.Scheduling{
			SlotMinutes: 30, LeadMinutes: lead, DaysAhead: ahead, Capacity: 5, SameDayCutoff: cutoff}}
	}
	tests := []struct {
		name  string
		rules fulfilment.Rules
		sched hours.Schedule
		now   string
		want  []string // slot starts, Shanghai time
	}{
		{"no scheduling: no slots", fulfilment.Default(), week, "2026-12-07 08:00", nil},
		{"today, from the morning", rules(0, 0, ""), week, "2026-12-07 08:00",
			[]string{"2026-12-07 11:00", "2026-12-07 11:30", "2026-12-07 17:00", "2026-12-07 17:30"}},
		{"a 45-minute lead closes the slots starting within it", rules(45, 0, ""), week, "2026-12-07 10:20",
			[]string{"2026-12-07 11:30", "2026-12-07 17:00", "2026-12-07 17:30"}},
		{"the cut-off itself is still open", rules(30, 0, ""), week, "2026-12-07 10:30",
			[]string{"2026-12-07 11:00", "2026-12-07 11:30", "2026-12-07 17:00", "2026-12-07 17:30"}},
		{"a same-day cut-off closes all of today", rules(0, 1, "10:00"), week, "2026-12-07 10:01",
			[]string{"2026-12-08 23:00", "2026-12-08 23:30", "2026-12-09 00:00", "2026-12-09 00:30"}},
		{"before the same-day cut-off, today is open", rules(0, 0, "10:00"), week, "2026-12-07 09:59",
			[]string{"2026-12-07 11:00", "2026-12-07 11:30", "2026-12-07 17:00", "2026-12-07 17:30"}},
		{"days ahead skip a closure", rules(0, 2, ""), week, "2026-12-07 18:00",
			[]string{"2026-12-08 23:00", "2026-12-08 23:30", "2026-12-09 00:00", "2026-12-09 00:30"}},
		{"around the clock: every slot of the day", rules(0, 0, ""), hours.Schedule{Location: shanghai}, "2026-12-07 22:40",
			[]string{"2026-12-07 23:00", "2026-12-07 23:30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, s := range tt.rules.Slots(tt.sched, at(tt.now).UTC()) {
				if s.End.Sub(s.Start) != 30*time.Minute {
					t.Errorf("slot %v lasts %v", s.Start, s.End.Sub(s.Start))
				}
				got = append(got, s.Start.In(shanghai).Format("2006-01-02 15:04"))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("slots (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("find", func(t *testing.T) {
		t.Parallel()
		r := rules(30, 0, "")
		if s, ok := r.Find(week, at("2026-12-07 10:00"), at("2026-12-07 11:30")); !ok || !s.Cutoff.Equal(at("2026-12-07 11:00")) {
			t.Errorf("Find(11:30) = %+v, %v; want the slot, cut off at 11:00", s, ok)
		}
		for _, start := range []string{"2026-12-07 11:15", "2026-12-07 12:00", "2026-12-08 11:00"} {
			if _, ok := r.Find(week, at("2026-12-07 10:00"), at(start)); ok {
				t.Errorf("Find(%s) found a slot; want none", start)
			}
		}
	})
}

func TestRulesCheck(t *testing.T) {
	t.Parallel()
	ok := fulfilment.Scheduling{SlotMinutes: 30, LeadMinutes: 30, DaysAhead: 1, Capacity: 10, PrintBeforeMinutes: 20}
	with := func(f func(*fulfilment.Scheduling)) fulfilment.Rules {
		s := ok
		f(&s)
		return fulfilment.Rules{Pickup: true, Scheduled: &s}
	}
	tests := []struct {
		name  string
		rules fulfilment.Rules
		field string // "" for valid
	}{
		{"delivery only", fulfilment.Default(), ""},
		{"both, scheduled", fulfilment.Rules{Delivery: true, Pickup: true, Scheduled: &ok}, ""},
		{"neither", fulfilment.Rules{}, "delivery"},
		{"slot too short", with(func(s *fulfilment.Scheduling) { s.SlotMinutes = 5 }), "scheduled.slot_minutes"},
		{"negative lead", with(func(s *fulfilment.Scheduling) { s.LeadMinutes = -1 }), "scheduled.lead_minutes"},
		{"too far ahead", with(func(s *fulfilment.Scheduling) { s.DaysAhead = 8 }), "scheduled.days_ahead"},
		{"no capacity", with(func(s *fulfilment.Scheduling) { s.Capacity = 0 }), "scheduled.capacity"},
		{"bad cut-off", with(func(s *fulfilment.Scheduling) { s.SameDayCutoff = "24:00" }), "scheduled.same_day_cutoff"},
		{"good cut-off", with(func(s *fulfilment.Scheduling) { s.SameDayCutoff = "10:30" }), ""},
		{"print too early", with(func(s *fulfilment.Scheduling) { s.PrintBeforeMinutes = 2000 }), "scheduled.print_before_minutes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			field, err := tt.rules.Check()
			if field != tt.field || (err == nil) != (tt.field == "") {
				t.Errorf("Check() = %q, %v; want field %q", field, err, tt.field)
			}
		})
	}
}

func TestPickupDay(t *testing.T) {
	t.Parallel()
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	placed := time.Date(2026, 12, 6, 17, 30, 0, 0, time.UTC) // 01:30 on the 7th in Shanghai
	if got := fulfilment.PickupDay(shanghai, nil, placed).Format(time.DateOnly); got != "2026-12-07" {
		t.Errorf("PickupDay(now) = %s, want 2026-12-07 (Shanghai's date)", got)
	}
	slot := time.Date(2026, 12, 8, 3, 0, 0, 0, time.UTC)
	if got := fulfilment.PickupDay(shanghai, &slot, placed).Format(time.DateOnly); got != "2026-12-08" {
		t.Errorf("PickupDay(slot) = %s, want the slot's day 2026-12-08", got)
	}
}
