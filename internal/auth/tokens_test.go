package auth_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/auth"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	userKey, staffKey := []byte(strings.Repeat("u", 32)), []byte(strings.Repeat("s", 32))
	tokens := auth.NewTokens(userKey, staffKey, time.Hour, clock)

	userTok, exp, err := tokens.IssueUser(42)
	if err != nil || !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("IssueUser: %v, expires %v", err, exp)
	}
	if id, err := tokens.VerifyUser(userTok); err != nil || id != 42 {
		t.Fatalf("VerifyUser = %d, %v", id, err)
	}
	staffTok, _, err := tokens.IssueStaff("ops", auth.Role{MerchantID: 7}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := tokens.VerifyStaff(staffTok); err != nil || s.Role.MerchantID != 7 || s.Subject != "ops" || !s.CanManage(7) || s.CanManage(8) {
		t.Fatalf("VerifyStaff = %+v, %v", s, err)
	}

	later := auth.NewTokens(userKey, staffKey, time.Hour, func() time.Time { return now.Add(time.Hour + time.Second) })
	otherKeys := auth.NewTokens([]byte(strings.Repeat("x", 32)), []byte(strings.Repeat("y", 32)), time.Hour, clock)
	noneAlg := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + strings.Split(userTok, ".")[1] + "."

	tests := []struct {
		name   string
		verify func() error
	}{
		{"user token as staff", func() error { _, err := tokens.VerifyStaff(userTok); return err }},
		{"staff token as user", func() error { _, err := tokens.VerifyUser(staffTok); return err }},
		{"expired user token", func() error { _, err := later.VerifyUser(userTok); return err }},
		{"expired staff token", func() error { _, err := later.VerifyStaff(staffTok); return err }},
		{"other key", func() error { _, err := otherKeys.VerifyUser(userTok); return err }},
		{"alg none", func() error { _, err := tokens.VerifyUser(noneAlg); return err }},
		{"tampered", func() error { _, err := tokens.VerifyUser(userTok[:len(userTok)-2] + "xx"); return err }},
		{"garbage", func() error { _, err := tokens.VerifyUser("not a token"); return err }},
		{"empty", func() error { _, err := tokens.VerifyStaff(""); return err }},
	}
	for _, tt := range tests {
		if err := tt.verify(); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", tt.name, err)
		}
	}
}

func TestParseRole(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"admin", "merchant:1", "merchant:9223372036854775807"} {
		r, err := auth.ParseRole(s)
		if err != nil || r.String() != s {
			t.Errorf("ParseRole(%q) = %v, %v", s, r, err)
		}
	}
	for _, s := range []string{"", "Admin", "merchant:", "merchant:0", "merchant:-1", "merchant:x", "merchant:1:2", "user"} {
		if _, err := auth.ParseRole(s); err == nil {
			t.Errorf("ParseRole(%q) accepted", s)
		}
	}
}

// A remembered session token still expires on time, and only the exact
// string is remembered: an altered copy is verified, and refused.
func TestRememberedSessionExpires(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	tokens := auth.NewTokens([]byte("user-key-0123456789abcdef0123456"), []byte("staff-key-0123456789abcdef012345"), time.Hour, clock)
	tok, _, err := tokens.IssueUser(42)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is served from memory
		if id, err := tokens.VerifyUser(tok); err != nil || id != 42 {
			t.Fatalf("fresh token: %d %v", id, err)
		}
	}
	if _, err := tokens.VerifyUser(tok[:len(tok)-2] + "xx"); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("altered token: %v", err)
	}
	now = now.Add(61 * time.Minute)
	if _, err := tokens.VerifyUser(tok); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("expired remembered token: %v, want invalid", err)
	}
}
