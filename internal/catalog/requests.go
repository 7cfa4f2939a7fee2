package catalog

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/takeout/takeout/internal/delivery"
	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/hours"

	"github.com/takeout/takeout/internal/problem"
)

// Limits shared by the schema's CHECK constraints and request validation.
const (
	maxNameRunes = 100
	maxPriceFen  = 100_000_000 // one million yuan
	maxStock     = 1_000_000
	maxPosition  = 100_000
	maxURLBytes  = 2048
	maxGroups    = 20 // option groups per dish
	maxChoices   = 20 // choices per group
)

// MerchantRules are a merchant's money rules and hours, as create and
// update take them; a field left out is not changed (on create: its
// default).
type MerchantRules struct {
	DeliveryFeeFen *int64              `json:"delivery_fee_fen"`
	MinOrderFen    *int64              `json:"min_order_fen"`
	Location       *Location           `json:"location"`
	DeliveryBands  *[]delivery.Band    `json:"delivery_bands"`
	TimeZone       *string             `json:"time_zone"`
	Hours          *[]hours.PeriodJSON `json:"hours"`
	ClosedDates    *[]string           `json:"closed_dates"`
	// Fulfilment replaces the ways the merchant fulfils orders (delivery,
	// pickup, scheduled slots) as a whole.
	Fulfilment *fulfilment.Rules `json:"fulfilment"`
}

// changesQuote reports whether the rules change what an order costs or
// when one may be placed.
func (r MerchantRules) changesQuote() bool {
	return r.DeliveryFeeFen != nil || r.MinOrderFen != nil || r.Location != nil || r.DeliveryBands != nil ||
		r.TimeZone != nil || r.Hours != nil || r.ClosedDates != nil || r.Fulfilment != nil
}

func (r MerchantRules) validate() error {
	if r.DeliveryFeeFen != nil && (*r.DeliveryFeeFen < 0 || *r.DeliveryFeeFen > maxPriceFen) {
		return problem.Field("delivery_fee_fen", "must be between 0 and %d", maxPriceFen)
	}
	if r.MinOrderFen != nil && (*r.MinOrderFen < 0 || *r.MinOrderFen > maxPriceFen) {
		return problem.Field("min_order_fen", "must be between 0 and %d", maxPriceFen)
	}
	if r.Fulfilment != nil {
		if field, err := r.Fulfilment.Check(); err != nil {
			return problem.Field("fulfilment."+field, "%s", err.Error())
		}
	}
	if l := r.Location; l != nil && (math.IsNaN(l.Lat) || l.Lat < -90 || l.Lat > 90 || math.IsNaN(l.Lng) || l.Lng < -180 || l.Lng > 180) {
		return problem.Field("location", "lat must be between -90 and 90 and lng between -180 and 180 (degrees)")
	}
	if r.DeliveryBands != nil {
		if err := delivery.Check(*r.DeliveryBands); err != nil {
			return problem.Field("delivery_bands", "%s", err.Error())
		}
	}
	if r.TimeZone != nil {
		if _, err := time.LoadLocation(*r.TimeZone); err != nil || *r.TimeZone == "" || *r.TimeZone == "Local" {
			return problem.Field("time_zone", "must be an IANA time zone, e.g. Asia/Shanghai")
		}
	}
	if r.Hours != nil {
		if len(*r.Hours) > 70 {
			return problem.Field("hours", "at most 70 periods")
		}
		if _, err := hours.ParsePeriods(*r.Hours); err != nil {
			return problem.Field("hours", "%s", err.Error())
		}
	}
	if r.ClosedDates != nil {
		if len(*r.ClosedDates) > 366 {
			return problem.Field("closed_dates", "at most 366 dates")
		}
		for i, d := range *r.ClosedDates {
			if err := hours.ValidDate(d); err != nil {
				return problem.Field(fmt.Sprintf("closed_dates[%d]", i), "%s", err.Error())
			}
		}
	}
	return nil
}

