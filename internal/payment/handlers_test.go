package payment

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/web"
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

// A callback that meets PostgreSQL down is answered 503 with Retry-After,
// like every other route, and logged as a warning: nothing was written,
// and the platform's retry is the remedy. Then, with PostgreSQL back, the
// same delivery is applied once.
func TestNotifyMeetingTheDatabaseDownIs503(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, no := f.order(t, statemachine.PendingPayment)
	h, body := f.notification(t, "EV-DOWN", paid(no, "4200000400", 1200), time.Now())
	deliver := func(svc *Service) *httptest.ResponseRecorder {
		w, logs := deliverV3(context.Background(), svc, h, body)
		if strings.Contains(logs, "level=ERROR") {
			t.Errorf("logged at ERROR: %s", logs)
		}
		return w
	}

	down, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/takeout?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	unreachable := f.newServiceWith(t, func(o *Options) { o.Pool = down })
	w := deliver(unreachable)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("database down: %d (Retry-After %q) %s, want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if got := f.orderStatus(t, id); got != statemachine.PendingPayment {
		t.Fatalf("order %s after a refused delivery, want PENDING_PAYMENT", got)
	}
	if w := deliver(f.svc); w.Code != http.StatusNoContent {
		t.Fatalf("the retry: %d %s, want 204", w.Code, w.Body)
	}
	if got := f.orderStatus(t, id); got != statemachine.Paid {
		t.Fatalf("order %s after the retry, want PAID", got)
	}
}

// deliverV3 sends a v3 notification to HandleNotifyV3 with ctx as the
// request's context (as the server's middleware sets it up), and returns
// the answer and what the request's logger wrote.
func deliverV3(ctx context.Context, svc *Service, h wxpay.SignedHeaders, body []byte) (*httptest.ResponseRecorder, string) {
	r := httptest.NewRequestWithContext(ctx, "POST", "/v1/payments/wechat/notify", bytes.NewReader(body))
	r.Header.Set("Wechatpay-Timestamp", h.Timestamp)
	r.Header.Set("Wechatpay-Nonce", h.Nonce)
	r.Header.Set("Wechatpay-Serial", h.Serial)
	r.Header.Set("Wechatpay-Signature", h.Signature)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	r = r.WithContext(web.WithRequest(r.Context(), "req-1", logger, db.Unavailable))
	w := httptest.NewRecorder()
	HandleNotifyV3(svc, 1<<16).ServeHTTP(w, r)
	return w, logs.String()
}

// A delivery the platform hangs up on before the answer (its own timeout)
// stops where it was: nothing is written, the answer is 503 for whoever
// still listens, and it is logged as expected, not as an error; the next
// delivery applies it. (A payment of a cancelled order: the one
// statement declines it, and the transaction that would refund it never
// begins.)
func TestNotifyTheClientAbandonedIsNotAnError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, no := f.order(t, statemachine.Cancelled)
	h, body := f.notification(t, "EV-GONE", paid(no, "4200000401", 1200), time.Now())
	refunds := func() int { return f.count(t, `SELECT count(*) FROM refunds WHERE order_id = $1`, id) }
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	w, logs := deliverV3(gone, f.svc, h, body)
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("abandoned delivery: %d %s, want 503", w.Code, w.Body)
	}
	if strings.Contains(logs, "level=ERROR") {
		t.Errorf("an abandoned delivery logged at ERROR: %s", logs)
	}
	if n := refunds(); n != 0 {
		t.Fatalf("%d refunds after an abandoned delivery, want 0", n)
	}
	if w, _ := deliverV3(context.Background(), f.svc, h, body); w.Code != http.StatusNoContent {
		t.Fatalf("the next delivery: %d %s, want 204", w.Code, w.Body)
	}
	if n := refunds(); n != 1 {
		t.Fatalf("%d refunds after the next delivery, want 1: the late payment is given back", n)
	}
}
