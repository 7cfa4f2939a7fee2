package idempotency_test

import (
	"strings"
	"testing"

	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/problem"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	ok := []struct{ raw, want string }{
		{"abc", "abc"},
		{`"abc"`, "abc"},
		{` "550e8400-e29b-41d4-a716-446655440000" `, "550e8400-e29b-41d4-a716-446655440000"},
		{`"a\"b\\c"`, `a"b\c`},
		{strings.Repeat("k", 255), strings.Repeat("k", 255)},
		{`"` + strings.Repeat("k", 255) + `"`, strings.Repeat("k", 255)},
		{"a b", "a b"},
	}
	for _, tt := range ok {
		got, err := idempotency.ParseKey(tt.raw)
		if err != nil || got != tt.want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", tt.raw, got, err, tt.want)
		}
	}
	bad := []struct {
		raw  string
		want problem.Type
	}{
		{"", problem.IdempotencyKeyMissing},
		{"   ", problem.IdempotencyKeyMissing},
		{`""`, problem.InvalidRequest},
		{`"abc`, problem.InvalidRequest},
		{`"a"b"`, problem.InvalidRequest},
		{`"a\nb"`, problem.InvalidRequest},
		{strings.Repeat("k", 256), problem.InvalidRequest},
		{"ключ", problem.InvalidRequest},
		{"a\x01b", problem.InvalidRequest},
	}
	for _, tt := range bad {
		_, err := idempotency.ParseKey(tt.raw)
		p, isProblem := problem.As(err)
		if !isProblem || p.Type != tt.want {
			t.Errorf("ParseKey(%q) = %v, want %s", tt.raw, err, tt.want.Slug)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		k, err := idempotency.ParseKey(raw)
		if err != nil {
			if _, ok := problem.As(err); !ok {
				t.Fatalf("error %v is not a problem", err)
			}
			return
		}
		if len(k) < 1 || len(k) > 255 {
			t.Fatalf("accepted a key of %d bytes", len(k))
		}
	})
}