// KitchenRules are how long a merchant's kitchen has to accept a paid
// order and what happens to one it has not accepted by then; they apply
// to orders paid after the change. A field left out is not changed (on
// create: 300 seconds, reject).
type KitchenRules struct {
	AcceptWithinSeconds *int32  `json:"accept_within_seconds"`
	AcceptTimeoutAction *string `json:"accept_timeout_action"`
}

// Limits of the accept deadline (the schema's CHECK): 0 is none.
const (
	minAcceptWithinSeconds = 10
	maxAcceptWithinSeconds = 7200
)

func (k KitchenRules) set() bool { return k.AcceptWithinSeconds != nil || k.AcceptTimeoutAction != nil }

func (k KitchenRules) validate() error {
	if v := k.AcceptWithinSeconds; v != nil && *v != 0 && (*v < minAcceptWithinSeconds || *v > maxAcceptWithinSeconds) {
		return problem.Field("accept_within_seconds", "must be 0 (no deadline) or between %d and %d", minAcceptWithinSeconds, maxAcceptWithinSeconds)
	}
	if a := k.AcceptTimeoutAction; a != nil && *a != "accept" && *a != "reject" {
		return problem.Field("accept_timeout_action", `must be "accept" or "reject"`)
	}
	return nil
}

// CreateMerchantRequest is the body of POST /admin/v1/merchants.
type CreateMerchantRequest struct {
	Name   string  `json:"name" text:"name"`
	Status *string `json:"status"`
	MerchantRules
	KitchenRules
}

// Validate checks the request's values.
func (r *CreateMerchantRequest) Validate() error {
	if err := validName(r.Name, true); err != nil {
		return err
	}
	if err := validMerchantFields(r.Status); err != nil {
		return err
	}
	if err := r.KitchenRules.validate(); err != nil {
		return err
	}
	return r.MerchantRules.validate()
}

// UpdateMerchantRequest is the body of PATCH /admin/v1/merchants/{id}:
// the version read and the fields to change.
type UpdateMerchantRequest struct {
	Version *int64  `json:"version"`
	Name    *string `json:"name" text:"name"`
	Status  *string `json:"status"`
	MerchantRules
	KitchenRules
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
	if r.Name == nil && r.Status == nil && !r.changesQuote() && !r.set() {
		return problem.New(problem.InvalidRequest, "nothing to change: send name, status, delivery_fee_fen, min_order_fen, location, delivery_bands, time_zone, hours, closed_dates, fulfilment, accept_within_seconds or accept_timeout_action")
	}
	if err := validMerchantFields(r.Status); err != nil {
		return err
	}
	if err := r.KitchenRules.validate(); err != nil {
		return err
	}
	return r.MerchantRules.validate()
}

// CreateDishRequest is the body of POST /admin/v1/merchants/{id}/dishes.
type CreateDishRequest struct {
	Name            string  `json:"name" text:"name"`
	PriceFen        *int64  `json:"price_fen"`
	Stock           *int32  `json:"stock"`
	OnSale          *bool   `json:"on_sale"`
	CategoryID      *string `json:"category_id"`
	Position        *int32  `json:"position"`
	ImageURL        *string `json:"image_url"`
	PackagingFeeFen *int64  `json:"packaging_fee_fen"`
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
	if err := validStock("stock", *r.Stock); err != nil {
		return err
	}
	return validDishLayout(r.CategoryID, r.Position, r.ImageURL, r.PackagingFeeFen)
}

// UpdateDishRequest is the body of PATCH /admin/v1/dishes/{id}. A
// category_id or image_url of "" removes the dish's category or image.
type UpdateDishRequest struct {
	Version         *int64  `json:"version"`
	Name            *string `json:"name" text:"name"`
	PriceFen        *int64  `json:"price_fen"`
	OnSale          *bool   `json:"on_sale"`
	CategoryID      *string `json:"category_id"`
	Position        *int32  `json:"position"`
	ImageURL        *string `json:"image_url"`
	PackagingFeeFen *int64  `json:"packaging_fee_fen"`
}

