package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// sdkDir is the mini-program SDK's package, from this package's directory.
const sdkDir = "../../clients/miniprogram"

// ordersOfCustomer counts the orders of the customer who logs in with
// the code $1 (wxsim's openid sim-$1).
const ordersOfCustomer = `SELECT count(*) FROM orders o JOIN users u ON u.id = o.user_id WHERE u.openid = 'sim-' || $1`

// The client SDK's tests (clients/miniprogram, Node's test runner) run
// against a live instance of this service: a shop that takes payments
// through wxsim, and a control server through which the tests hold the
// orders table (to make a submit slow) and count a customer's orders in
// the database. The database is asserted here too once they are done:
// every storm gave one order.
func TestClientSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run scripts/dev/sdk.sh (make test does), which installs Debian's nodejs and the SDK's packages")
	}
	tsc := filepath.Join(sdkDir, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatal("the SDK's packages are not installed: run scripts/dev/sdk.sh (make test does)")
	}
	t.Parallel()
	ps := newPayShop(t, map[string]string{
		// A duplicate waits half a second for the first before 409
		// request-in-progress, so the SDK's wait for it is seen soon.
		"TAKEOUT_IDEMPOTENCY_COALESCE_WAIT": "500ms",
	}, 1000, 1, 1000)

	ctl := httptest.NewServer(sdkControl(t, ps))
	t.Cleanup(ctl.Close)
	dishes := make([]string, len(ps.dishes))
	for i, d := range ps.dishes {
		dishes[i] = d.ID
	}
	fixture, _ := json.Marshal(map[string]any{
		"api": ps.apis[0].url, "control": ctl.URL, "wxsim": ps.sim.URL,
		"merchant_id": ps.merchantID, "dishes": dishes,
	})
	fixtureFile := filepath.Join(t.TempDir(), "fixture.json")
	if err := os.WriteFile(fixtureFile, fixture, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, tsc, "-p", "tsconfig.json")
	build.Dir = sdkDir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tsc -p tsconfig.json: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(sdkDir, "dist", "test", "*.test.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no compiled tests in %s/dist/test (%v)", sdkDir, err)
	}
	args := []string{"--test", "--test-concurrency=1", "--test-reporter=spec"}
	for _, f := range files {
		args = append(args, strings.TrimPrefix(f, sdkDir+"/"))
	}
	run := exec.CommandContext(ctx, node, args...)
	run.Dir = sdkDir
	run.Env = append(os.Environ(), "TAKEOUT_SDK_FIXTURE="+fixtureFile, "NO_COLOR=1")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)

	// What the tests' customers did, as the database has it.
	for user, want := range map[string]int{"sdk-storm": 1, "sdk-killed": 1, "sdk-slow": 1, "sdk-flow": 1, "sdk-cancel": 1, "sdk-wx": 1, "sdk-second": 0} {
		if n := ps.count(t, ordersOfCustomer, user); n != want {
			t.Errorf("%s has %d orders in the database, want %d", user, n, want)
		}
	}
}

// sdkControl serves the SDK tests' hooks into the database: POST /hold
// takes the orders table (no order can be written until POST /release
// or 10 s), GET /orders?user=CODE counts the orders of the customer who
// logs in with CODE.
func sdkControl(t *testing.T, ps *payShop) http.Handler {
	var mu sync.Mutex
	var held pgx.Tx
	release := func() {
		mu.Lock()
		defer mu.Unlock()
		if held != nil {
			_ = held.Rollback(context.Background())
			held = nil
		}
	}
	t.Cleanup(release)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hold", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if held != nil {
			http.Error(w, "held already", http.StatusConflict)
			return
		}
		tx, err := ps.pool.Begin(context.Background())
		if err == nil {
			if _, err = tx.Exec(r.Context(), "LOCK TABLE orders IN EXCLUSIVE MODE"); err != nil {
				_ = tx.Rollback(context.Background())
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		held = tx
		time.AfterFunc(10*time.Second, release)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, r *http.Request) {
		release()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		user := r.URL.Query().Get("user")
		var n int
		err := ps.pool.QueryRow(r.Context(), ordersOfCustomer, user).Scan(&n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int{"orders": n})
	})
	return mux
}
