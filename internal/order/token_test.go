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
		Items:     []TokenItem{{DishID: 3, Qty: 2, UnitPriceFen: 3200, Name: "Mapo Tofu"}, {DishID: 12, Qty: 1, UnitPriceFen: 1500, Name: "Rice"}},
		FeeFen:    300, Address: in.Address, Remark: in.Remark}
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
	if got.Intent().IntentDigest(got.Seq).String() != got.Digest {
		t.Error("the token's intent does not digest to its digest")
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
		"wrong version":   "v2" + tok[2:],
		"garbage":         "hello",
		"empty":           "",
	} {
		if _, err := s.Verify(bad); err == nil {
			t.Errorf("%s: verified", name)
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
