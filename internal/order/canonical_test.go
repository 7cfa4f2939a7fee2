package order

import (
	"encoding/hex"
	"testing"

	"github.com/emmansun/gmsm/sm3"
)

// SM3 itself, against the standard's example (GB/T 32905-2016, A.1).
func TestSM3KnownAnswer(t *testing.T) {
	t.Parallel()
	got := sm3.Sum([]byte("abc"))
	if hex.EncodeToString(got[:]) != "66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0" {
		t.Fatalf("sm3(abc) = %x", got)
	}
}

func fixedIntent() Intent {
	in := Intent{
		UserID: 42, MerchantID: 7,
		Items: []IntentItem{
			{DishID: 12, Qty: 1, UnitPriceFen: 1500},
			{DishID: 3, Qty: 1, UnitPriceFen: 3700, PackagingFeeFen: 100, OptionIDs: []int64{31, 5}},
			{DishID: 3, Qty: 1, UnitPriceFen: 3200, PackagingFeeFen: 100, OptionIDs: []int64{4}},
		},
		ItemsTotalFen: 8400, PackagingFeeFen: 200, DeliveryFeeFen: 300, VoucherID: 901, DiscountFen: 800, TotalFen: 8100,
		Promotions: []IntentPromotion{{ID: 77, Version: 3, AmountFen: 300}},
		Address: Address{Name: "  Li  Lei ", Phone: "138-0013 8000", Detail: "Room 1201,\tBuilding 5, 88 Keyuan Rd",
			Location: &Location{Lat: 22.5431, Lng: 113.9348}},
		Remark:     "少辣 no  cilantro",
		Fulfilment: "pickup", SlotStart: 1796522400,
	}
	in.Normalize()
	return in
}

// The canonical form is part of the contract between instances and
// versions: these exact bytes and digests must never change under sm3/v5.
func TestCanonicalGolden(t *testing.T) {
	t.Parallel()
	in := fixedIntent()
	want := "takeout-order/sm3/v5\n" +
		"user:42\n" +
		"merchant:7\n" +
		"item:3:1:3200:100:4\n" +
		"item:3:1:3700:100:5,31\n" +
		"item:12:1:1500:0:\n" +
		"items_total_fen:8400\n" +
		"packaging_fee_fen:200\n" +
		"delivery_fee_fen:300\n" +
		"voucher:901\n" +
		"discount_fen:800\n" +
		"promotion:77:3:300\n" +
		"total_fen:8100\n" +
		"address.name:6:Li Lei\n" +
		"address.phone:11:13800138000\n" +
		"address.detail:35:Room 1201, Building 5, 88 Keyuan Rd\n" +
		"address.location:18:22543100,113934800\n" +
		"remark:18:少辣 no cilantro\n" +
		"fulfilment:6:pickup\n" +
		"slot_start:1796522400\n" +
		"intent_seq:1\n"
	if got := string(in.Canonical(1)); got != want {
		t.Fatalf("canonical form changed:\n got %q\nwant %q", got, want)
	}
	if got := in.IntentDigest(1).String(); got != goldenIntentDigest {
		t.Errorf("intent digest = %s, want %s", got, goldenIntentDigest)
	}
	if got := in.ContentDigest().String(); got != goldenContentDigest {
		t.Errorf("content digest = %s, want %s", got, goldenContentDigest)
	}
}

const (
	goldenIntentDigest  = "b2f61726f947272b1b24cba913676ae7f70ebc06743a258378ce291a6c25bfcf" // cross-checked with OpenSSL SM3
	goldenContentDigest = "ca4932358bfcf0c662e2322bbd24a9166b97d5e26f2d52b160f26c1ecf87f108"
)

