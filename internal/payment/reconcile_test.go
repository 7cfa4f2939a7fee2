package payment

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/wxsim"
)

// withPlatform gives the fixture's service a client of a platform served
// by h (wrapping the simulator) and returns the number of queries it got.
func (f *fixture) withPlatform(t *testing.T, wrap func(http.Handler) http.Handler) *atomic.Int64 {
	t.Helper()
	mkey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	sim := wxsim.New(testAppID, "secret").WithPayments(wxsim.PayOptions{MchID: testMchID, MerchantKey: &mkey.PublicKey,
		PlatformKey: f.platform, PlatformSerial: testSerial, APIv3Key: f.apiV3Key, Client: http.DefaultClient, Now: time.Now})
	var queries atomic.Int64
	srv := httptest.NewServer(wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v3/pay/transactions/out-trade-no/") {
			queries.Add(1)
		}
		sim.ServeHTTP(w, r)
	})))
	t.Cleanup(srv.Close)
	f.svc.o.Client = NewClient(ClientOptions{Base: srv.URL, Merchant: wxpay.Merchant{MchID: testMchID, Serial: "MERCHANT-1", Key: mkey},
		Platform: f.svc.o.Platform, AppID: testAppID, HTTP: &http.Client{Timeout: time.Second}, Now: time.Now})
	return &queries
}

// latePayments gives n orders waiting for payment a prepaid attempt
// whose callback is late.
func (f *fixture) latePayments(t *testing.T, n int) {
	t.Helper()
	for range n {
		id, _ := f.order(t, statemachine.PendingPayment)
		if _, err := f.pool.Exec(context.Background(), "UPDATE payments SET prepay_id = 'wx' || order_id, created_at = now() - interval '1 hour' WHERE order_id = $1", id); err != nil {
			t.Fatal(err)
		}
	}
}

// A backlog larger than one sweep (attempts nobody paid stay open until
// their deadline) is worked through in turn: the second sweep takes the
// payments the first could not, not the first's again.
func TestSweepTakesTheLeastRecentlyCheckedFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	queries := f.withPlatform(t, func(h http.Handler) http.Handler { return h })
	f.latePayments(t, sweepRows+20)
	w := &reconcileWorker{s: f.svc, after: time.Minute}
	for sweep := 1; sweep <= 2; sweep++ {
		if err := w.Work(t.Context(), nil); err != nil {
			t.Fatalf("sweep %d: %v", sweep, err)
		}
	}
	if n := f.count(t, "SELECT count(*) FROM payments WHERE checked_at IS NULL"); n != 0 {
		t.Errorf("%d late payments never checked after two sweeps of %d", n, sweepRows)
	}
	if n := queries.Load(); n != 2*sweepRows {
		t.Errorf("the platform was asked %d times, want %d", n, 2*sweepRows)
	}
	if n := testutil.ToFloat64(f.svc.sweeps.WithLabelValues("payment", "checked")); n != 2*sweepRows {
		t.Errorf("checked counter %v, want %d", n, 2*sweepRows)
	}
}

// A platform that does not answer neither fails the sweep (a failed sweep
// would be retried beside the next ones until it is a dead job) nor holds
// it past its time: what it could not ask is counted, and asked again by
// the next sweep.
func TestSweepOutlivesAPlatformThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withPlatform(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select { // hangs until the client gives up
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		})
	})
	f.latePayments(t, 3*sweepWorkers)
	w := &reconcileWorker{s: f.svc, after: time.Minute}
	// Time for one round of checks (a second each) but not three.
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := w.Work(ctx, nil); err != nil {
		t.Fatalf("sweep against a silent platform: %v", err)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("sweep took %v, past its deadline", took)
	}
	failed := testutil.ToFloat64(f.svc.sweeps.WithLabelValues("payment", "failed"))
	skipped := testutil.ToFloat64(f.svc.sweeps.WithLabelValues("payment", "skipped"))
	if failed < sweepWorkers || failed+skipped != 3*sweepWorkers {
		t.Errorf("failed %v + skipped %v, want at least %d failed and %d in all", failed, skipped, sweepWorkers, 3*sweepWorkers)
	}
	if n := f.count(t, "SELECT count(*) FROM orders WHERE status <> 'PENDING_PAYMENT'"); n != 0 {
		t.Errorf("%d orders changed on no answer", n)
	}
}
