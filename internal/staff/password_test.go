package staff

import (
	"errors"
	"strings"
	"testing"
)

func TestPasswordHash(t *testing.T) {
	t.Parallel()
	h, err := hashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if h2, _ := hashPassword("correct horse battery"); h2 == h {
		t.Error("two hashes of one password are equal: no salt")
	}
	for _, tc := range []struct {
		name, hash, password string
		ok                   bool
		err                  error
	}{
		{"right", h, "correct horse battery", true, nil},
		{"wrong", h, "correct horse batterY", false, nil},
		{"empty", h, "", false, nil},
		{"not argon2id", strings.Replace(h, "argon2id", "argon2i", 1), "correct horse battery", false, errBadHash},
		{"other version", strings.Replace(h, "v=19", "v=16", 1), "correct horse battery", false, errBadHash},
		{"cost out of range", strings.Replace(h, "m=19456", "m=99999999", 1), "correct horse battery", false, errBadHash},
		{"truncated", h[:len(h)-50], "correct horse battery", false, errBadHash},
	} {
		ok, err := checkPassword(tc.hash, tc.password)
		if ok != tc.ok || !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, %v; want %v, %v", tc.name, ok, err, tc.ok, tc.err)
		}
	}
}
