package catalog

import (
	"unicode/utf8"

	"github.com/takeout/takeout/internal/problem"
)

// Limits shared by the schema's CHECK constraints and request validation.
const (
	maxNameRunes = 100
	maxPriceFen  = 100_000_000 // one million yuan
	maxStock     = 1_000_000
)

// CreateMerchantRequest is the body of POST /admin/v1/merchants.
type CreateMerchantRequest struct {
	Name           string  `json:"name"`
	Status         *string `json:"status"`
	DeliveryFeeFen *int64  `json:"delivery_fee_fen"`
}

// Validate checks the request's values.
func (r *CreateMerchantRequest) Validate() error {
	if err := validName(r.Name, true); err != nil {
		return err
	}
	return validMerchantFields(r.Status, r.DeliveryFeeFen)
}

// UpdateMerchantRequest is the body of PATCH /admin/v1/merchants/{id}:
// the version read and the fields to change.
type UpdateMerchantRequest struct {
	Version        *int64  `json:"version"`
	Name           *string `json:"name"`
	Status         *string `json:"status"`
	DeliveryFeeFen *int64  `json:"delivery_fee_fen"`
}

// Validate checks the request's values.
func (r *UpdateMerchantRequest) Validate() error {
	if err := validVersion(r.Version); err != nil {
		return err
	}
	if r.Name != nil {
		if err := validName(*r.Name, true); err != nil {
			return err
		}
	}
	if r.Name == nil && r.Status == nil && r.DeliveryFeeFen == nil {
		return problem.New(problem.InvalidRequest, "nothing to change: send name, status or delivery_fee_fen")
	}
	return validMerchantFields(r.Status, r.DeliveryFeeFen)
}

// CreateDishRequest is the body of POST /admin/v1/merchants/{id}/dishes.
type CreateDishRequest struct {
	Name     string `json:"name"`
	PriceFen *int64 `json:"price_fen"`
	Stock    *int32 `json:"stock"`
	OnSale   *bool  `json:"on_sale"`
}

// Validate checks the request's values.
func (r *CreateDishRequest) Validate() error {
	if err := validName(r.Name, true); err != nil {
		return err
	}
	if r.PriceFen == nil {
		return problem.Field("price_fen", "required")
	}
	if err := validPrice(*r.PriceFen); err != nil {
		return err
	}
	if r.Stock == nil {
		return problem.Field("stock", "required")
	}
	return validStock("stock", *r.Stock)
}

// UpdateDishRequest is the body of PATCH /admin/v1/dishes/{id}.
type UpdateDishRequest struct {
	Version  *int64  `json:"version"`
	Name     *string `json:"name"`
	PriceFen *int64  `json:"price_fen"`
	OnSale   *bool   `json:"on_sale"`
}

// Validate checks the request's values.
func (r *UpdateDishRequest) Validate() error {
	if err := validVersion(r.Version); err != nil {
		return err
	}
	if r.Name == nil && r.PriceFen == nil && r.OnSale == nil {
		return problem.New(problem.InvalidRequest, "nothing to change: send name, price_fen or on_sale")
	}
	if r.Name != nil {
		if err := validName(*r.Name, true); err != nil {
			return err
		}
	}
	if r.PriceFen != nil {
		return validPrice(*r.PriceFen)
	}
	return nil
}

// SetStockRequest is the body of PUT /admin/v1/dishes/{id}/stock: what
// the kitchen has on hand (units held by open orders count in it), and,
// optionally, the figure the merchant read, so that a count made before
// sales, cancels or another restock is refused (409 stock-changed).
type SetStockRequest struct {
	OnHand   *int32 `json:"on_hand"`
	IfOnHand *int32 `json:"if_on_hand"`
}

// Validate checks the request's values.
func (r *SetStockRequest) Validate() error {
	if r.OnHand == nil {
		return problem.Field("on_hand", "required: the units on hand, held ones included")
	}
	if err := validStock("on_hand", *r.OnHand); err != nil {
		return err
	}
	if r.IfOnHand != nil {
		return validStock("if_on_hand", *r.IfOnHand)
	}
	return nil
}

// AdjustStockRequest is the body of POST /admin/v1/dishes/{id}/stock/adjustments:
// units added to what is on hand (a delivery), or removed when negative
// (spoilage).
type AdjustStockRequest struct {
	Delta *int32 `json:"delta"`
}

// Validate checks the request's values.
func (r *AdjustStockRequest) Validate() error {
	switch {
	case r.Delta == nil:
		return problem.Field("delta", "required")
	case *r.Delta == 0:
		return problem.Field("delta", "must not be 0")
	case *r.Delta < -maxStock || *r.Delta > maxStock:
		return problem.Field("delta", "must be between %d and %d", -maxStock, maxStock)
	}
	return nil
}

func validName(name string, required bool) error {
	n := utf8.RuneCountInString(name)
	switch {
	case n == 0 && required:
		return problem.Field("name", "required")
	case n > maxNameRunes:
		return problem.Field("name", "at most %d characters", maxNameRunes)
	case !utf8.ValidString(name):
		return problem.Field("name", "must be valid UTF-8")
	}
	return nil
}

func validMerchantFields(status *string, fee *int64) error {
	if status != nil && *status != MerchantOpen && *status != MerchantClosed {
		return problem.Field("status", "must be %q or %q", MerchantOpen, MerchantClosed)
	}
	if fee != nil && (*fee < 0 || *fee > maxPriceFen) {
		return problem.Field("delivery_fee_fen", "must be between 0 and %d", maxPriceFen)
	}
	return nil
}

func validVersion(v *int64) error {
	if v == nil {
		return problem.Field("version", "required: the version you read, so that concurrent changes are not lost")
	}
	if *v < 1 {
		return problem.Field("version", "must be at least 1")
	}
	return nil
}

func validPrice(p int64) error {
	if p < 1 || p > maxPriceFen {
		return problem.Field("price_fen", "must be between 1 and %d (fen)", maxPriceFen)
	}
	return nil
}

func validStock(field string, s int32) error {
	if s < 0 || s > maxStock {
		return problem.Field(field, "must be between 0 and %d", maxStock)
	}
	return nil
}
