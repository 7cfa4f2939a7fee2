package order

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm3"

	"github.com/takeout/takeout/internal/promotion"
)

// The confirm token carries everything submit needs, signed with HMAC-SM3
// under a server secret: "v5.<base64url payload>.<base64url mac>". A token
// whose MAC does not verify is rejected before anything else is read, so a
// forged or altered token never reaches Redis or the database. The
// version moves with the canonical form (DigestAlg): a token of an older
// one (v1, before options; v2, before vouchers; v3, before promotions;
// v4, before pickup and slots)
// verifies, and is then answered as outdated.

const tokenVersion = "v5"

// oldTokenVersions are the versions answered as outdated.
var oldTokenVersions = []string{"v1", "v2", "v3", "v4"}

// Token is the signed content of a confirm token.
type Token struct {
	UserID     int64       `json:"u"`
	MerchantID int64       `json:"m"`
	OrderID    int64       `json:"o"`
	Seq        int         `json:"s"`
	Digest     string      `json:"d"`
	ExpiresAt  int64       `json:"e"` // unix seconds
	Items      []TokenItem `json:"i"`
	FeeFen     int64       `json:"f"`
	Address    Address     `json:"a"`
	Remark     string      `json:"r"`
	// QuoteVersion is the merchant's rules (fees, minimum, hours) the
	// cart was quoted under; the stock take holds the merchant to it.
	QuoteVersion int64 `json:"mv"`
	// OpenUntil (unix seconds; 0 for no end in sight) is when the
	// merchant's opening at confirm ends, and NextOpen when it opens
	// after it: a submit after OpenUntil is merchant-closed.
	OpenUntil int64 `json:"ou,omitempty"`
	NextOpen  int64 `json:"no,omitempty"`
	// VoucherID is the customer's voucher the cart was priced with (0:
	// none), VoucherFen what it takes off the dishes, and VoucherFundedBy
	// who pays for it.
	VoucherID       int64  `json:"vo,omitempty"`
	VoucherFen      int64  `json:"vd,omitempty"`
	VoucherFundedBy string `json:"vf,omitempty"`
	// Promotions are the merchant's promotions the cart gets, by id; FeeFen
	// is the delivery fee after a free delivery's waiver.
	Promotions []TokenPromotion `json:"pr,omitempty"`
	// Fulfilment is "delivery" or "pickup". A scheduled order's slot is
	// SlotStart to SlotEnd (unix seconds; 0: as soon as possible), which
	// can be ordered until SlotCutoff. TimeZone is the merchant's: a
	// pickup order's number is of the merchant's day.
	Fulfilment string `json:"fl"`
	SlotStart  int64  `json:"ss,omitempty"`
	SlotEnd    int64  `json:"se,omitempty"`
	SlotCutoff int64  `json:"sc,omitempty"`
	TimeZone   string `json:"tz,omitempty"`
}

// TokenPromotion is a promotion a cart was quoted with, at its version:
// what it takes off (the dishes, or the delivery fee it waives), who pays
// for it, whether it has a budget to take from, and, for a first-order
// discount, the scope of the claim (the merchant's id, 0 for the
// platform).
type TokenPromotion struct {
	ID        int64  `json:"i"`
	Version   int64  `json:"v"`
	Kind      string `json:"k"`
	Name      string `json:"n"`
	AmountFen int64  `json:"a"`
	FundedBy  string `json:"f"`
	Budget    bool   `json:"b,omitempty"`
	Scope     *int64 `json:"s,omitempty"`
}

// itemsOff reports whether the promotion takes its amount off the dishes
// (free delivery waives the fee instead).
func (p TokenPromotion) itemsOff() bool { return p.Kind != promotion.KindFreeDelivery }

// discountFen is what the cart's discounts take off the dishes: the
// voucher's and the promotions'.
func (t Token) discountFen() int64 {
	d := t.VoucherFen
	for _, p := range t.Promotions {
		if p.itemsOff() {
			d += p.AmountFen
		}
	}
	return d
}

// TokenItem is a quoted line: dish, chosen options, quantity, unit price
// (the dish's price plus the options' deltas), packaging fee per unit,
// the dish's options version, and the names at confirm. Submit holds the
// prices, the options version and the dish's sale status to the quote
// (409 quote-changed otherwise); a rename in between changes nothing the
// customer pays for, so the order keeps the names they saw.
type TokenItem struct {
	DishID          int64         `json:"d"`
	Qty             int32         `json:"q"`
	UnitPriceFen    int64         `json:"p"`
	Name            string        `json:"n"`
	PackagingFeeFen int64         `json:"k,omitempty"`
	OptionsVersion  int64         `json:"ov"`
	Options         []TokenOption `json:"o,omitempty"`
}