// Validate checks the request's values.
func (r *UpdateDishRequest) Validate() error {
	if err := validVersion(r.Version); err != nil {
		return err
	}
	if r.Name == nil && r.PriceFen == nil && r.OnSale == nil && r.CategoryID == nil && r.Position == nil && r.ImageURL == nil && r.PackagingFeeFen == nil {
		return problem.New(problem.InvalidRequest, "nothing to change: send name, price_fen, on_sale, category_id, position, image_url or packaging_fee_fen")
	}
	if r.Name != nil {
		if err := validName(*r.Name, true); err != nil {
			return err
		}
	}
	if r.PriceFen != nil {
		if err := validPrice(*r.PriceFen); err != nil {
			return err
		}
	}
	category, image := r.CategoryID, r.ImageURL
	if category != nil && *category == "" {
		category = nil
	}
	if image != nil && *image == "" {
		image = nil
	}
	return validDishLayout(category, r.Position, image, r.PackagingFeeFen)
}

func validDishLayout(category *string, position *int32, image *string, packaging *int64) error {
	if category != nil {
		if id, err := strconv.ParseInt(*category, 10, 64); err != nil || id <= 0 {
			return problem.Field("category_id", "must be a category id")
		}
	}
	if position != nil && (*position < 0 || *position > maxPosition) {
		return problem.Field("position", "must be between 0 and %d", maxPosition)
	}
	if image != nil {
		if err := validImageURL(*image); err != nil {
			return err
		}
	}
	if packaging != nil && (*packaging < 0 || *packaging > maxPriceFen) {
		return problem.Field("packaging_fee_fen", "must be between 0 and %d (fen, per unit)", maxPriceFen)
	}
	return nil
}

// validImageURL accepts an absolute https URL with a host: the
// mini-program loads images only over https.
func validImageURL(v string) error {
	u, err := url.Parse(v)
	switch {
	case len(v) > maxURLBytes:
		return problem.Field("image_url", "at most %d bytes", maxURLBytes)
	case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil:
		return problem.Field("image_url", "must be an https URL, e.g. https://cdn.example.com/dish.jpg")
	case !printableASCII(v):
		return problem.Field("image_url", "must be percent-encoded (no spaces or control characters)")
	}
	return nil
}

func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// CreateCategoryRequest is the body of POST /admin/v1/merchants/{id}/categories.
type CreateCategoryRequest struct {
	Name     string `json:"name" text:"name"`
	Position *int32 `json:"position"`
}

// Validate checks the request's values.
func (r *CreateCategoryRequest) Validate() error {
	if err := validName(r.Name, true); err != nil {
		return err
	}
	return validDishLayout(nil, r.Position, nil, nil)
}

// UpdateCategoryRequest is the body of PATCH /admin/v1/categories/{id}.
type UpdateCategoryRequest struct {
	Version  *int64  `json:"version"`
	Name     *string `json:"name" text:"name"`
	Position *int32  `json:"position"`
}

// Validate checks the request's values.
func (r *UpdateCategoryRequest) Validate() error {
	if err := validVersion(r.Version); err != nil {
		return err
	}
	if r.Name == nil && r.Position == nil {
		return problem.New(problem.InvalidRequest, "nothing to change: send name or position")
	}
	if r.Name != nil {
		if err := validName(*r.Name, true); err != nil {
			return err
		}
	}
	return validDishLayout(nil, r.Position, nil, nil)
}

// SetOptionsRequest is the body of PUT /admin/v1/dishes/{id}/options: the
// dish's whole option set, replacing the one of the version read. Groups
// and choices that name an id keep it (orders and quotes refer to choice
// ids); those without one are new.
type SetOptionsRequest struct {
	Version *int64               `json:"version"`
	Groups  []OptionGroupRequest `json:"groups"`
}

// OptionGroupRequest is one group of a SetOptionsRequest.
type OptionGroupRequest struct {
	ID         *string               `json:"id"`
	Name       string                `json:"name" text:"name"`
	MinChoices int32                 `json:"min_choices"`
	MaxChoices *int32                `json:"max_choices"`
	Choices    []OptionChoiceRequest `json:"choices"`
}

