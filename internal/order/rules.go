package order

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/delivery"
	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/hours"
	"github.com/takeout/takeout/internal/problem"
)

// merchantRules is the merchant side of a quote: whether it takes orders
// now, what delivery to an address costs, and the least it sells.
type merchantRules struct {
	open         bool // its closed flag is off
	flatFeeFen   int64
	minOrderFen  int64
	lat, lng     *float64
	bands        []delivery.Band
	schedule     hours.Schedule
	quoteVersion int64
	ways         fulfilment.Rules
}

func rulesFromRow(r dbsqlc.QuoteCartRow) (merchantRules, error) {
	m := merchantRules{open: r.MerchantStatus == "open", flatFeeFen: r.DeliveryFeeFen, minOrderFen: r.MinOrderFen,
		lat: r.Latitude, lng: r.Longitude, quoteVersion: r.QuoteVersion}
	if err := json.Unmarshal(r.DeliveryBands, &m.bands); err != nil {
		return merchantRules{}, fmt.Errorf("merchant delivery bands: %w", err)
	}
	var err error
	if m.schedule, err = hours.FromDB(r.TimeZone, r.WeeklyHours, r.ClosedDates); err != nil {
		return merchantRules{}, fmt.Errorf("merchant hours: %w", err)
	}
	if m.ways, err = fulfilment.FromDB(r.Fulfilment); err != nil {
		return merchantRules{}, err
	}
	return m, nil
}

// fulfils checks that the merchant fulfils orders the way asked, and in
// the slot asked (nil: as soon as possible, while it takes orders now):
// one of its slots open for orders at now. It returns the slot, and the
// end of the opening an order for now was quoted in (zero: none in sight).
func (m merchantRules) fulfils(way string, start *time.Time, now time.Time) (*fulfilment.Slot, time.Time, error) {
	if !m.ways.Offers(way) {
		offered := []string{}
		for _, w := range []string{fulfilment.Delivery, fulfilment.Pickup} {
			if m.ways.Offers(w) {
				offered = append(offered, w)
			}
		}
		return nil, time.Time{}, problem.New(problem.FulfilmentUnavailable, "the merchant does not offer %s; it offers %v", way, offered).
			With("offered", offered)
	}
	if start == nil {
		until, err := m.takingOrders(now)
		return nil, until, err
	}
	if !m.open {
		return nil, time.Time{}, ErrMerchantClosed
	}
	if m.ways.Scheduled == nil {
		return nil, time.Time{}, problem.New(problem.SlotUnavailable, "the merchant takes no orders for later: leave slot_start out")
	}
	slot, ok := m.ways.Find(m.schedule, now, *start)
	if !ok {
		return nil, time.Time{}, problem.New(problem.SlotUnavailable,
			"%s is not one of the merchant's slots open for orders now: choose one of GET /v1/merchants/{id}/slots", start.Format(time.RFC3339)).
			With("slot_start", start.Format(time.RFC3339))
	}
	return &slot, time.Time{}, nil
}

// takingOrders says whether the merchant takes orders at now, and until
// when (zero: no end in sight); the manual closed flag wins over hours.
func (m merchantRules) takingOrders(now time.Time) (time.Time, error) {
	if !m.open {
		return time.Time{}, ErrMerchantClosed
	}
	st := m.schedule.At(now)
	if !st.Open {
		return time.Time{}, closedUntil(st.NextOpen)
	}
	return st.Until, nil
}

// closedUntil is the merchant-closed problem outside hours, naming the
// next opening (none within two weeks: the member is left out).
func closedUntil(next time.Time) error {
	if next.IsZero() {
		return problem.New(problem.MerchantClosed, "the merchant is closed, and not open within two weeks")
	}
	return problem.New(problem.MerchantClosed, "the merchant is closed; it opens at %s", next.Format(time.RFC3339)).
		With("next_open_at", next.UTC().Format(time.RFC3339))
}

// deliveryFee prices delivery to addr: the flat fee, or by distance when
// the merchant has bands.
func (m merchantRules) deliveryFee(addr Address) (int64, error) {
	if len(m.bands) == 0 {
		return m.flatFeeFen, nil
	}
	if addr.Location == nil {
		return 0, problem.Field("address.location", "required: this merchant prices delivery by distance; send the location picker's lat and lng")
	}
	d := delivery.Distance(*m.lat, *m.lng, addr.Location.Lat, addr.Location.Lng)
	fee, ok := delivery.Fee(m.bands, d)
	if !ok {
		last := m.bands[len(m.bands)-1].UpToM
		return 0, problem.New(problem.OutOfRange, "the address is %.0f m from the merchant, which delivers up to %d m", math.Ceil(d), last).
			With("distance_m", int64(math.Ceil(d))).With("max_distance_m", last)
	}
	return fee, nil
}

// checkMinimum refuses a cart whose items and packaging are below the
// merchant's minimum order, naming the shortfall.
func (m merchantRules) checkMinimum(in Intent) error {
	if got := in.ItemsTotalFen + in.PackagingFeeFen; got < m.minOrderFen {
		return problem.New(problem.BelowMinimum, "the merchant's minimum order is %d fen: add %d fen more", m.minOrderFen, m.minOrderFen-got).
			With("min_order_fen", m.minOrderFen).With("shortfall_fen", m.minOrderFen-got)
	}
	return nil
}
