package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/catalog"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/testenv"
)

// shop is a stack with a merchant, its dishes, and running instances.
type shop struct {
	*stack
	apis       []*instance
	admin      string
	merchantID string
	dishes     []catalog.Dish
}

func newShop(t testing.TB, instances int, env map[string]string, stocks ...int32) *shop {
	t.Helper()
	sh := &shop{stack: newStack(t)}
	for range instances {
		sh.apis = append(sh.apis, sh.start(t, env))
	}
	sh.admin = sh.staffToken(t, "admin")
	sh.merchantID = createMerchant(t, sh.stack, sh.apis[0], "Order Kitchen")
	for i, stock := range stocks {
		sh.dishes = append(sh.dishes, createDish(t, sh.stack, sh.apis[0], sh.admin, sh.merchantID, fmt.Sprintf("Dish %d", i), int64(1000*(i+1)), stock))
	}
	return sh
}

func (sh *shop) login(t testing.TB, code string) string {
	t.Helper()
	var l struct {
		Token string `json:"token"`
	}
	r := sh.do(t, sh.apis[0], "POST", "/v1/auth/wx-login", "", map[string]string{"code": code})
	if r.status != 200 {
		t.Fatalf("login %s: %d %s", code, r.status, r.body)
	}
	r.json(t, &l)
	return l.Token
}

func (sh *shop) cart(qty ...int32) map[string]any {
	var items []map[string]any
	for i, q := range qty {
		if q > 0 {
			items = append(items, map[string]any{"dish_id": sh.dishes[i].ID, "qty": q})
		}
	}
	return map[string]any{
		"merchant_id": sh.merchantID,
		"items":       items,
		"address":     map[string]string{"name": "Han Meimei", "phone": "13900139000", "detail": "Unit 3, 9 Binhai Ave"},
		"remark":      "ring twice",
	}
}

func (sh *shop) confirm(t testing.TB, api *instance, user string, cart map[string]any) order.ConfirmResponse {
	t.Helper()
	r := sh.do(t, api, "POST", "/v1/orders/confirm", user, cart)
	if r.status != 200 {
		t.Fatalf("confirm: %d %s", r.status, r.body)
	}
	var c order.ConfirmResponse
	r.json(t, &c)
	return c
}

func (sh *shop) submit(t *testing.T, api *instance, user, key, token string) response {
	t.Helper()
	req, err := http.NewRequest("POST", api.url+"/v1/orders", strings.NewReader(fmt.Sprintf(`{"confirm_token":%q}`, token)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+user)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return sh.send(t, req)
}

func (sh *shop) send(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := sh.client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", req.Method, req.URL.Path, err)
		return response{}
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: buf.Bytes()}
}

