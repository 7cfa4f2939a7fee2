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
	"encoding/json"
	"strconv"
	"time"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/statemachine"
)

// Order is an order as the API shows it.
type Order struct {
	ID              string              `json:"id"`
	UserID          string              `json:"user_id"`
	MerchantID      string              `json:"merchant_id"`
	Status          statemachine.Status `json:"status"`
	Items           []Item              `json:"items"`
	ItemsTotalFen   int64               `json:"items_total_fen"`
	PackagingFeeFen int64               `json:"packaging_fee_fen"`
	DeliveryFeeFen  int64               `json:"delivery_fee_fen"`
	// VoucherID is the voucher spent on the order (null: none) and
	// DiscountFen what it and the promotions took off the dishes;
	// PlatformDiscountFen and MerchantDiscountFen are who pays for it,
	// for the settlement.
	VoucherID           *string `json:"voucher_id"`
	DiscountFen         int64   `json:"discount_fen"`
	PlatformDiscountFen int64   `json:"platform_discount_fen"`
	MerchantDiscountFen int64   `json:"merchant_discount_fen"`
	// Promotions are the merchant's promotions the order got.
	Promotions []OrderPromotion `json:"promotions"`
	// TotalFen is what the customer pays: dishes, packaging and delivery,
	// less the discount.
	TotalFen    int64     `json:"total_fen"`
	Address     Address   `json:"address"`
	Remark      string    `json:"remark"`
	Version     int64     `json:"version"`
	PayDeadline time.Time `json:"pay_deadline"`
	// AcceptDeadline is when the merchant must accept the paid order by,
	// and what happens then; null when the order has no deadline (its
	// merchant sets none, or it was never paid).
	AcceptDeadline *AcceptDeadline `json:"accept_deadline"`
	// Fulfilment is "delivery" or "pickup". Pickup is a pickup order's
	// number, and Slot a scheduled order's time slot (null: as soon as
	// possible).
	Fulfilment string        `json:"fulfilment"`
	Pickup     *PickupNumber `json:"pickup"`
	Slot       *Slot         `json:"slot"`
	CreatedAt  time.Time     `json:"created_at"`
	UpdatedAt  time.Time     `json:"updated_at"`
}

// PickupNumber is what a customer says at the counter: one of the
// merchant's numbers of the day (in its time zone) the order is
// collected on.
type PickupNumber struct {
	Number int32  `json:"number"`
	Day    string `json:"day"`
}

// Slot is the time slot a scheduled order is fulfilled in.
type Slot struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// AcceptDeadline is a paid order's accept deadline, fixed from its
// merchant's rule when it was paid.
type AcceptDeadline struct {
	AcceptBy time.Time `json:"accept_by"`
	// Then is what happens to the order if it is still waiting at
	// AcceptBy: "accept" or "reject" (with a full refund).
	Then string `json:"then"`
	// Applied is true once the system, not the merchant, moved the order
	// on at its deadline.
	Applied bool `json:"applied"`
}

// The outcomes of an accept deadline (AcceptDeadline.Then).
const (
	AcceptThenAccept = "accept"
	AcceptThenReject = "reject"
)

// Item is one line of an order: a dish with its chosen options, as sold
// (names and prices at confirm). The unit price includes the options'
// deltas; the packaging fee is per unit, outside the line total.
type Item struct {
	// Line numbers the order's lines from 0, for partial refunds.
	Line            int16        `json:"line"`
	DishID          string       `json:"dish_id"`
	Name            string       `json:"name"`
	Options         []ItemOption `json:"options"`
	Qty             int32        `json:"qty"`
	UnitPriceFen    int64        `json:"unit_price_fen"`
	LineTotalFen    int64        `json:"line_total_fen"`
	PackagingFeeFen int64        `json:"packaging_fee_fen"`
	// DiscountFen is the line's share of the order's discount: the line
	// was sold for LineTotalFen less this.
	DiscountFen int64 `json:"discount_fen"`
	// RefundedQty are the units given back by partial refunds.
	RefundedQty int32 `json:"refunded_qty"`
}

// ItemOption is a chosen option choice of a line, as sold.
type ItemOption struct {
	ChoiceID      string `json:"choice_id"`
	Group         string `json:"group"`
	Name          string `json:"name"`
	PriceDeltaFen int64  `json:"price_delta_fen"`
}

// Placed is the answer to a submit: the order, and whether it had been
// placed before (same token, new key).
type Placed struct {
	Order
	Duplicate bool `json:"duplicate"`
}

func itemFromRow(r dbsqlc.OrderItem) Item {
	it := Item{
		Line: r.Line, DishID: strconv.FormatInt(r.DishID, 10), Name: r.Name, Options: []ItemOption{}, Qty: r.Qty,
		UnitPriceFen: r.UnitPriceFen, LineTotalFen: r.LineTotalFen, PackagingFeeFen: r.PackagingFeeFen, DiscountFen: r.DiscountFen,
		RefundedQty: r.RefundedQty,
	}
	// Written by this package (itemOptionsJSON); an unreadable value would
	// show as no options rather than fail the read of the order.
	_ = json.Unmarshal(r.Options, &it.Options)
	return it
}

// itemOptionsJSON is a line's options as order_items.options keeps them.
func itemOptionsJSON(opts []TokenOption) []byte {
	b, _ := json.Marshal(itemOptions(opts)) // strings and integers: cannot fail
	return b
}

func orderFromRow(o dbsqlc.Order, items []dbsqlc.OrderItem, addr Address) Order {
	out := Order{
		ID:              strconv.FormatInt(o.ID, 10),
		UserID:          strconv.FormatInt(o.UserID, 10),
		MerchantID:      strconv.FormatInt(o.MerchantID, 10),
		Status:          o.Status,
		Items:           make([]Item, len(items)),
		ItemsTotalFen:   o.ItemsTotalFen,
		PackagingFeeFen: o.PackagingFeeFen,
		DeliveryFeeFen:  o.DeliveryFeeFen,
		DiscountFen:     o.DiscountFen,
		TotalFen:        o.TotalFen,
		Address:         addr,
		Remark:          o.Remark,
		Version:         o.Version,
		PayDeadline:     o.PayDeadline.UTC(),
		CreatedAt:       o.CreatedAt.UTC(),
		UpdatedAt:       o.UpdatedAt.UTC(),
	}
	if o.VoucherID != nil {
		id := strconv.FormatInt(*o.VoucherID, 10)
		out.VoucherID = &id
	}
	out.PlatformDiscountFen, out.MerchantDiscountFen = o.PlatformDiscountFen, o.MerchantDiscountFen
	// Written by this package (Token.promotionsJSON); an unreadable value
	// would show as none rather than fail the read of the order.
	if err := json.Unmarshal(o.Promotions, &out.Promotions); err != nil || out.Promotions == nil {
		out.Promotions = []OrderPromotion{}
	}
	if o.AcceptBy != nil && o.AcceptThen != nil {
		out.AcceptDeadline = &AcceptDeadline{AcceptBy: o.AcceptBy.UTC(), Then: *o.AcceptThen, Applied: o.AcceptDeadlineApplied}
	}
	out.Fulfilment = o.Fulfilment
	if o.PickupNo != nil && o.PickupDay.Valid {
		out.Pickup = &PickupNumber{Number: *o.PickupNo, Day: o.PickupDay.Time.Format(time.DateOnly)}
	}
	if o.SlotStart != nil && o.SlotEnd != nil {
		out.Slot = &Slot{Start: o.SlotStart.UTC(), End: o.SlotEnd.UTC()}
	}
	for i, it := range items {
		out.Items[i] = itemFromRow(it)
	}
	return out
}
