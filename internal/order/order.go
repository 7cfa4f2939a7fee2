// Package order places orders exactly once and lets users read them.
//
// Placement has two phases. Confirm prices the cart from the database,
// digests its stable content with SM3 (see Intent.Canonical), assigns the
// order id and returns a signed confirm token; it writes nothing. Submit
// takes the token with an Idempotency-Key and runs the idempotency layers
// (package idempotency) in front of one PostgreSQL transaction that
// inserts the order ON CONFLICT DO NOTHING on (user, intent digest),
// reserves stock, and stores the response, so that however often and
// wherever a submit is retried, one order exists and every retry gets the
// same answer.
package order

import (
	"strconv"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/statemachine"
)

// Order is an order as the API shows it.
type Order struct {
	ID             string              `json:"id"`
	UserID         string              `json:"user_id"`
	MerchantID     string              `json:"merchant_id"`
	Status         statemachine.Status `json:"status"`
	Items          []Item              `json:"items"`
	ItemsTotalFen  int64               `json:"items_total_fen"`
	DeliveryFeeFen int64               `json:"delivery_fee_fen"`
	TotalFen       int64               `json:"total_fen"`
	Address        Address             `json:"address"`
	Remark         string              `json:"remark"`
	Version        int64               `json:"version"`
	PayDeadline    time.Time           `json:"pay_deadline"`
	CreatedAt      time.Time           `json:"created_at"`
	UpdatedAt      time.Time           `json:"updated_at"`
}

// Item is one line of an order.
type Item struct {
	DishID       string `json:"dish_id"`
	Name         string `json:"name"`
	Qty          int32  `json:"qty"`
	UnitPriceFen int64  `json:"unit_price_fen"`
	LineTotalFen int64  `json:"line_total_fen"`
}

// Placed is the answer to a submit: the order, and whether it had been
// placed before (same token, new key).
type Placed struct {
	Order
	Duplicate bool `json:"duplicate"`
}

func itemFromRow(r dbsqlc.OrderItem) Item {
	return Item{
		DishID: strconv.FormatInt(r.DishID, 10), Name: r.Name, Qty: r.Qty,
		UnitPriceFen: r.UnitPriceFen, LineTotalFen: r.LineTotalFen,
	}
}

func orderFromRow(o dbsqlc.Order, items []dbsqlc.OrderItem, addr Address) Order {
	out := Order{
		ID:             strconv.FormatInt(o.ID, 10),
		UserID:         strconv.FormatInt(o.UserID, 10),
		MerchantID:     strconv.FormatInt(o.MerchantID, 10),
		Status:         o.Status,
		Items:          make([]Item, len(items)),
		ItemsTotalFen:  o.ItemsTotalFen,
		DeliveryFeeFen: o.DeliveryFeeFen,
		TotalFen:       o.TotalFen,
		Address:        addr,
		Remark:         o.Remark,
		Version:        o.Version,
		PayDeadline:    o.PayDeadline.UTC(),
		CreatedAt:      o.CreatedAt.UTC(),
		UpdatedAt:      o.UpdatedAt.UTC(),
	}
	for i, it := range items {
		out.Items[i] = itemFromRow(it)
	}
	return out
}
