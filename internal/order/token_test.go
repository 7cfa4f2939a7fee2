package order

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func sampleToken() Token {
	in := fixedIntent()
	return Token{UserID: 42, MerchantID: 7, OrderID: 123456789, Seq: 1, Digest: in.IntentDigest(1).String(),
		ExpiresAt: time.Date(2026, 11, 30, 12, 15, 0, 0, time.UTC).Unix(),
		Items: []TokenItem{
			{DishID: 3, Qty: 1, UnitPriceFen: 3200, Name: "Mapo Tofu", PackagingFeeFen: 100, OptionsVersion: 2,
				Options: []TokenOption{{ID: 4, Group: "Spice", Name: "Mild", DeltaFen: 0}}},
			{DishID: 3, Qty: 1, UnitPriceFen: 3700, Name: "Mapo Tofu", PackagingFeeFen: 100, OptionsVersion: 2,
				Options: []TokenOption{{ID: 31, Group: "Size", Name: "Large", DeltaFen: 300}, {ID: 5, Group: "Spice", Name: "Hot", DeltaFen: 200}}},
			{DishID: 12, Qty: 1, UnitPriceFen: 1500, Name: "Rice", OptionsVersion: 1},
		},
		FeeFen: 300, VoucherID: 901, VoucherFen: 500, VoucherFundedBy: "merchant",
		Promotions: []TokenPromotion{{ID: 77, Version: 3, Kind: "spend_save", Name: "30 off 300", AmountFen: 300, FundedBy: "merchant", Budget: true}},
		Address:    in.Address, Remark: in.Remark,
		Fulfilment: in.Fulfilment, SlotStart: in.SlotStart, SlotEnd: in.SlotStart + 1800, SlotCutoff: in.SlotStart - 3600, TimeZone: "Asia/Shanghai"}
}

func TestTokenRoundTripAndTampering(t *testing.T) {
	t.Parallel()
	s := NewSigner([]byte(strings.Repeat("k", 32)))
	tok, err := s.Sign(sampleToken())
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sampleToken(), got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	in := got.Intent()
	in.Normalize()
	if in.IntentDigest(got.Seq).String() != got.Digest {
		t.Error("the token's intent does not digest to its digest")
	}
	if base := got.Items[1].basePriceFen(); base != 3200 {
		t.Errorf("the large hot tofu's dish price is %d, want 3200 (3700 less its options' 500)", base)
	}

	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	altered := strings.Replace(string(payload), `"p":1500`, `"p":1`, 1)
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(altered)) + "." + parts[2]
	other, _ := NewSigner([]byte(strings.Repeat("x", 32))).Sign(sampleToken())
	for name, bad := range map[string]string{
		"altered payload": forged,
		"other key":       other,
		"no signature":    parts[0] + "." + parts[1],
		"empty signature": parts[0] + "." + parts[1] + ".",
		"wrong version":   "v6" + tok[2:],
		"garbage":         "hello",
		"empty":           "",
	} {
		if _, err := s.Verify(bad); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
	// A genuine token of an earlier form (v1 before options, v2 before
	// vouchers, v3 before promotions, v4 before pickup and slots) is
	// outdated, not invalid (the submit answers 410); the same bytes with a
	// forged MAC stay invalid.
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		signed := v + "." + parts[1]
		old := signed + "." + base64.RawURLEncoding.EncodeToString(s.mac([]byte(signed)))
		if _, err := s.Verify(old); !errors.Is(err, errTokenOutdated) {
			t.Errorf("%s token: %v, want outdated", v, err)
		}
		if _, err := s.Verify(signed + "." + parts[2]); !errors.Is(err, errTokenSignature) {
			t.Errorf("%s token with a v5 MAC: %v, want a bad signature", v, err)
		}
	}
	if !sampleToken().Expired(time.Unix(sampleToken().ExpiresAt, 0)) || sampleToken().Expired(time.Unix(sampleToken().ExpiresAt-1, 0)) {
		t.Error("expiry boundary wrong")
	}
}

func FuzzTokenVerify(f *testing.F) {
	s := NewSigner([]byte(strings.Repeat("k", 32)))
	tok, _ := s.Sign(sampleToken())
	f.Add(tok)
	f.Add("v1..")
	f.Add("v1.e30.")
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := s.Verify(raw)
		if err != nil {
			if !errors.Is(err, errTokenMalformed) && !errors.Is(err, errTokenSignature) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// Only a token we signed verifies: re-signing it gives it back.
		again, err := s.Sign(got)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Verify(again); err != nil {
			t.Fatal(err)
		}
	})
}