// Every stable field changes the digest; the intent sequence separates
// deliberate repeats; the same order typed differently digests alike.
func TestDigestSensitivity(t *testing.T) {
	t.Parallel()
	base := fixedIntent()
	d := base.IntentDigest(1)
	mutations := map[string]func(*Intent){
		"user":              func(in *Intent) { in.UserID++ },
		"merchant":          func(in *Intent) { in.MerchantID++ },
		"qty":               func(in *Intent) { in.Items[0].Qty++ },
		"price":             func(in *Intent) { in.Items[1].UnitPriceFen++ },
		"dish":              func(in *Intent) { in.Items[1].DishID = 13 },
		"fee":               func(in *Intent) { in.DeliveryFeeFen++ },
		"packing":           func(in *Intent) { in.Items[0].PackagingFeeFen++ },
		"packings":          func(in *Intent) { in.PackagingFeeFen++ },
		"option":            func(in *Intent) { in.Items[0].OptionIDs[0] = 6 },
		"no opts":           func(in *Intent) { in.Items[0].OptionIDs = nil },
		"location":          func(in *Intent) { in.Address.Location.Lat += 0.000001 },
		"no place":          func(in *Intent) { in.Address.Location = nil },
		"name":              func(in *Intent) { in.Address.Name += "x" },
		"phone":             func(in *Intent) { in.Address.Phone += "1" },
		"detail":            func(in *Intent) { in.Address.Detail += "x" },
		"remark":            func(in *Intent) { in.Remark += "x" },
		"voucher":           func(in *Intent) { in.VoucherID++ },
		"promotion version": func(in *Intent) { in.Promotions[0].Version++ },
		"promotion amount":  func(in *Intent) { in.Promotions[0].AmountFen++ },
		"no promotion":      func(in *Intent) { in.Promotions = nil },
		"discount":          func(in *Intent) { in.DiscountFen++ },
		"fulfilment":        func(in *Intent) { in.Fulfilment = "delivery" },
		"slot":              func(in *Intent) { in.SlotStart += 1800 },
		"no slot":           func(in *Intent) { in.SlotStart = 0 },
		// Length prefixes: moving text between fields changes the bytes.
		"shift": func(in *Intent) { in.Address.Name += "\naddress.phone:0:"; in.Address.Phone = "" },
	}
	for name, mutate := range mutations {
		in := fixedIntent()
		mutate(&in)
		if in.IntentDigest(1) == d {
			t.Errorf("%s: digest unchanged", name)
		}
	}
	if base.IntentDigest(2) == d {
		t.Error("intent sequence does not change the digest")
	}
	same := Intent{
		UserID: 42, MerchantID: 7,
		Items: []IntentItem{
			{DishID: 3, Qty: 1, UnitPriceFen: 3200, PackagingFeeFen: 100, OptionIDs: []int64{4}},
			{DishID: 3, Qty: 1, UnitPriceFen: 3700, PackagingFeeFen: 100, OptionIDs: []int64{5, 31}},
			{DishID: 12, Qty: 1, UnitPriceFen: 1500},
		},
		ItemsTotalFen: 8400, PackagingFeeFen: 200, DeliveryFeeFen: 300, VoucherID: 901, DiscountFen: 800, TotalFen: 8100,
		Promotions: []IntentPromotion{{ID: 77, Version: 3, AmountFen: 300}},
		Address: Address{Name: "Li Lei", Phone: "13800138000", Detail: "Room 1201, Building 5, 88 Keyuan Rd",
			Location: &Location{Lat: 22.54310000004, Lng: 113.9348}},
		Remark:     "少辣 no cilantro",
		Fulfilment: "pickup", SlotStart: 1796522400,
	}
	same.Normalize()
	if same.IntentDigest(1) != d {
		t.Error("the same order typed differently digests differently")
	}
}

func FuzzCanonical(f *testing.F) {
	f.Add("Li Lei", "13800138000", "Room 1", "remark", int64(3), int32(2), int64(3200))
	f.Fuzz(func(t *testing.T, name, phone, detail, remark string, dish int64, qty int32, price int64) {
		in := Intent{UserID: 1, MerchantID: 2, Items: []IntentItem{{DishID: dish, Qty: qty, UnitPriceFen: price}},
			Address: Address{Name: name, Phone: phone, Detail: detail}, Remark: remark}
		in.Normalize()
		a, b := in.Canonical(1), in.Canonical(1)
		if string(a) != string(b) {
			t.Fatal("canonical form is not deterministic")
		}
		// Normalising twice changes nothing.
		again := in
		again.Normalize()
		if string(again.Canonical(1)) != string(a) {
			t.Fatal("normalisation is not idempotent")
		}
		// Any change of a text field changes the encoding.
		other := in
		other.Remark += "x"
		if string(other.Canonical(1)) == string(a) {
			t.Fatal("remark change not encoded")
		}
	})
}