// submitUntilAnswered retries 409 request-in-progress answers, and 503s
// (a bounded wait ran out on a loaded machine: nothing was committed), as
// a client honouring Retry-After would (faster, for the test).
func (sh *shop) submitUntilAnswered(t *testing.T, api *instance, user, key, token string) response {
	t.Helper()
	for {
		r := sh.submit(t, api, user, key, token)
		if (r.status != 409 || r.problemType() != "request-in-progress") && r.status != 503 {
			return r
		}
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%d %s without Retry-After", r.status, r.problemType())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (sh *shop) stock(t *testing.T, dish int) int {
	t.Helper()
	return sh.count(t, "SELECT stock FROM dishes_with_stock WHERE id = $1", sh.dishes[dish].ID)
}

func placedOrder(t *testing.T, r response) order.Placed {
	t.Helper()
	var p order.Placed
	r.json(t, &p)
	return p
}

// Each row of the contract's table of answers.
func TestSubmitAnswers(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10, 10)
	api := sh.apis[0]
	alice, bob := sh.login(t, "alice"), sh.login(t, "bob")

	c := sh.confirm(t, api, alice, sh.cart(2, 1))
	if c.Duplicate || c.TotalFen != 2*1000+2000+500 || len(c.Digest) != 64 {
		t.Fatalf("confirm: %+v", c)
	}
	// Confirm writes nothing.
	if n := sh.count(t, "SELECT count(*) FROM orders"); n != 0 {
		t.Fatalf("confirm wrote %d orders", n)
	}

	t.Run("missing key", func(t *testing.T) {
		r := sh.submit(t, api, alice, "", c.ConfirmToken)
		if r.status != 400 || r.problemType() != "idempotency-key-missing" {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
	t.Run("malformed key", func(t *testing.T) {
		r := sh.submit(t, api, alice, strings.Repeat("k", 256), c.ConfirmToken)
		if r.status != 400 || r.problemType() != "invalid-request" {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
	t.Run("tampered token", func(t *testing.T) {
		r := sh.submit(t, api, alice, "k-tampered", tamper(c.ConfirmToken))
		if r.status != 401 || r.problemType() != "confirm-token-invalid" {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
	t.Run("another user's token", func(t *testing.T) {
		r := sh.submit(t, api, bob, "k-bob", c.ConfirmToken)
		if r.status != 403 || r.problemType() != "confirm-token-forbidden" {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
	if n := sh.count(t, "SELECT count(*) FROM orders"); n != 0 {
		t.Fatalf("refused submits wrote %d orders", n)
	}

	first := sh.submit(t, api, alice, `"key-1"`, c.ConfirmToken)
	if first.status != 201 || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first submit: %d %s", first.status, first.body)
	}
	placed := placedOrder(t, first)
	if placed.ID != c.OrderID || placed.Status != "PENDING_PAYMENT" || placed.TotalFen != c.TotalFen || placed.Duplicate {
		t.Errorf("placed %+v, confirm %+v", placed, c)
	}
	if first.header.Get("Location") != "/v1/orders/"+placed.ID {
		t.Errorf("Location %q", first.header.Get("Location"))
	}

	t.Run("same key and token again", func(t *testing.T) {
		r := sh.submit(t, api, alice, "key-1", c.ConfirmToken) // bare form of the same key
		if r.status != 201 || !bytes.Equal(r.body, first.body) || r.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay: %d replayed=%q\n%s\nwant\n%s", r.status, r.header.Get("Idempotent-Replayed"), r.body, first.body)
		}
		// The answer's header fields come back too (L1 keeps them packed).
		for _, h := range []string{"Location", "Content-Type"} {
			if got, want := r.header.Get(h), first.header.Get(h); got != want {
				t.Errorf("replayed %s %q, want %q", h, got, want)
			}
		}
	})
	t.Run("same key, different body", func(t *testing.T) {
		other := sh.confirm(t, api, alice, sh.cart(1, 0))
		r := sh.submit(t, api, alice, "key-1", other.ConfirmToken)
		if r.status != 422 || r.problemType() != "idempotency-key-mismatch" {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
	t.Run("same token, new key", func(t *testing.T) {
		r := sh.submit(t, api, alice, "key-2", c.ConfirmToken)
		p := placedOrder(t, r)
		if r.status != 200 || !p.Duplicate || p.ID != placed.ID {
			t.Errorf("%d %s", r.status, r.body)
		}
		again := sh.submit(t, api, alice, "key-2", c.ConfirmToken)
		if again.status != 200 || !bytes.Equal(again.body, r.body) || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay of the duplicate answer: %d %s", again.status, again.body)
		}
	})
	t.Run("same cart confirmed again", func(t *testing.T) {
		again := sh.confirm(t, api, alice, sh.cart(2, 1))
		if !again.Duplicate || again.OrderID != placed.ID || again.Digest != c.Digest {
			t.Errorf("confirm after placing: %+v", again)
		}
		cart := sh.cart(2, 1)
		cart["repeat"] = true
		repeat := sh.confirm(t, api, alice, cart)
		if repeat.Duplicate || repeat.OrderID == placed.ID || repeat.Digest == c.Digest {
			t.Errorf("repeat confirm: %+v", repeat)
		}
		r := sh.submit(t, api, alice, "key-repeat", repeat.ConfirmToken)
		if r.status != 201 || placedOrder(t, r).ID != repeat.OrderID {
			t.Errorf("repeat submit: %d %s", r.status, r.body)
		}
	})
	t.Run("expired token", func(t *testing.T) {
		signer := order.NewSigner([]byte(sh.env["TAKEOUT_CONFIRM_SECRET"]))
		tok, err := signer.Verify(sh.confirm(t, api, alice, sh.cart(0, 1)).ConfirmToken)
		if err != nil {
			t.Fatal(err)
		}
		tok.ExpiresAt = time.Now().Add(-time.Minute).Unix()
		expired, _ := signer.Sign(tok)
		r := sh.submit(t, api, alice, "key-expired", expired)
		if r.status != 410 || r.problemType() != "confirm-token-expired" {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
	t.Run("price changed since confirm", func(t *testing.T) {
		stale := sh.confirm(t, api, alice, sh.cart(0, 3))
		d := sh.dishes[1]
		if r := sh.do(t, api, "PATCH", "/admin/v1/dishes/"+d.ID, sh.admin, map[string]any{"version": d.Version, "price_fen": 2222}); r.status != 200 {
			t.Fatalf("price change: %d %s", r.status, r.body)
		}
		before := sh.stock(t, 1)
		r := sh.submit(t, api, alice, "key-stale", stale.ConfirmToken)
		if r.status != 409 || r.problemType() != "quote-changed" {
			t.Errorf("%d %s", r.status, r.body)
		}
		if sh.stock(t, 1) != before {
			t.Error("stock changed")
		}
	})
	t.Run("stock short", func(t *testing.T) {
		short := sh.confirm(t, api, alice, sh.cart(3, 0))
		d := sh.dishes[0]
		var cur catalog.Dish
		sh.do(t, api, "GET", "/admin/v1/dishes/"+d.ID, sh.admin, nil).json(t, &cur)
		// Two for sale: on hand is what open orders hold plus two.
		sh.do(t, api, "PUT", "/admin/v1/dishes/"+d.ID+"/stock", sh.admin, map[string]any{"on_hand": *cur.Held + 2})
		orders := sh.count(t, "SELECT count(*) FROM orders")
		r := sh.submit(t, api, alice, "key-short", short.ConfirmToken)
		var p struct {
			Dishes []struct {
				DishID    string `json:"dish_id"`
				Requested int    `json:"requested"`
				Available int    `json:"available"`
			} `json:"dishes"`
		}
		r.json(t, &p)
		if r.status != 409 || r.problemType() != "out-of-stock" || len(p.Dishes) != 1 || p.Dishes[0].DishID != d.ID || p.Dishes[0].Available != 2 {
			t.Errorf("%d %s", r.status, r.body)
		}
		if sh.stock(t, 0) != 2 || sh.count(t, "SELECT count(*) FROM orders") != orders {
			t.Error("a refused order reserved stock or wrote an order")
		}
	})
	// Every placed order holds exactly its reservations, and its first
	// history row.
	if n := sh.count(t, `SELECT count(*) FROM orders o WHERE
		(SELECT count(*) FROM order_status_history h WHERE h.order_id = o.id) <> 1 OR
		(SELECT coalesce(sum(qty), 0) FROM stock_reservations r WHERE r.order_id = o.id) <>
		(SELECT sum(qty) FROM order_items i WHERE i.order_id = o.id)`); n != 0 {
		t.Errorf("%d orders with wrong history or reservations", n)
	}
	// Placing writes no job: the sweep queues one only once an order is
	// unpaid past its deadline, 15 minutes away here.
	if n := sh.count(t, "SELECT count(*) FROM river_job WHERE kind = 'order.payment_timeout'"); n != 0 {
		t.Errorf("%d payment-timeout jobs before any deadline, want none", n)
	}
}

// storm fires n identical submits (one key, one token) spread over the
// instances, retrying in-progress answers, and returns every final answer.
func (sh *shop) storm(t *testing.T, apis []*instance, n int, user, key, token string) []response {
	t.Helper()
	out := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = sh.submitUntilAnswered(t, apis[i%len(apis)], user, key, token) })
	}
	wg.Wait()
	return out
}

// checkOneOrder asserts that the storm placed exactly one order, took its
// stock once, and that every answer is the original body.
func (sh *shop) checkOneOrder(t *testing.T, answers []response, stockBefore, units int) {
	t.Helper()
	var original []byte
	fresh := 0
	for _, r := range answers {
		if r.status != 201 {
			t.Fatalf("answer %d %s", r.status, r.body)
		}
		if r.header.Get("Idempotent-Replayed") != "true" {
			fresh++
		}
		if original == nil {
			original = r.body
		} else if !bytes.Equal(r.body, original) {
			t.Fatalf("answers differ:\n%s\n%s", r.body, original)
		}
	}
	if fresh != 1 {
		t.Errorf("%d answers not marked as replays, want 1", fresh)
	}
	if n := sh.count(t, "SELECT count(*) FROM orders"); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
	if got := sh.stock(t, 0); got != stockBefore-units {
		t.Errorf("stock %d, want %d", got, stockBefore-units)
	}
	if n := sh.count(t, "SELECT count(*) FROM stock_reservations"); n != 1 {
		t.Errorf("%d reservations, want 1", n)
	}
}

// 200 concurrent identical submits over two instances.
func TestConcurrentIdenticalSubmits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		options bool // the dish on two lines, with different options
	}{
		{"with redis", nil, false},
		{"redis unreachable", map[string]string{"TAKEOUT_REDIS_URL": "redis://127.0.0.1:1/0"}, false},
		{"options, with redis", nil, true},
		{"options, redis unreachable", map[string]string{"TAKEOUT_REDIS_URL": "redis://127.0.0.1:1/0"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sh := newShop(t, 2, tt.env, 50)
			user := sh.login(t, "storm")
			cart, units := sh.cart(1), 1
			if tt.options {
				cart, units = sh.optionsCart(t), 2
			}
			c := sh.confirm(t, sh.apis[0], user, cart)
			answers := sh.storm(t, sh.apis, 200, user, "storm-key", c.ConfirmToken)
			sh.checkOneOrder(t, answers, 50, units)
			if n := sh.count(t, "SELECT count(*) FROM order_items"); n != len(cart["items"].([]map[string]any)) {
				t.Errorf("%d order lines, want %d", n, len(cart["items"].([]map[string]any)))
			}
		})
	}
}

// Redis loses everything between two waves: PostgreSQL still answers with
// the original, and a fresh instance (empty L1) agrees.
func TestSubmitsAcrossRedisFlush(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 50)
	user := sh.login(t, "flush")
	c := sh.confirm(t, sh.apis[0], user, sh.cart(1))
	wave1 := sh.storm(t, sh.apis, 100, user, "flush-key", c.ConfirmToken)

	rds := sh.redis.Conn(t)
	keys, err := rds.Client.Keys(context.Background(), sh.redis.Prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("wave 1 stored nothing in Redis")
	}
	if err := rds.Client.Del(context.Background(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
	fresh := sh.start(t, nil)
	wave2 := sh.storm(t, append(sh.apis, fresh), 100, user, "flush-key", c.ConfirmToken)
	sh.checkOneOrder(t, append(wave1, wave2...), 50, 1)
}

// The app lost the answer and retried from scratch: one token, 50 keys.
func TestSameTokenManyKeys(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 50)
	user := sh.login(t, "many-keys")
	c := sh.confirm(t, sh.apis[0], user, sh.cart(1))
	answers := make([]response, 50)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			answers[i] = sh.submitUntilAnswered(t, sh.apis[i%2], user, fmt.Sprintf("key-%d", i), c.ConfirmToken)
		})
	}
	wg.Wait()
	created := 0
	for _, r := range answers {
		p := placedOrder(t, r)
		switch {
		case r.status == 201 && !p.Duplicate:
			created++
		case r.status == 200 && p.Duplicate:
		default:
			t.Errorf("answer %d %s", r.status, r.body)
		}
		if p.ID != c.OrderID {
			t.Errorf("order %s, want %s", p.ID, c.OrderID)
		}
	}
	if created != 1 || sh.count(t, "SELECT count(*) FROM orders") != 1 || sh.stock(t, 0) != 49 {
		t.Errorf("created %d, orders %d, stock %d", created, sh.count(t, "SELECT count(*) FROM orders"), sh.stock(t, 0))
	}
}

// 300 users buy a dish with stock 100 at once, with one option set or
// another: exactly 100 orders.
func TestHotDishNeverOversells(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 100)
	const buyers = 300
	tokens := make([]string, buyers)
	users := make([]string, buyers)
	choices := sh.giveOptions(t, 0)
	for i := range buyers {
		users[i] = sh.login(t, fmt.Sprintf("buyer-%d", i))
		cart := sh.cart(1)
		options := []string{choices["Regular"]}
		if i%2 == 1 { // one stock for every way of ordering the dish
			options = []string{choices["Large"], choices["Egg"]}
		}
		cart["items"].([]map[string]any)[0]["options"] = options
		tokens[i] = sh.confirm(t, sh.apis[i%2], users[i], cart).ConfirmToken
	}
	answers := make([]response, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() { answers[i] = sh.submitUntilAnswered(t, sh.apis[i%2], users[i], "buy", tokens[i]) })
	}
	wg.Wait()
	placed, short := 0, 0
	for _, r := range answers {
		switch {
		case r.status == 201:
			placed++
		case r.status == 409 && r.problemType() == "out-of-stock":
			short++
		default:
			t.Errorf("answer %d %s", r.status, r.body)
		}
	}
	if placed != 100 || short != 200 {
		t.Errorf("%d placed, %d out of stock; want 100 and 200", placed, short)
	}
	if n := sh.count(t, "SELECT count(*) FROM orders"); n != 100 {
		t.Errorf("%d orders", n)
	}
	if s := sh.stock(t, 0); s != 0 {
		t.Errorf("stock %d, want 0", s)
	}
	if n := sh.count(t, "SELECT coalesce(sum(qty), 0) FROM stock_reservations"); n != 100 {
		t.Errorf("%d units reserved, want 100", n)
	}
}

// A submit that fails after its claim (stock short) releases the key: the
// same key succeeds once stock is back.
func TestFailedSubmitReleasesClaim(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 1)
	api := sh.apis[0]
	user := sh.login(t, "retry")
	c := sh.confirm(t, api, user, sh.cart(1))
	d := sh.dishes[0]
	sh.do(t, api, "PUT", "/admin/v1/dishes/"+d.ID+"/stock", sh.admin, map[string]any{"on_hand": 0})
	if r := sh.submit(t, api, user, "k", c.ConfirmToken); r.status != 409 || r.problemType() != "out-of-stock" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	sh.do(t, api, "PUT", "/admin/v1/dishes/"+d.ID+"/stock", sh.admin, map[string]any{"on_hand": 5})
	r := sh.submit(t, api, user, "k", c.ConfirmToken)
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after restock: %d %s", r.status, r.body)
	}
	if sh.count(t, "SELECT count(*) FROM orders") != 1 || sh.stock(t, 0) != 4 {
		t.Error("retry did not place exactly one order")
	}
}

// A submit whose transaction is cut off (the client gives up, or its
// database connection is killed) leaves no partial order and no lost
// stock; the retry places it once.
func TestCutOffTransaction(t *testing.T) {
	t.Parallel()
	for _, cut := range []string{"client gives up", "connection killed"} {
		t.Run(cut, func(t *testing.T) {
			t.Parallel()
			sh := newShop(t, 1, nil, 5)
			api := sh.apis[0]
			user := sh.login(t, "cut")
			c := sh.confirm(t, api, user, sh.cart(1))

			// Hold the dish row so that the submit's stock update waits.
			pool := testenv.Pool(t, sh.dbURL)
			ctx := context.Background()
			blocker, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := blocker.Exec(ctx, "SELECT 1 FROM dish_stock WHERE dish_id = $1 FOR UPDATE", sh.dishes[0].ID); err != nil {
				t.Fatal(err)
			}
			done := make(chan response, 1)
			reqCtx, cancel := context.WithCancel(ctx)
			go func() {
				req, _ := http.NewRequestWithContext(reqCtx, "POST", api.url+"/v1/orders", strings.NewReader(fmt.Sprintf(`{"confirm_token":%q}`, c.ConfirmToken)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+user)
				req.Header.Set("Idempotency-Key", "cut-key")
				resp, err := sh.client.Do(req) // the answer checked against the contract
				if err != nil {
					done <- response{}
					return
				}
				defer resp.Body.Close()
				done <- response{status: resp.StatusCode, header: resp.Header}
			}()
			// Wait until the submit is stuck on the lock, inside its transaction.
			deadline := time.Now().Add(10 * time.Second)
			for sh.count(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'takeout' AND wait_event_type = 'Lock'") == 0 {
				if time.Now().After(deadline) {
					t.Fatal("submit never waited on the lock")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if cut == "client gives up" {
				cancel()
			} else {
				sh.count(t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'takeout' AND wait_event_type = 'Lock'")
			}
			r := <-done
			cancel()
			// The database connection died under it: nothing committed, so
			// 503 with Retry-After tells the client to retry the same key.
			if cut == "connection killed" && (r.status != 503 || r.header.Get("Retry-After") == "") {
				t.Errorf("killed submit answered %d (Retry-After %q), want 503 with Retry-After", r.status, r.header.Get("Retry-After"))
			}
			// The server side finishes its rollback shortly after.
			time.Sleep(200 * time.Millisecond)
			if err := blocker.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if n := sh.count(t, "SELECT count(*) FROM orders"); n != 0 {
				t.Fatalf("%d orders after the cut", n)
			}
			if sh.stock(t, 0) != 5 || sh.count(t, "SELECT count(*) FROM stock_reservations") != 0 {
				t.Fatal("stock or reservations changed by a cut-off submit")
			}
			retry := sh.submitUntilAnswered(t, api, user, "cut-key", c.ConfirmToken)
			if retry.status != 201 || sh.count(t, "SELECT count(*) FROM orders") != 1 || sh.stock(t, 0) != 4 {
				t.Errorf("retry: %d %s; stock %d", retry.status, retry.body, sh.stock(t, 0))
			}
		})
	}
}

func TestOrderReads(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 100)
	api := sh.apis[0]
	alice, bob := sh.login(t, "reader-a"), sh.login(t, "reader-b")
	var ids []string
	for i := range 5 {
		cart := sh.cart(int32(i + 1))
		c := sh.confirm(t, api, alice, cart)
		r := sh.submit(t, api, alice, fmt.Sprintf("read-%d", i), c.ConfirmToken)
		if r.status != 201 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		ids = append(ids, c.OrderID)
	}
	var got order.Order
	r := sh.do(t, api, "GET", "/v1/orders/"+ids[0], alice, nil)
	r.json(t, &got)
	if r.status != 200 || got.ID != ids[0] || len(got.Items) != 1 || got.Items[0].Qty != 1 || got.Address.Name != "Han Meimei" {
		t.Errorf("get: %d %s", r.status, r.body)
	}
	if r := sh.do(t, api, "GET", "/v1/orders/"+ids[0], bob, nil); r.status != 404 {
		t.Errorf("another user's order: %d", r.status)
	}
	if r := sh.do(t, api, "GET", "/v1/orders/"+ids[0], "", nil); r.status != 401 {
		t.Errorf("anonymous: %d", r.status)
	}
	// Pages of two, newest first.
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		var page order.OrderPage
		r := sh.do(t, api, "GET", "/v1/orders?limit=2&cursor="+cursor, alice, nil)
		r.json(t, &page)
		for _, o := range page.Orders {
			seen = append(seen, o.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("pages %v, want %v", seen, want)
	}
	var empty order.OrderPage
	sh.do(t, api, "GET", "/v1/orders", bob, nil).json(t, &empty)
	if len(empty.Orders) != 0 || empty.NextCursor != nil {
		t.Errorf("bob's orders: %+v", empty)
	}
	for _, bad := range []string{"?limit=0", "?limit=101", "?limit=x", "?cursor=%21%21"} {
		if r := sh.do(t, api, "GET", "/v1/orders"+bad, alice, nil); r.status != 400 {
			t.Errorf("%s: %d", bad, r.status)
		}
	}
	_ = json.Valid
}

// An operator inspects a key, then purges it everywhere: the other
// instance's L1 forgets it too, so the next submit with the key runs
// afresh (and, the order existing, answers 200 duplicate).
func TestInspectAndPurgeIdempotencyKey(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 10)
	user := sh.login(t, "purge")
	c := sh.confirm(t, sh.apis[0], user, sh.cart(1))
	first := sh.submit(t, sh.apis[0], user, "purge/me", c.ConfirmToken)
	if first.status != 201 {
		t.Fatalf("%d %s", first.status, first.body)
	}
	// Warm instance 2's L1 with the replay.
	if r := sh.submit(t, sh.apis[1], user, "purge/me", c.ConfirmToken); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("not a replay: %d", r.status)
	}
	uid := placedOrder(t, first).UserID
	path := "/admin/v1/idempotency-keys/" + uid + "/purge%2Fme"
	var in struct {
		State          string `json:"state"`
		OrderID        string `json:"order_id"`
		ResponseStatus int    `json:"response_status"`
		DigestAlg      string `json:"digest_alg"`
		InRedis        bool   `json:"in_redis"`
	}
	r := sh.do(t, sh.apis[0], "GET", path, sh.admin, nil)
	r.json(t, &in)
	if r.status != 200 || in.State != "completed" || in.OrderID != c.OrderID || in.ResponseStatus != 201 || in.DigestAlg != "sm3/v1" || !in.InRedis {
		t.Fatalf("inspect: %d %s", r.status, r.body)
	}
	if r := sh.do(t, sh.apis[0], "DELETE", path, sh.admin, nil); r.status != 204 {
		t.Fatalf("purge: %d %s", r.status, r.body)
	}
	if r := sh.do(t, sh.apis[0], "GET", path, sh.admin, nil); r.status != 404 {
		t.Errorf("inspect after purge: %d", r.status)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := sh.submit(t, sh.apis[1], user, "purge/me", c.ConfirmToken)
		if r.status == 200 && placedOrder(t, r).Duplicate && r.header.Get("Idempotent-Replayed") == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance 2 still replays the purged answer: %d %s", r.status, r.body)
		}
		sh.do(t, sh.apis[0], "DELETE", path, sh.admin, nil) // our probe above re-recorded it
		time.Sleep(20 * time.Millisecond)
	}
	if n := sh.count(t, "SELECT count(*) FROM orders"); n != 1 {
		t.Errorf("%d orders", n)
	}
}

// The idempotency layers and stock conflicts show in the metrics.
func TestPlacementMetrics(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 1)
	api := sh.apis[0]
	user := sh.login(t, "metrics")
	other := sh.login(t, "metrics-2")
	c := sh.confirm(t, api, user, sh.cart(1))
	late := sh.confirm(t, api, other, sh.cart(1)) // the last unit, quoted twice
	sh.submit(t, api, user, "m1", c.ConfirmToken)
	sh.submit(t, api, user, "m1", c.ConfirmToken)     // L1 hit
	sh.submit(t, api, user, "m2", c.ConfirmToken)     // placed already: duplicate
	sh.submit(t, api, other, "m3", late.ConfirmToken) // out of stock at submit
	m := sh.metrics(t, api)
	for _, want := range []string{
		`takeout_idempotency_outcomes_total{layer="l1",outcome="hit"} 1`,
		`takeout_idempotency_outcomes_total{layer="redis",outcome="claimed"} 3`,
		`takeout_order_submits_total{result="placed"} 1`,
		`takeout_order_submits_total{result="duplicate"} 1`,
		`takeout_order_stock_conflicts_total 1`,
		`takeout_idempotency_redis_breaker_open 0`,
		`takeout_redis_degraded 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
