// Package catalog owns merchants and their dishes: the public menu, served
// from an in-process cache that every instance invalidates over Redis
// pub/sub, and the admin API that changes them under optimistic
// concurrency (every update names the version it read).
package catalog

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/delivery"
	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/hours"
	"github.com/takeout/takeout/internal/promotion"
)

// Merchant statuses.
const (
	MerchantOpen   = "open"
	MerchantClosed = "closed"
)

// Merchant is a merchant as the API shows it: its closed flag (status),
// its money rules (a flat delivery fee, or distance bands from its
// location; a minimum order of items and packaging) and its hours in its
// time zone (none: around the clock), with closures on given dates.
type Merchant struct {
	ID             string             `json:"id"`
	Name           string             `json:"name"`
	Status         string             `json:"status"`
	DeliveryFeeFen int64              `json:"delivery_fee_fen"`
	MinOrderFen    int64              `json:"min_order_fen"`
	Location       *Location          `json:"location"`
	DeliveryBands  []delivery.Band    `json:"delivery_bands"`
	TimeZone       string             `json:"time_zone"`
	Hours          []hours.PeriodJSON `json:"hours"`
	ClosedDates    []string           `json:"closed_dates"`
	// AcceptWithinSeconds is how long the kitchen has to accept a paid
	// order (0: no deadline), and AcceptTimeoutAction what happens to
	// one still waiting then: "accept" or "reject" (with a full refund).
	AcceptWithinSeconds int32  `json:"accept_within_seconds"`
	AcceptTimeoutAction string `json:"accept_timeout_action"`
	// Fulfilment is how the merchant's orders reach their customers:
	// delivery, pickup or both, and its time slots for later.
	Fulfilment fulfilment.Rules `json:"fulfilment"`
	Version    int64            `json:"version"`
	CreatedAt  time.Time        `json:"created_at"`
	UpdatedAt  time.Time        `json:"updated_at"`
}

// Location is a point in degrees.
type Location struct {
	Lat float64 `json:"lat"`
	Lng float64 `json:"lng"`
}

// Dish is a dish as the API shows it. Stock is what is for sale; staff
// also see Held (reserved by open orders) and OnHand (their sum: what
// the kitchen has, the figure a restock sets). Its price is per unit
// before options; the packaging fee is per unit too.
type Dish struct {
	ID              string        `json:"id"`
	MerchantID      string        `json:"merchant_id"`
	CategoryID      *string       `json:"category_id"`
	Name            string        `json:"name"`
	Position        int32         `json:"position"`
	ImageURL        *string       `json:"image_url"`
	PriceFen        int64         `json:"price_fen"`
	PackagingFeeFen int64         `json:"packaging_fee_fen"`
	Options         []OptionGroup `json:"options"`
	Stock           int32         `json:"stock"`
	Held            *int32        `json:"held,omitempty"`
	OnHand          *int32        `json:"on_hand,omitempty"`
	OnSale          bool          `json:"on_sale"`
	Version         int64         `json:"version"`
	CreatedAt       time.Time     `json:"created_at"`
	UpdatedAt       time.Time     `json:"updated_at"`
}

