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
	return validStock(*r.Stock)
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

// SetStockRequest is the body of PUT /admin/v1/dishes/{id}/stock: the
// absolute stock, guarded by the version read, so that a stale restock
// cannot overwrite sales made since.
type SetStockRequest struct {
	Version *int64 `json:"version"`
	Stock   *int32 `json:"stock"`
}

// Validate checks the request's values.
func (r *SetStockRequest) Validate() error {
	if err := validVersion(r.Version); err != nil {
		return err
	}
	if r.Stock == nil {
		return problem.Field("stock", "required")
	}
	return validStock(*r.Stock)
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

func validStock(s int32) error {
	if s < 0 || s > maxStock {
		return problem.Field("stock", "must be between 0 and %d", maxStock)
	}
	return nil
}
