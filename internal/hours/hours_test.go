package hours_test

import (
	"testing"
	"time"

	"github.com/takeout/takeout/internal/hours"
)

func TestScheduleAt(t *testing.T) {
	t.Parallel()
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	periods, err := hours.ParsePeriods([]hours.PeriodJSON{
		{Day: "mon", Open: "10:00", Close: "14:00"},
		{Day: "mon", Open: "14:00", Close: "21:00"}, // back to back: one opening
		{Day: "fri", Open: "18:00", Close: "02:00"}, // past midnight
		{Day: "sat", Open: "11:00", Close: "13:00"},
	})
	if err != nil {
		t.Fatal(err)
	}
	week := hours.Schedule{Location: shanghai, Weekly: periods, Closed: []string{"2026-12-14"}}
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, shanghai)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// 2026-12-07 is a Monday, 2026-12-11 a Friday, 2026-12-14 a closed Monday.
	tests := []struct {
		name     string
		schedule hours.Schedule
		now      string
		open     bool
		until    string // when open; "" for around the clock
		next     string // when closed; "" for none
	}{
		{"before the first opening", week, "2026-12-07 09:59", false, "", "2026-12-07 10:00"},
		{"at the opening", week, "2026-12-07 10:00", true, "2026-12-07 21:00", ""},
		{"back-to-back periods run on", week, "2026-12-07 13:30", true, "2026-12-07 21:00", ""},
		{"at the close", week, "2026-12-07 21:00", false, "", "2026-12-11 18:00"},
		{"past midnight, Saturday 01:00", week, "2026-12-12 01:00", true, "2026-12-12 02:00", ""},
		{"after the night, Saturday 02:00", week, "2026-12-12 02:00", false, "", "2026-12-12 11:00"},
		{"a closed Monday", week, "2026-12-14 11:00", false, "", "2026-12-18 18:00"},
		{"Sunday, the Monday after is closed", week, "2026-12-13 12:00", false, "", "2026-12-18 18:00"},
		{"in UTC, Monday 02:30Z is 10:30 in Shanghai", week, "2026-12-07 10:30", true, "2026-12-07 21:00", ""},
		{"no hours: open around the clock", hours.Schedule{Location: shanghai}, "2026-12-07 03:00", true, "", ""},
		{"no hours, a closure tomorrow", hours.Schedule{Location: shanghai, Closed: []string{"2026-12-08"}}, "2026-12-07 03:00", true, "2026-12-08 00:00", ""},
		{"no hours, closed today", hours.Schedule{Location: shanghai, Closed: []string{"2026-12-07"}}, "2026-12-07 03:00", false, "", "2026-12-08 00:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.schedule.At(at(tt.now).UTC())
			var until, next time.Time
			if tt.until != "" {
				until = at(tt.until)
			}
			if tt.next != "" {
				next = at(tt.next)
			}
			if got.Open != tt.open || !got.Until.Equal(until) || !got.NextOpen.Equal(next) {
				t.Errorf("At(%s) = open %v until %v next %v; want open %v until %v next %v",
					tt.now, got.Open, got.Until, got.NextOpen, tt.open, until, next)
			}
		})
	}
}

func TestParsePeriodsRefuses(t *testing.T) {
	t.Parallel()
	for _, p := range []hours.PeriodJSON{
		{Day: "monday", Open: "10:00", Close: "14:00"},
		{Day: "mon", Open: "10", Close: "14:00"},
		{Day: "mon", Open: "10:60", Close: "14:00"},
		{Day: "mon", Open: "10:00", Close: "24:01"},
		{Day: "mon", Open: "-1:00", Close: "14:00"},
	} {
		if _, err := hours.ParsePeriods([]hours.PeriodJSON{p}); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	got, err := hours.ParsePeriods([]hours.PeriodJSON{{Day: "sun", Open: "00:00", Close: "24:00"}})
	if err != nil || hours.FormatPeriods(got)[0] != (hours.PeriodJSON{Day: "sun", Open: "00:00", Close: "24:00"}) {
		t.Errorf("round trip of a whole Sunday: %v %v", got, err)
	}
}