// Category is a section of a merchant's menu; dishes name theirs, and
// both are shown by position, then id.
type Category struct {
	ID         string    `json:"id"`
	MerchantID string    `json:"merchant_id"`
	Name       string    `json:"name"`
	Position   int32     `json:"position"`
	Version    int64     `json:"version"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// OptionGroup is a choice a customer makes for a dish (size, spice,
// extras): between MinChoices and MaxChoices of its choices; Required
// when MinChoices > 0.
type OptionGroup struct {
	ID         string         `json:"id"`
	Name       string         `json:"name"`
	MinChoices int32          `json:"min_choices"`
	MaxChoices int32          `json:"max_choices"`
	Required   bool           `json:"required"`
	Choices    []OptionChoice `json:"choices"`
}

// OptionChoice is one choice of a group: it adds PriceDeltaFen to the
// dish's unit price, and can be switched off (Available false) when the
// kitchen runs out of it.
type OptionChoice struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	PriceDeltaFen int64  `json:"price_delta_fen"`
	Available     bool   `json:"available"`
}

// Menu is a merchant with its categories and all its dishes (those off
// sale included, so that clients can show them greyed out). OpenNow and
// NextOpenAt are of the moment of the request.
type Menu struct {
	OpenNow    bool       `json:"open_now"`
	NextOpenAt *time.Time `json:"next_open_at"`
	Merchant   Merchant   `json:"merchant"`
	Categories []Category `json:"categories"`
	Dishes     []Dish     `json:"dishes"`
	// Promotions are the merchant's promotions that are on: confirm says
	// which a cart gets.
	Promotions []promotion.Promotion `json:"promotions"`
}

// MerchantList is the answer of GET /v1/merchants.
type MerchantList struct {
	Merchants []Merchant `json:"merchants"`
}

func merchantFromRow(m dbsqlc.Merchant) Merchant {
	out := Merchant{
		ID:                  strconv.FormatInt(m.ID, 10),
		Name:                m.Name,
		Status:              m.Status,
		DeliveryFeeFen:      m.DeliveryFeeFen,
		MinOrderFen:         m.MinOrderFen,
		DeliveryBands:       []delivery.Band{},
		TimeZone:            m.TimeZone,
		Hours:               []hours.PeriodJSON{},
		ClosedDates:         append([]string{}, m.ClosedDates...),
		AcceptWithinSeconds: m.AcceptWithinSeconds,
		AcceptTimeoutAction: m.AcceptTimeoutAction,
		Version:             m.Version,
		CreatedAt:           m.CreatedAt.UTC(),
		UpdatedAt:           m.UpdatedAt.UTC(),
	}
	if m.Latitude != nil && m.Longitude != nil {
		out.Location = &Location{Lat: *m.Latitude, Lng: *m.Longitude}
	}
	// Written by this package, validated: an unreadable value shows empty.
	_ = json.Unmarshal(m.DeliveryBands, &out.DeliveryBands)
	_ = json.Unmarshal(m.WeeklyHours, &out.Hours)
	if r, err := fulfilment.FromDB(m.Fulfilment); err == nil {
		out.Fulfilment = r
	} else {
		out.Fulfilment = fulfilment.Default()
	}
	return out
}

func dishFromRow(d dbsqlc.DishesWithStock) Dish {
	out := Dish{
		ID:              strconv.FormatInt(d.ID, 10),
		MerchantID:      strconv.FormatInt(d.MerchantID, 10),
		Name:            d.Name,
		Position:        d.Position,
		ImageURL:        d.ImageUrl,
		PriceFen:        d.PriceFen,
		PackagingFeeFen: d.PackagingFeeFen,
		Options:         []OptionGroup{},
		Stock:           d.Stock,
		OnSale:          d.OnSale,
		Version:         d.Version,
		CreatedAt:       d.CreatedAt.UTC(),
		UpdatedAt:       d.UpdatedAt.UTC(),
	}
	if d.CategoryID != nil {
		c := strconv.FormatInt(*d.CategoryID, 10)
		out.CategoryID = &c
	}
	return out
}

// staffDishFromRow is a dish as its staff see it, with what is held and
// on hand.
func staffDishFromRow(d dbsqlc.DishesWithStock) Dish {
	out := dishFromRow(d)
	held, onHand := d.Held, d.Stock+d.Held
	out.Held, out.OnHand = &held, &onHand
	return out
}

func categoryFromRow(c dbsqlc.Category) Category {
	return Category{
		ID:         strconv.FormatInt(c.ID, 10),
		MerchantID: strconv.FormatInt(c.MerchantID, 10),
		Name:       c.Name,
		Position:   c.Position,
		Version:    c.Version,
		CreatedAt:  c.CreatedAt.UTC(),
		UpdatedAt:  c.UpdatedAt.UTC(),
	}
}

// withOptions sets each dish's option groups from rows (in menu order,
// one row per choice).
func withOptions(dishes []Dish, rows []dbsqlc.OptionsByMerchantRow) {
	byDish := map[string][]OptionGroup{}
	for _, r := range rows {
		dish := strconv.FormatInt(r.DishID, 10)
		groups := byDish[dish]
		gid := strconv.FormatInt(r.GroupID, 10)
		if len(groups) == 0 || groups[len(groups)-1].ID != gid {
			groups = append(groups, OptionGroup{ID: gid, Name: r.GroupName, MinChoices: r.MinChoices, MaxChoices: r.MaxChoices,
				Required: r.MinChoices > 0, Choices: []OptionChoice{}})
		}
		g := &groups[len(groups)-1]
		g.Choices = append(g.Choices, OptionChoice{ID: strconv.FormatInt(r.ChoiceID, 10), Name: r.ChoiceName,
			PriceDeltaFen: r.PriceDeltaFen, Available: r.Available})
		byDish[dish] = groups
	}
	for i := range dishes {
		if g, ok := byDish[dishes[i].ID]; ok {
			dishes[i].Options = g
		}
	}
}