// OptionChoiceRequest is one choice of an OptionGroupRequest.
type OptionChoiceRequest struct {
	ID            *string `json:"id"`
	Name          string  `json:"name" text:"name"`
	PriceDeltaFen int64   `json:"price_delta_fen"`
	Available     *bool   `json:"available"`
}

// Validate checks the request's values.
func (r *SetOptionsRequest) Validate() error {
	if err := validVersion(r.Version); err != nil {
		return err
	}
	if r.Groups == nil {
		return problem.Field("groups", "required: the dish's option groups ([] for none)")
	}
	if len(r.Groups) > maxGroups {
		return problem.Field("groups", "at most %d groups", maxGroups)
	}
	ids := map[string]bool{}
	names := map[string]bool{}
	for i, g := range r.Groups {
		if err := g.validate(fmt.Sprintf("groups[%d]", i), ids); err != nil {
			return err
		}
		if names[g.Name] {
			return problem.Field(fmt.Sprintf("groups[%d].name", i), "two groups named %q", g.Name)
		}
		names[g.Name] = true
	}
	return nil
}

func (g *OptionGroupRequest) validate(field string, ids map[string]bool) error {
	if err := validOptionName(field, g.Name); err != nil {
		return err
	}
	if err := validOptionID(field, "g", g.ID, ids); err != nil {
		return err
	}
	switch {
	case len(g.Choices) == 0:
		return problem.Field(field+".choices", "at least one choice")
	case len(g.Choices) > maxChoices:
		return problem.Field(field+".choices", "at most %d choices", maxChoices)
	case g.MaxChoices == nil:
		return problem.Field(field+".max_choices", "required: how many choices a customer may pick (1 for a single choice)")
	case *g.MaxChoices < 1 || int(*g.MaxChoices) > len(g.Choices):
		return problem.Field(field+".max_choices", "must be between 1 and the number of choices (%d)", len(g.Choices))
	case g.MinChoices < 0 || g.MinChoices > *g.MaxChoices:
		return problem.Field(field+".min_choices", "must be between 0 (optional) and max_choices (%d)", *g.MaxChoices)
	}
	names := map[string]bool{}
	for j, c := range g.Choices {
		cf := fmt.Sprintf("%s.choices[%d]", field, j)
		if err := validOptionName(cf, c.Name); err != nil {
			return err
		}
		if names[c.Name] {
			return problem.Field(cf+".name", "two choices named %q", c.Name)
		}
		names[c.Name] = true
		if err := validOptionID(cf, "c", c.ID, ids); err != nil {
			return err
		}
		if c.PriceDeltaFen < 0 || c.PriceDeltaFen > maxPriceFen {
			return problem.Field(cf+".price_delta_fen", "must be between 0 and %d (fen)", maxPriceFen)
		}
	}
	return nil
}

func validOptionName(field, name string) error { return validNameOf(field+".name", name, true) }

// validOptionID checks an id the request keeps, and that it is kept once
// (kind separates group ids from choice ids).
func validOptionID(field, kind string, id *string, seen map[string]bool) error {
	if id == nil {
		return nil
	}
	if n, err := strconv.ParseInt(*id, 10, 64); err != nil || n <= 0 {
		return problem.Field(field+".id", "must be an id this dish's options have, or absent for a new one")
	}
	if seen[kind+*id] {
		return problem.Field(field+".id", "id %s appears twice", *id)
	}
	seen[kind+*id] = true
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

func validName(name string, required bool) error { return validNameOf("name", name, required) }

// validNameOf checks a name sent in field.
func validNameOf(field, name string, required bool) error {
	n := utf8.RuneCountInString(name)
	switch {
	case n == 0 && required:
		return problem.Field(field, "required")
	case n > maxNameRunes:
		return problem.Field(field, "at most %d characters", maxNameRunes)
	case !utf8.ValidString(name):
		return problem.Field(field, "must be valid UTF-8")
	}
	return nil
}

func validMerchantFields(status *string) error {
	if status != nil && *status != MerchantOpen && *status != MerchantClosed {
		return problem.Field("status", "must be %q or %q", MerchantOpen, MerchantClosed)
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
