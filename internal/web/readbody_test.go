package web

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readBody reads what io.ReadAll reads, and fails where it fails,
// whatever length the request announced.
func TestReadBodyMatchesReadAll(t *testing.T) {
	body := `{"confirm_token":"v1.eyJ4IjoxfQ.c2ln"}`
	errBroken := errors.New("connection reset")
	readers := map[string]func() io.Reader{
		"whole":         func() io.Reader { return strings.NewReader(body) },
		"byte by byte":  func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
		"eof with data": func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
		"broken":        func() io.Reader { return io.MultiReader(strings.NewReader(body[:10]), iotest.ErrReader(errBroken)) },
		"empty":         func() io.Reader { return strings.NewReader("") },
	}
	n := int64(len(body))
	for name, reader := range readers {
		for _, announced := range []int64{-1, 0, 1, n - 1, n, n + 1, 10 * n, maxSizedBody + 1} {
			want, wantErr := io.ReadAll(reader())
			got, err := readBody(reader(), announced)
			if string(got) != string(want) || !errors.Is(err, wantErr) {
				t.Errorf("%s, announced %d: read %q, %v; io.ReadAll %q, %v", name, announced, got, err, want, wantErr)
			}
		}
	}
}
