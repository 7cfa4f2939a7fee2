// Package catalog owns merchants and their dishes: the public menu, served
// from an in-process cache that every instance invalidates over Redis
// pub/sub, and the admin API that changes them under optimistic
// concurrency (every update names the version it read).
package catalog

import (
	"strconv"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// Merchant statuses.
const (
	MerchantOpen   = "open"
	MerchantClosed = "closed"
)

// Merchant is a merchant as the API shows it.
type Merchant struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Status         string    `json:"status"`
	DeliveryFeeFen int64     `json:"delivery_fee_fen"`
	Version        int64     `json:"version"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// Dish is a dish as the API shows it. Stock is what is for sale; staff
// also see Held (reserved by open orders) and OnHand (their sum: what
// the kitchen has, the figure a restock sets).
type Dish struct {
	ID         string    `json:"id"`
	MerchantID string    `json:"merchant_id"`
	Name       string    `json:"name"`
	PriceFen   int64     `json:"price_fen"`
	Stock      int32     `json:"stock"`
	Held       *int32    `json:"held,omitempty"`
	OnHand     *int32    `json:"on_hand,omitempty"`
	OnSale     bool      `json:"on_sale"`
	Version    int64     `json:"version"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Menu is a merchant with all its dishes (those off sale included, so that
// clients can show them greyed out).
type Menu struct {
	Merchant Merchant `json:"merchant"`
	Dishes   []Dish   `json:"dishes"`
}

// MerchantList is the answer of GET /v1/merchants.
type MerchantList struct {
	Merchants []Merchant `json:"merchants"`
}

func merchantFromRow(m dbsqlc.Merchant) Merchant {
	return Merchant{
		ID:             strconv.FormatInt(m.ID, 10),
		Name:           m.Name,
		Status:         m.Status,
		DeliveryFeeFen: m.DeliveryFeeFen,
		Version:        m.Version,
		CreatedAt:      m.CreatedAt.UTC(),
		UpdatedAt:      m.UpdatedAt.UTC(),
	}
}

func dishFromRow(d dbsqlc.DishesWithStock) Dish {
	return Dish{
		ID:         strconv.FormatInt(d.ID, 10),
		MerchantID: strconv.FormatInt(d.MerchantID, 10),
		Name:       d.Name,
		PriceFen:   d.PriceFen,
		Stock:      d.Stock,
		OnSale:     d.OnSale,
		Version:    d.Version,
		CreatedAt:  d.CreatedAt.UTC(),
		UpdatedAt:  d.UpdatedAt.UTC(),
	}
}

// staffDishFromRow is a dish as its staff see it, with what is held and
// on hand.
func staffDishFromRow(d dbsqlc.DishesWithStock) Dish {
	out := dishFromRow(d)
	held, onHand := d.Held, d.Stock+d.Held
	out.Held, out.OnHand = &held, &onHand
	return out
}

func dishesFromRows(rows []dbsqlc.DishesWithStock) []Dish {
	out := make([]Dish, len(rows))
	for i, r := range rows {
		out[i] = dishFromRow(r)
	}
	return out
}
