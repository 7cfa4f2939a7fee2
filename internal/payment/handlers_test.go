package payment

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// A callback's body is read whole up to the limit, whether its length is
// announced or not (chunked); one byte more is refused either way.
func TestCallbackBodyKeepsItsLimit(t *testing.T) {
	t.Parallel()
	const limit = 64
	for _, c := range []struct {
		name      string
		size      int
		announced bool
		wantOK    bool
	}{
		{"announced, under", 10, true, true},
		{"announced, at the limit", limit, true, true},
		{"announced, over", limit + 1, true, false},
		{"chunked, at the limit", limit, false, true},
		{"chunked, over", limit + 1, false, false},
		{"chunked, far over", 10 * limit, false, false},
	} {
		sent := strings.Repeat("x", c.size)
		r := httptest.NewRequest("POST", "/v1/payments/wechat/notify", io.NopCloser(strings.NewReader(sent)))
		r.ContentLength = -1
		if c.announced {
			r.ContentLength = int64(c.size)
		}
		body, ok := callbackBody(httptest.NewRecorder(), r, limit)
		if ok != c.wantOK || (ok && string(body) != sent) {
			t.Errorf("%s: %d bytes read, ok %v; want ok %v and the body whole", c.name, len(body), ok, c.wantOK)
		}
	}
}
