package order

import (
	"cmp"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/emmansun/gmsm/sm3"
	"golang.org/x/text/unicode/norm"
)

// DigestAlg names the canonical form and hash below; it is stored with
// every order so the form can evolve without breaking old digests.
const DigestAlg = "sm3/v1"

// Intent is the stable content of an order: who orders what from whom, at
// which prices, delivered where, with which remark. It excludes anything
// that differs between two submissions of one order (timestamps, random
// strings, the client's address), so that retries digest alike.
type Intent struct {
	UserID         int64
	MerchantID     int64
	Items          []IntentItem // sorted by dish id (Normalize)
	ItemsTotalFen  int64
	DeliveryFeeFen int64
	TotalFen       int64
	Address        Address
	Remark         string
}

// IntentItem is one line of an Intent.
type IntentItem struct {
	DishID       int64
	Qty          int32
	UnitPriceFen int64
}

// Address is where an order goes.
type Address struct {
	Name   string `json:"name"`
	Phone  string `json:"phone"`
	Detail string `json:"detail" text:"multiline"`
}

// Normalize sorts the items by dish id and normalises the free text (NFC,
// trimmed, inner white space collapsed; phone without separators), so
// that the same order typed twice digests alike.
func (in *Intent) Normalize() {
	slices.SortFunc(in.Items, func(a, b IntentItem) int { return cmp.Compare(a.DishID, b.DishID) })
	in.Address = in.Address.Normalize()
	in.Remark = normalizeText(in.Remark)
}

// Normalize returns the address in canonical form.
func (a Address) Normalize() Address {
	return Address{Name: normalizeText(a.Name), Phone: normalizePhone(a.Phone), Detail: normalizeText(a.Detail)}
}

func normalizeText(s string) string {
	return strings.Join(strings.FieldsFunc(norm.NFC.String(s), unicode.IsSpace), " ")
}

func normalizePhone(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' || r == '(' || r == ')' || unicode.IsSpace(r) {
			return -1
		}
		return r
	}, norm.NFC.String(s))
}

// Canonical returns the canonical encoding of a normalised intent. With
// seq > 0 it ends with the intent sequence line (the intent digest's
// input); with seq == 0 it is the content alone (the content digest's
// input). One field per line, "name:value\n"; strings are
// length-prefixed ("name:<bytes>:value"), so that no choice of text can
// make two different intents encode alike:
//
//	takeout-order/sm3/v1
//	user:<id>
//	merchant:<id>
//	item:<dish id>:<qty>:<unit price fen>      (one per item, by dish id)
//	items_total_fen:<n>
//	delivery_fee_fen:<n>
//	total_fen:<n>
//	address.name:<len>:<text>
//	address.phone:<len>:<text>
//	address.detail:<len>:<text>
//	remark:<len>:<text>
//	intent_seq:<n>                             (intent digest only)
func (in Intent) Canonical(seq int) []byte {
	b := make([]byte, 0, 256+32*len(in.Items))
	b = append(b, "takeout-order/"+DigestAlg+"\n"...)
	b = appendInt(b, "user", in.UserID)
	b = appendInt(b, "merchant", in.MerchantID)
	for _, it := range in.Items {
		b = append(b, "item:"...)
		b = strconv.AppendInt(b, it.DishID, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(it.Qty), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, it.UnitPriceFen, 10)
		b = append(b, '\n')
	}
	b = appendInt(b, "items_total_fen", in.ItemsTotalFen)
	b = appendInt(b, "delivery_fee_fen", in.DeliveryFeeFen)
	b = appendInt(b, "total_fen", in.TotalFen)
	b = appendString(b, "address.name", in.Address.Name)
	b = appendString(b, "address.phone", in.Address.Phone)
	b = appendString(b, "address.detail", in.Address.Detail)
	b = appendString(b, "remark", in.Remark)
	if seq > 0 {
		b = appendInt(b, "intent_seq", int64(seq))
	}
	return b
}

func appendInt(b []byte, name string, v int64) []byte {
	b = append(b, name...)
	b = append(b, ':')
	b = strconv.AppendInt(b, v, 10)
	return append(b, '\n')
}

func appendString(b []byte, name, v string) []byte {
	b = append(b, name...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, ':')
	b = append(b, v...)
	return append(b, '\n')
}

// Digest is an SM3 digest.
type Digest [sm3.Size]byte

// String is the digest in lower-case hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// ContentDigest digests the stable fields alone.
func (in Intent) ContentDigest() Digest { return sm3.Sum(in.Canonical(0)) }

// IntentDigest digests the stable fields plus the intent sequence: the
// identity of one intended order.
func (in Intent) IntentDigest(seq int) Digest { return sm3.Sum(in.Canonical(seq)) }
