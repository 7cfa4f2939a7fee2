package order

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm3"
)

// The confirm token carries everything submit needs, signed with HMAC-SM3
// under a server secret: "v1.<base64url payload>.<base64url mac>". A token
// whose MAC does not verify is rejected before anything else is read, so a
// forged or altered token never reaches Redis or the database.

const tokenVersion = "v1"

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
}

// TokenItem is a quoted line: dish, quantity, unit price and the dish's
// name at confirm. Submit holds the price and the dish's sale status to
// the quote (409 quote-changed otherwise); a rename in between changes
// nothing the customer pays for, so the order keeps the name they saw.
type TokenItem struct {
	DishID       int64  `json:"d"`
	Qty          int32  `json:"q"`
	UnitPriceFen int64  `json:"p"`
	Name         string `json:"n"`
}

// Errors of token verification.
var (
	errTokenMalformed = errors.New("confirm token malformed")
	errTokenSignature = errors.New("confirm token signature invalid")
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
	if i < 0 || !strings.HasPrefix(raw, tokenVersion+".") {
		return Token{}, errTokenMalformed
	}
	signed, sig := raw[:i], raw[i+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac([]byte(signed))) {
		return Token{}, errTokenSignature
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
	in := Intent{UserID: t.UserID, MerchantID: t.MerchantID, DeliveryFeeFen: t.FeeFen, Address: t.Address, Remark: t.Remark}
	for _, it := range t.Items {
		in.Items = append(in.Items, IntentItem{DishID: it.DishID, Qty: it.Qty, UnitPriceFen: it.UnitPriceFen})
		in.ItemsTotalFen += it.UnitPriceFen * int64(it.Qty)
	}
	in.TotalFen = in.ItemsTotalFen + in.DeliveryFeeFen
	return in
}

// Expired reports whether the token has expired at now.
func (t Token) Expired(now time.Time) bool { return now.Unix() >= t.ExpiresAt }
