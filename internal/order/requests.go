package order

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// Limits of a cart.
const (
	maxItems       = 50
	maxQty         = 99
	maxRemarkRunes = 200
	maxLineOptions = 40
)

// phonePattern is a phone number as api/openapi.yaml states it (Address).
var phonePattern = regexp.MustCompile(`^\+?[0-9]{5,20}$`)

// ConfirmRequest is the body of POST /v1/orders/confirm.
type ConfirmRequest struct {
	MerchantID string        `json:"merchant_id"`
	Items      []ConfirmItem `json:"items"`
	Address    *Address      `json:"address"`
	Remark     string        `json:"remark" text:"multiline"`
	// Repeat asks for a new order even when the same cart was placed
	// within the dedup window.
	Repeat bool `json:"repeat"`
	// VoucherID is a voucher of the customer's wallet to spend on the
	// order (optional).
	VoucherID string `json:"voucher_id"`
	// Fulfilment is "delivery" (the default) or "pickup": the customer
	// collects the order at the counter (the address names who, its
	// detail may be empty, and there is no delivery fee).
	Fulfilment string `json:"fulfilment"`
	// SlotStart (RFC 3339, optional) orders for a later time slot, one of
	// GET /v1/merchants/{id}/slots; none is as soon as possible.
	SlotStart string `json:"slot_start"`
}

// way is the request's fulfilment, delivery when left out.
func (r *ConfirmRequest) way() string {
	if r.Fulfilment == "" {
		return fulfilment.Delivery
	}
	return r.Fulfilment
}

// slot is the requested slot's start, nil for as soon as possible.
func (r *ConfirmRequest) slot() *time.Time {
	t, err := time.Parse(time.RFC3339, r.SlotStart)
	if r.SlotStart == "" || err != nil { // validated
		return nil
	}
	t = t.UTC()
	return &t
}

// ConfirmItem is a dish, the option choices chosen for it (ids), and how
// many. The same dish may be on several lines with different options.
type ConfirmItem struct {
	DishID  string   `json:"dish_id"`
	Options []string `json:"options"`
	Qty     int32    `json:"qty"`
}

func parseID(field, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, problem.Field(field, "must be an id (a string of digits), got %q", s)
	}
	return id, nil
}

// Validate checks the cart's shape; prices and stock are checked against
// the database by Confirm.
func (r *ConfirmRequest) Validate() error {
	if r.MerchantID == "" {
		return problem.Field("merchant_id", "required")
	}
	if _, err := parseID("merchant_id", r.MerchantID); err != nil {
		return err
	}
	if len(r.Items) == 0 {
		return problem.Field("items", "required: at least one dish")
	}
	if len(r.Items) > maxItems {
		return problem.Field("items", "at most %d dishes", maxItems)
	}
	seen := make(map[string]bool, len(r.Items))
	for i, it := range r.Items {
		f := fmt.Sprintf("items[%d]", i)
		id, err := parseID(f+".dish_id", it.DishID)
		if err != nil {
			return err
		}
		opts, err := lineOptions(f+".options", it.Options)
		if err != nil {
			return err
		}
		line := strconv.FormatInt(id, 10) + ":" + fmt.Sprint(opts)
		if seen[line] {
			return problem.Field(f+".dish_id", "dish %s with these options is listed twice; send its total qty once", it.DishID)
		}
		seen[line] = true
		if it.Qty < 1 || it.Qty > maxQty {
			return problem.Field(f+".qty", "must be between 1 and %d", maxQty)
		}
	}
	if r.VoucherID != "" {
		if _, err := parseID("voucher_id", r.VoucherID); err != nil {
			return err
		}
	}
	switch r.Fulfilment {
	case "", fulfilment.Delivery, fulfilment.Pickup:
	default:
		return problem.Field("fulfilment", `must be "delivery" or "pickup"`)
	}
	if r.SlotStart != "" {
		if _, err := time.Parse(time.RFC3339, r.SlotStart); err != nil {
			return problem.Field("slot_start", "must be a time, RFC 3339 (a slot's start from GET /v1/merchants/{id}/slots)")
		}
	}
	if r.Address == nil {
		return problem.Field("address", "required")
	}
	if err := validLocation(r.Address.Location); err != nil {
		return err
	}
	a := r.Address.Normalize()
	switch n := utf8.RuneCountInString(a.Name); {
	case n == 0:
		return problem.Field("address.name", "required")
	case n > 50:
		return problem.Field("address.name", "at most 50 characters")
	}
	if !phonePattern.MatchString(a.Phone) {
		return problem.Field("address.phone", "must be 5 to 20 digits, optionally after a leading +")
	}
	switch n := utf8.RuneCountInString(a.Detail); {
	case n == 0 && r.way() == fulfilment.Delivery:
		return problem.Field("address.detail", "required")
	case n > 200:
		return problem.Field("address.detail", "at most 200 characters")
	}
	if utf8.RuneCountInString(r.Remark) > maxRemarkRunes {
		return problem.Field("remark", "at most %d characters", maxRemarkRunes)
	}
	for _, s := range []string{a.Name, a.Detail, r.Remark} {
		if !utf8.ValidString(s) {
			return problem.New(problem.InvalidRequest, "text must be valid UTF-8")
		}
	}
	return nil
}

