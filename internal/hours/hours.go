// Package hours is a shop's business hours: a weekly schedule of opening
// periods in the shop's time zone, with closures on given dates. A leaf
// package: the catalog shows it on the menu, and the order capability
// holds confirm and submit to it.
package hours

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Period is one opening on a weekday, from Open to Close, in minutes
// after midnight; a Close at or before Open runs past midnight into the
// next day (a late-night shop, 18:00-02:00).
type Period struct {
	Day   time.Weekday
	Open  int
	Close int
}

// Schedule is a shop's hours. No periods means open around the clock
// (closures still apply).
type Schedule struct {
	Location *time.Location
	Weekly   []Period
	// Closed are whole dates (in Location) the shop does not open,
	// written "2006-01-02".
	Closed []string
}

// PeriodJSON is a period as the API and the database write it:
// {"day": "mon", "open": "10:00", "close": "14:00"}.
type PeriodJSON struct {
	Day   string `json:"day"`
	Open  string `json:"open"`
	Close string `json:"close"`
}

var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParsePeriods checks and converts periods; field names the request
// field for errors.
func ParsePeriods(in []PeriodJSON) ([]Period, error) {
	out := make([]Period, len(in))
	for i, p := range in {
		day := slices.Index(dayNames, p.Day)
		if day < 0 {
			return nil, fmt.Errorf("[%d].day: must be one of %s", i, strings.Join(dayNames, ", "))
		}
		open, err := parseClock(p.Open)
		if err != nil {
			return nil, fmt.Errorf("[%d].open: %w", i, err)
		}
		closing, err := parseClock(p.Close)
		if err != nil {
			return nil, fmt.Errorf("[%d].close: %w", i, err)
		}
		out[i] = Period{Day: time.Weekday(day), Open: open, Close: closing}
	}
	return out, nil
}

// FormatPeriods is the inverse of ParsePeriods.
func FormatPeriods(in []Period) []PeriodJSON {
	out := make([]PeriodJSON, len(in))
	for i, p := range in {
		out[i] = PeriodJSON{Day: dayNames[p.Day], Open: formatClock(p.Open), Close: formatClock(p.Close)}
	}
	return out
}

// parseClock reads "HH:MM" (00:00 to 24:00).
func parseClock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || len(h) != 2 || len(m) != 2 || err1 != nil || err2 != nil || hh < 0 || mm < 0 || mm > 59 || hh*60+mm > 24*60 {
		return 0, fmt.Errorf("must be a time of day, HH:MM (e.g. 09:30)")
	}
	return hh*60 + mm, nil
}

func formatClock(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

// ValidDate checks a closure date, "2006-01-02".
func ValidDate(s string) error {
	if _, err := time.Parse(time.DateOnly, s); err != nil {
		return fmt.Errorf("must be a date, YYYY-MM-DD")
	}
	return nil
}

// horizon is how far ahead NextOpen looks: past it, a shop with hours is
// taken as closed for good (every day of two weeks closed).
const horizon = 15

// State is whether a shop is open at some instant: when open, until when
// (zero for around the clock); when closed, when it next opens (zero for
// not within two weeks).
type State struct {
	Open     bool
	Until    time.Time
	NextOpen time.Time
}

// At says whether the shop is open at t.
func (s Schedule) At(t time.Time) State {
	if s.Location == nil {
		s.Location = time.UTC
	}
	t = t.In(s.Location)
	if len(s.Weekly) == 0 {
		if s.closedOn(t) {
			return State{NextOpen: s.nextAlwaysOpen(t)}
		}
		return State{Open: true, Until: s.endOfAlwaysOpen(t)}
	}
	to, open := s.cover(t)
	if !open {
		return State{NextOpen: s.next(t)}
	}
	// An opening that ends where another begins (10:00-14:00, then
	// 14:00-22:00, or one past midnight) runs on to the end of the last.
	for range 7 * horizon {
		more, ok := s.cover(to)
		if !ok {
			break
		}
		to = more
	}
	return State{Open: true, Until: to}
}

// cover returns the end of an opening that covers t, if one does: one of
// t's date, or of the day before that runs past midnight.
func (s Schedule) cover(t time.Time) (time.Time, bool) {
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, s.Location)
	for d := -1; d <= 0; d++ {
		date := day.AddDate(0, 0, d)
		if s.closedOn(date) {
			continue
		}
		for _, p := range s.Weekly {
			if p.Day == date.Weekday() {
				if from, to := s.span(date, p); !t.Before(from) && t.Before(to) {
					return to, true
				}
			}
		}
	}
	return time.Time{}, false
}

