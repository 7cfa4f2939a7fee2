package catalog

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/hours"
	"github.com/takeout/takeout/internal/web"
)

// SlotOffer is a time slot a customer can order for: its stretch, until
// when it takes orders, and how many more it takes (0: fully booked).
type SlotOffer struct {
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	OrderBy   time.Time `json:"order_by"`
	Remaining int       `json:"remaining"`
}

// SlotList is the answer of GET /v1/merchants/{id}/slots.
type SlotList struct {
	MerchantID string      `json:"merchant_id"`
	TimeZone   string      `json:"time_zone"`
	Slots      []SlotOffer `json:"slots"`
}

// Slots lists the merchant's slots open for orders now (none when it
// takes no orders for later, or its closed flag is on), each with what
// its capacity has left. It is read, not cached: what a slot has left
// changes with every order for it.
func (s *Service) Slots(ctx context.Context, merchantID int64) (SlotList, error) {
	m, err := s.q.MerchantGetByID(ctx, s.pool, merchantID)
	if err != nil {
		return SlotList{}, notFoundOr(err, ErrMerchantNotFound)
	}
	out := SlotList{MerchantID: strconv.FormatInt(m.ID, 10), TimeZone: m.TimeZone, Slots: []SlotOffer{}}
	rules, err := fulfilment.FromDB(m.Fulfilment)
	if err != nil || rules.Scheduled == nil || m.Status != MerchantOpen {
		return out, err
	}
	sched, err := hours.FromDB(m.TimeZone, m.WeeklyHours, m.ClosedDates)
	if err != nil {
		return SlotList{}, fmt.Errorf("merchant hours: %w", err)
	}
	now := s.now()
	slots := rules.Slots(sched, now)
	if len(slots) == 0 {
		return out, nil
	}
	booked, err := s.q.SlotBookings(ctx, s.pool, dbsqlc.SlotBookingsParams{MerchantID: m.ID, Since: slots[0].Start})
	if err != nil {
		return SlotList{}, fmt.Errorf("read slot bookings: %w", err)
	}
	taken := make(map[int64]int, len(booked))
	for _, b := range booked {
		taken[b.SlotStart.Unix()] = int(b.Taken)
	}
	for _, sl := range slots {
		left := max(rules.Scheduled.Capacity-taken[sl.Start.Unix()], 0)
		out.Slots = append(out.Slots, SlotOffer{Start: sl.Start.UTC(), End: sl.End.UTC(), OrderBy: sl.Cutoff.UTC(), Remaining: left})
	}
	return out, nil
}

// HandleSlots serves GET /v1/merchants/{id}/slots.
func HandleSlots(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, ErrMerchantNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		list, err := s.Slots(r.Context(), id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, list)
	})
}
