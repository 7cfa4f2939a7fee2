package auth_test

import (
	"testing"
	"unicode/utf8"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/testenv"
)

func FuzzLoginRequest(f *testing.F) {
	testenv.FuzzBody(f, []string{`{"code":"abc"}`, `{"code":""}`, `{"code":1}`, `{"code":"abc","x":1}`},
		func(t *testing.T, r auth.LoginRequest) {
			if n := utf8.RuneCountInString(r.Code); n < 1 || n > 128 {
				t.Fatalf("accepted code of %d characters", n)
			}
		})
}