// next is the first opening after t (zero for none within the horizon).
func (s Schedule) next(t time.Time) time.Time {
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, s.Location)
	for d := range horizon {
		date := day.AddDate(0, 0, d)
		if s.closedOn(date) {
			continue
		}
		var first time.Time
		for _, p := range s.Weekly {
			if p.Day != date.Weekday() {
				continue
			}
			if from, _ := s.span(date, p); from.After(t) && (first.IsZero() || from.Before(first)) {
				first = from
			}
		}
		if !first.IsZero() {
			return first
		}
	}
	return time.Time{}
}

// span is a period on a date, as instants (DST moves the wall clock, not
// the schedule).
func (s Schedule) span(date time.Time, p Period) (time.Time, time.Time) {
	from := time.Date(date.Year(), date.Month(), date.Day(), 0, p.Open, 0, 0, date.Location())
	toDay := date
	if p.Close <= p.Open {
		toDay = date.AddDate(0, 0, 1)
	}
	to := time.Date(toDay.Year(), toDay.Month(), toDay.Day(), 0, p.Close, 0, 0, date.Location())
	return from, to
}

func (s Schedule) closedOn(t time.Time) bool {
	return slices.Contains(s.Closed, t.Format(time.DateOnly))
}

// endOfAlwaysOpen is the start of the next closure of a shop open around
// the clock (zero for none within the horizon).
func (s Schedule) endOfAlwaysOpen(t time.Time) time.Time {
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
	for d := 1; d < horizon; d++ {
		if date := day.AddDate(0, 0, d); s.closedOn(date) {
			return date
		}
	}
	return time.Time{}
}

// nextAlwaysOpen is the first midnight after t that is not closed.
func (s Schedule) nextAlwaysOpen(t time.Time) time.Time {
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
	for d := 1; d < horizon; d++ {
		if date := day.AddDate(0, 0, d); !s.closedOn(date) {
			return date
		}
	}
	return time.Time{}
}

// FromDB is a schedule as a merchant's row keeps it: its time zone name,
// weekly_hours (a JSON array of PeriodJSON) and closed_dates.
func FromDB(timeZone string, weekly []byte, closed []string) (Schedule, error) {
	loc, err := time.LoadLocation(timeZone)
	if err != nil {
		return Schedule{}, fmt.Errorf("time zone %q: %w", timeZone, err)
	}
	var periods []PeriodJSON
	if err := json.Unmarshal(weekly, &periods); err != nil {
		return Schedule{}, fmt.Errorf("weekly hours: %w", err)
	}
	p, err := ParsePeriods(periods)
	if err != nil {
		return Schedule{}, fmt.Errorf("weekly hours%w", err)
	}
	return Schedule{Location: loc, Weekly: p, Closed: closed}, nil
}

// Opening is one stretch of time the shop is open, as instants.
type Opening struct {
	From, To time.Time
}

// OpeningsOn are the openings that start on date (a day in Location; an
// opening past midnight belongs to the day it starts), in order: none on
// a closure, the whole day for a shop open around the clock.
func (s Schedule) OpeningsOn(date time.Time) []Opening {
	if s.Location == nil {
		s.Location = time.UTC
	}
	date = date.In(s.Location)
	day := time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, s.Location)
	if s.closedOn(day) {
		return nil
	}
	if len(s.Weekly) == 0 {
		return []Opening{{From: day, To: day.AddDate(0, 0, 1)}}
	}
	var out []Opening
	for _, p := range s.Weekly {
		if p.Day == day.Weekday() {
			from, to := s.span(day, p)
			out = append(out, Opening{From: from, To: to})
		}
	}
	slices.SortFunc(out, func(a, b Opening) int { return a.From.Compare(b.From) })
	return out
}