// lineOptions parses a line's choice ids, ascending; a choice chosen
// twice is refused.
func lineOptions(field string, opts []string) ([]int64, error) {
	if len(opts) > maxLineOptions {
		return nil, problem.Field(field, "at most %d choices", maxLineOptions)
	}
	ids := make([]int64, len(opts))
	for j, o := range opts {
		id, err := parseID(fmt.Sprintf("%s[%d]", field, j), o)
		if err != nil {
			return nil, err
		}
		ids[j] = id
	}
	slices.Sort(ids)
	for j := 1; j < len(ids); j++ {
		if ids[j] == ids[j-1] {
			return nil, problem.Field(field, "choice %d is chosen twice", ids[j])
		}
	}
	return ids, nil
}

// validLocation checks a location picker's point: finite degrees in
// range.
func validLocation(l *Location) error {
	switch {
	case l == nil:
		return nil
	case math.IsNaN(l.Lat) || l.Lat < -90 || l.Lat > 90:
		return problem.Field("address.location.lat", "must be a latitude in degrees, between -90 and 90")
	case math.IsNaN(l.Lng) || l.Lng < -180 || l.Lng > 180:
		return problem.Field("address.location.lng", "must be a longitude in degrees, between -180 and 180")
	}
	return nil
}

// SubmitRequest is the body of POST /v1/orders.
type SubmitRequest struct {
	ConfirmToken string `json:"confirm_token"`
}

// Validate checks the token is present.
func (r *SubmitRequest) Validate() error {
	if r.ConfirmToken == "" {
		return problem.Field("confirm_token", "required: the token from POST /v1/orders/confirm")
	}
	return nil
}

// DecodeSubmit reads the body of POST /v1/orders exactly as web.Decode
// does, with a fast path for the form clients send, {"confirm_token":"…"}
// with a token of URL-safe characters and nothing else: that body means
// the same to encoding/json, and is read here without reflection (a
// storm of retries is mostly this). Any other body goes to web.Decode.
func DecodeSubmit(r *http.Request) (SubmitRequest, error) {
	if r.Header.Get("Content-Type") != "application/json" || r.Body == nil {
		return web.Decode[SubmitRequest](r)
	}
	body, err := web.ReadBody(r)
	if err == nil {
		if tok, ok := bareToken(body); ok {
			req := SubmitRequest{ConfirmToken: tok}
			return req, req.Validate()
		}
	}
	// web.Decode sees the same bytes, and the same read error after them.
	rest := io.Reader(bytes.NewReader(body))
	if err != nil {
		rest = io.MultiReader(rest, errReader{err})
	}
	r.Body = io.NopCloser(rest)
	return web.Decode[SubmitRequest](r)
}

// bareToken returns the token of a body that is exactly
// {"confirm_token":"<token>"} with a non-empty token of the characters a
// confirm token is made of, none of which JSON escapes.
func bareToken(b []byte) (string, bool) {
	const prefix, suffix = `{"confirm_token":"`, `"}`
	if len(b) <= len(prefix)+len(suffix) || !bytes.HasPrefix(b, []byte(prefix)) || !bytes.HasSuffix(b, []byte(suffix)) {
		return "", false
	}
	tok := b[len(prefix) : len(b)-len(suffix)]
	for _, c := range tok {
		if !tokenByte(c) {
			return "", false
		}
	}
	// The token shares the body's memory: the body is read into a buffer
	// of its own that nothing writes again, so the string stays as read,
	// and a replay costs no second copy of it.
	return unsafe.String(unsafe.SliceData(tok), len(tok)), true //nolint:gosec // G103: tok is never written after the read (see above)
}

// tokenByte reports whether c may appear in a confirm token as is.
func tokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '-' || c == '_' || c == '.' || c == '~'
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