// TokenOption is a chosen option choice as quoted: its id, its group's
// name, its name and its price delta.
type TokenOption struct {
	ID       int64  `json:"i"`
	Group    string `json:"g"`
	Name     string `json:"n"`
	DeltaFen int64  `json:"p"`
}

// basePriceFen is the dish's own price the line was quoted at: what the
// stock take checks on the dish's row.
func (it TokenItem) basePriceFen() int64 {
	p := it.UnitPriceFen
	for _, o := range it.Options {
		p -= o.DeltaFen
	}
	return p
}

// optionIDs are the line's choice ids, ascending.
func (it TokenItem) optionIDs() []int64 {
	if len(it.Options) == 0 {
		return nil
	}
	ids := make([]int64, len(it.Options))
	for i, o := range it.Options {
		ids[i] = o.ID
	}
	slices.Sort(ids)
	return ids
}

// Errors of token verification.
var (
	errTokenMalformed = errors.New("confirm token malformed")
	errTokenSignature = errors.New("confirm token signature invalid")
	// errTokenOutdated is a genuine token of an older form.
	errTokenOutdated = errors.New("confirm token of an older version")
)

// Signer signs and verifies confirm tokens.
type Signer struct{ key []byte }

// NewSigner returns a Signer with the server secret key.
func NewSigner(key []byte) *Signer { return &Signer{key: key} }

func (s *Signer) mac(signed []byte) []byte {
	m := hmac.New(sm3.New, s.key)
	m.Write(signed)
	return m.Sum(nil)
}

// Sign encodes and signs t.
func (s *Signer) Sign(t Token) (string, error) {
	payload, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encode confirm token: %w", err)
	}
	signed := tokenVersion + "." + base64.RawURLEncoding.EncodeToString(payload)
	return signed + "." + base64.RawURLEncoding.EncodeToString(s.mac([]byte(signed))), nil
}

// Verify checks the MAC in constant time, then decodes the token. It does
// not check expiry or ownership: the caller does, with its clock and user.
func (s *Signer) Verify(raw string) (Token, error) {
	if len(raw) > 16<<10 {
		return Token{}, errTokenMalformed
	}
	i := strings.LastIndexByte(raw, '.')
	outdated := slices.ContainsFunc(oldTokenVersions, func(v string) bool { return strings.HasPrefix(raw, v+".") })
	if i < 0 || (!strings.HasPrefix(raw, tokenVersion+".") && !outdated) {
		return Token{}, errTokenMalformed
	}
	signed, sig := raw[:i], raw[i+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac([]byte(signed))) {
		return Token{}, errTokenSignature
	}
	if outdated {
		return Token{}, errTokenOutdated
	}
	payload, err := base64.RawURLEncoding.DecodeString(signed[len(tokenVersion)+1:])
	if err != nil {
		return Token{}, errTokenMalformed
	}
	var t Token
	// The payload is ours (its MAC verified): a field an older or newer
	// server wrote is ignored, so tokens survive a rolling deploy.
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&t); err != nil {
		return Token{}, errTokenMalformed
	}
	return t, nil
}

// Intent rebuilds the intent the token was issued for.
func (t Token) Intent() Intent {
	in := Intent{UserID: t.UserID, MerchantID: t.MerchantID, DeliveryFeeFen: t.FeeFen, VoucherID: t.VoucherID,
		DiscountFen: t.discountFen(), Address: t.Address, Remark: t.Remark, Fulfilment: t.Fulfilment, SlotStart: t.SlotStart}
	for _, p := range t.Promotions {
		in.Promotions = append(in.Promotions, IntentPromotion{ID: p.ID, Version: p.Version, AmountFen: p.AmountFen})
	}
	for _, it := range t.Items {
		in.Items = append(in.Items, IntentItem{DishID: it.DishID, Qty: it.Qty, UnitPriceFen: it.UnitPriceFen,
			PackagingFeeFen: it.PackagingFeeFen, OptionIDs: it.optionIDs()})
		in.ItemsTotalFen += it.UnitPriceFen * int64(it.Qty)
		in.PackagingFeeFen += it.PackagingFeeFen * int64(it.Qty)
	}
	in.TotalFen = in.ItemsTotalFen + in.PackagingFeeFen + in.DeliveryFeeFen - in.DiscountFen
	return in
}

// Expired reports whether the token has expired at now.
func (t Token) Expired(now time.Time) bool { return now.Unix() >= t.ExpiresAt }

// slot is the token's time slot, nil for as soon as possible.
func (t Token) slot() *Slot {
	if t.SlotStart == 0 {
		return nil
	}
	return &Slot{Start: time.Unix(t.SlotStart, 0).UTC(), End: time.Unix(t.SlotEnd, 0).UTC()}
}
