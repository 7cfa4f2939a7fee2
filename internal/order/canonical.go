package order

import (
	"cmp"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/emmansun/gmsm/sm3"
	"golang.org/x/text/unicode/norm"
)

// DigestAlg names the canonical form and hash below; it is stored with
// every order so the form can evolve without breaking old digests. v1
// (before options and packaging fees) had neither the option ids, the
// packaging fees nor the location; v2 had no voucher and discount; v3 no
// promotions; v4 no fulfilment and slot. Their
// tokens are no longer accepted (410), and their orders keep the digests
// they were placed with.
const DigestAlg = "sm3/v5"

// Intent is the stable content of an order: who orders what from whom, at
// which prices, delivered where, with which remark. It excludes anything
// that differs between two submissions of one order (timestamps, random
// strings, the client's address), so that retries digest alike.
type Intent struct {
	UserID          int64
	MerchantID      int64
	Items           []IntentItem // sorted by dish id, then options (Normalize)
	ItemsTotalFen   int64
	PackagingFeeFen int64
	DeliveryFeeFen  int64
	// VoucherID is the voucher spent on the order (0: none), and
	// DiscountFen what it and the promotions take off the items.
	VoucherID   int64
	DiscountFen int64
	// Promotions are the merchant's promotions the order gets (sorted by
	// id): DeliveryFeeFen is after a free delivery's waiver.
	Promotions []IntentPromotion
	TotalFen   int64
	Address    Address
	Remark     string
	// Fulfilment is how the order reaches the customer (delivery or
	// pickup), and SlotStart the start of its time slot (unix seconds; 0
	// for as soon as possible).
	Fulfilment string
	SlotStart  int64
}

// IntentItem is one line of an Intent: a dish with its chosen option
// choices (ids, ascending), at a unit price that includes the choices'
// deltas, and the dish's packaging fee per unit.
type IntentItem struct {
	DishID          int64
	Qty             int32
	UnitPriceFen    int64
	PackagingFeeFen int64
	OptionIDs       []int64
}

// IntentPromotion is a promotion an order gets, at the version it was
// quoted at, and what it takes off (the dishes, or the delivery fee).
type IntentPromotion struct {
	ID        int64
	Version   int64
	AmountFen int64
}

// Address is where an order goes; Location, when the mini-program's
// location picker gave one, prices the delivery by distance.
type Address struct {
	Name     string    `json:"name" text:"name"`
	Phone    string    `json:"phone"`
	Detail   string    `json:"detail" text:"multiline"`
	Location *Location `json:"location,omitempty"`
}

// Location is a point in degrees (WGS-84, as the location picker gives
// it).
type Location struct {
	Lat float64 `json:"lat"`
	Lng float64 `json:"lng"`
}

// microdegrees is a coordinate as the canonical form has it: whole
// millionths of a degree (about 0.1 m), so that the decimal text a client
// sends does not change the digest.
func microdegrees(v float64) int64 { return int64(math.Round(v * 1e6)) }

// Normalize sorts the items by dish id and normalises the free text (NFC,
// trimmed, inner white space collapsed; phone without separators), so
// that the same order typed twice digests alike.
func (in *Intent) Normalize() {
	for i := range in.Items {
		slices.Sort(in.Items[i].OptionIDs)
	}
	slices.SortFunc(in.Items, compareItems)
	slices.SortFunc(in.Promotions, func(a, b IntentPromotion) int { return cmp.Compare(a.ID, b.ID) })
	in.Address = in.Address.Normalize()
	in.Remark = normalizeText(in.Remark)
}

// compareItems orders lines by dish, then by their option ids.
func compareItems(a, b IntentItem) int {
	if c := cmp.Compare(a.DishID, b.DishID); c != 0 {
		return c
	}
	return slices.Compare(a.OptionIDs, b.OptionIDs)
}

// Normalize returns the address in canonical form; a location is kept to
// the microdegree.
func (a Address) Normalize() Address {
	out := Address{Name: normalizeText(a.Name), Phone: normalizePhone(a.Phone), Detail: normalizeText(a.Detail)}
	if a.Location != nil {
		out.Location = &Location{Lat: float64(microdegrees(a.Location.Lat)) / 1e6, Lng: float64(microdegrees(a.Location.Lng)) / 1e6}
	}
	return out
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
// make two different intents encode alike. Option choices appear by id
// only: their names and deltas are in the unit price, and may be renamed.
//
//	takeout-order/sm3/v5
//	user:<id>
//	merchant:<id>
//	item:<dish id>:<qty>:<unit price fen>:<packaging fee fen>:<choice ids>
//	                      (one per line, by dish id then choice ids; the
//	                      ids ascending, comma-separated, empty for none)
//	items_total_fen:<n>
//	packaging_fee_fen:<n>
//	delivery_fee_fen:<n>                       (after a free delivery's waiver)
//	voucher:<id>                               (0 for none)
//	discount_fen:<n>
//	promotion:<id>:<version>:<amount fen>      (one per line, by id; none
//	                                            for no promotion)
//	total_fen:<n>
//	address.name:<len>:<text>
//	address.phone:<len>:<text>
//	address.detail:<len>:<text>
//	address.location:<len>:<lat>,<lng>         (microdegrees; empty for none)
//	remark:<len>:<text>
//	fulfilment:<len>:<delivery|pickup>
//	slot_start:<unix seconds>                  (0 for as soon as possible)
//	intent_seq:<n>                             (intent digest only)
func (in Intent) Canonical(seq int) []byte {
	b := make([]byte, 0, 256+40*len(in.Items))
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
		b = append(b, ':')
		b = strconv.AppendInt(b, it.PackagingFeeFen, 10)
		b = append(b, ':')
		for i, id := range it.OptionIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, id, 10)
		}
		b = append(b, '\n')
	}
	b = appendInt(b, "items_total_fen", in.ItemsTotalFen)
	b = appendInt(b, "packaging_fee_fen", in.PackagingFeeFen)
	b = appendInt(b, "delivery_fee_fen", in.DeliveryFeeFen)
	b = appendInt(b, "voucher", in.VoucherID)
	b = appendInt(b, "discount_fen", in.DiscountFen)
	for _, p := range in.Promotions {
		b = append(b, "promotion:"...)
		b = strconv.AppendInt(b, p.ID, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, p.Version, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, p.AmountFen, 10)
		b = append(b, '\n')
	}
	b = appendInt(b, "total_fen", in.TotalFen)
	b = appendString(b, "address.name", in.Address.Name)
	b = appendString(b, "address.phone", in.Address.Phone)
	b = appendString(b, "address.detail", in.Address.Detail)
	var loc string
	if l := in.Address.Location; l != nil {
		loc = strconv.FormatInt(microdegrees(l.Lat), 10) + "," + strconv.FormatInt(microdegrees(l.Lng), 10)
	}
	b = appendString(b, "address.location", loc)
	b = appendString(b, "remark", in.Remark)
	b = appendString(b, "fulfilment", in.Fulfilment)
	b = appendInt(b, "slot_start", in.SlotStart)
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
