package order_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/orderid"
	"github.com/takeout/takeout/internal/testenv"
)

type benchEnv struct {
	svc      *order.Service
	signer   *order.Signer
	ids      *orderid.Generator
	pool     *pgxpool.Pool
	user     int64
	merchant int64
	base     order.Token
	dishes   []int64
	metrics  *prometheus.Registry
}

// newBenchEnv builds the order service on a fresh database and Redis
// prefix, with one user and 64 dishes with plenty of stock.
// benchStock is each bench dish's stock: more than a bench sells.
var benchStock int32 = 1_000_000

func newBenchEnv(b testing.TB) benchEnv { b.Helper(); return newEnvAt(b, time.Now) }

// newEnvAt is newBenchEnv with the order service on the clock now.
func newEnvAt(b testing.TB, now func() time.Time) benchEnv {
	b.Helper()
	ctx := context.Background()
	pool := testenv.NewDB(b)
	rds := testenv.NewRedis(b).Conn(b)
	rds.Check(ctx)
	logger := slog.New(slog.DiscardHandler)
	q := dbsqlc.New()
	user, err := q.UserUpsertByOpenID(ctx, pool, "bench")
	if err != nil {
		b.Fatal(err)
	}
	m, err := q.MerchantInsert(ctx, pool, dbsqlc.MerchantInsertParams{Name: "Bench", Status: "open", DeliveryFeeFen: 300})
	if err != nil {
		b.Fatal(err)
	}
	var dishes []int64
	for i := range 64 {
		d, err := q.DishInsert(ctx, pool, dbsqlc.DishInsertParams{MerchantID: m.ID, Name: fmt.Sprintf("Dish %d", i), PriceFen: 1000, OnSale: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inventory.Restock(ctx, pool, d, inventory.Change{SetOnHand: &benchStock, Opening: true, Actor: "bench"}); err != nil {
			b.Fatal(err)
		}
		dishes = append(dishes, d)
	}
	idem, err := idempotency.NewStore(idempotency.Options{DB: pool, Redis: rds, Logger: logger, Retention: 72 * time.Hour,
		InflightTTL: time.Minute, CoalesceWait: 2 * time.Second, L1Bytes: 256 << 20, L1TTL: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(idem.Close)
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	ids, err := orderid.New(orderid.Options{Worker: 1})
	if err != nil {
		b.Fatal(err)
	}
	signer := order.NewSigner([]byte(strings.Repeat("b", 32)))
	metrics := prometheus.NewRegistry()
	svc, err := order.NewService(order.Options{Pool: pool, IDs: ids, Signer: signer, Idempotency: idem, Jobs: jobs, Logger: logger, Registerer: metrics,
		Now: now, TokenTTL: time.Hour, DedupWindow: 10 * time.Minute, PayWindow: 15 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	base := order.Token{UserID: user.ID, MerchantID: m.ID,
		FeeFen: 300, QuoteVersion: 1, Address: order.Address{Name: "Bench", Phone: "13800000000", Detail: "Lab"}, ExpiresAt: time.Now().Add(time.Hour).Unix()}
	return benchEnv{svc: svc, signer: signer, ids: ids, pool: pool, user: user.ID, merchant: m.ID, base: base, dishes: dishes, metrics: metrics}
}

// token signs a one-dish cart as its seq-th intent: a distinct order.
func (e benchEnv) token(b testing.TB, seq int, dish int64) string {
	t := e.base
	t.Items = []order.TokenItem{{DishID: dish, Qty: 1, UnitPriceFen: 1000, Name: "Dish", OptionsVersion: 1}}
	t.Seq = seq
	id, err := e.ids.Next(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	t.OrderID = id
	in := t.Intent()
	in.Normalize()
	t.Digest = in.IntentDigest(seq).String()
	raw, err := e.signer.Sign(t)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkSubmit places distinct orders over 64 dishes through every
// layer: L1 miss, Redis claim, the PostgreSQL transaction, finalize.
func BenchmarkSubmit(b *testing.B) { benchmarkSubmit(b, 64) }

// BenchmarkSubmitHotDish is the same with every order buying one dish:
// its stock shards spread the orders over rows.
func BenchmarkSubmitHotDish(b *testing.B) { benchmarkSubmit(b, 1) }

func benchmarkSubmit(b *testing.B, dishes int) {
	e := newBenchEnv(b)
	tokens := make([]string, b.N)
	for i := range tokens {
		tokens[i] = e.token(b, i+1, e.dishes[i%dishes])
	}
	var next atomic.Int64
	b.SetParallelism(8) // 16 submitters on 2 cores, as clients would be
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			out, err := e.svc.Submit(context.Background(), e.user, fmt.Sprintf("k%d", i), tokens[i], order.PlacedReply)
			if err != nil || out.Response.Status != 201 {
				b.Fatalf("submit: %v %d", err, out.Response.Status)
			}
		}
	})
}

// BenchmarkConfirm quotes a three-dish cart: the merchant, the dishes
// with their stock, the user's latest order of that cart, an order id
// and the signed token.
func BenchmarkConfirm(b *testing.B) {
	e := newBenchEnv(b)
	addr := e.base.Address
	req := order.ConfirmRequest{MerchantID: strconv.FormatInt(e.merchant, 10), Address: &addr}
	for _, d := range e.dishes[:3] {
		req.Items = append(req.Items, order.ConfirmItem{DishID: strconv.FormatInt(d, 10), Qty: 1})
	}
	b.SetParallelism(8) // 16 clients on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := e.svc.Confirm(context.Background(), e.user, req)
			if err != nil || out.TotalFen != 3300 {
				b.Fatalf("confirm: %v, total %d", err, out.TotalFen)
			}
		}
	})
}

// BenchmarkReplayL1 repeats one submit: the answer comes from the
// in-process cache, recognised by the token it kept.
func BenchmarkReplayL1(b *testing.B) {
	e := newBenchEnv(b)
	tok := e.token(b, 1, e.dishes[0])
	ctx := context.Background()
	first, err := e.svc.Submit(ctx, e.user, "replay", tok, order.PlacedReply)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out, err := e.svc.Submit(ctx, e.user, "replay", tok, order.PlacedReply)
			if err != nil || !out.Replayed || len(out.Response.Body) != len(first.Response.Body) {
				b.Fatalf("replay: %v", err)
			}
		}
	})
}

// BenchmarkCanonicalDigest is the canonical encoding plus SM3.
func BenchmarkCanonicalDigest(b *testing.B) {
	t := order.Token{UserID: 1, MerchantID: 2, Items: []order.TokenItem{{DishID: 3, Qty: 2, UnitPriceFen: 3200}, {DishID: 12, Qty: 1, UnitPriceFen: 1500}},
		FeeFen: 300, Address: order.Address{Name: "Li Lei", Phone: "13800138000", Detail: "Room 1201, Building 5"}, Remark: "no cilantro"}
	in := t.Intent()
	in.Normalize()
	b.ReportAllocs()
	for b.Loop() {
		_ = in.IntentDigest(1)
	}
}

// BenchmarkTokenVerify is the HMAC-SM3 check and decode of a token.
func BenchmarkTokenVerify(b *testing.B) {
	s := order.NewSigner([]byte(strings.Repeat("k", 32)))
	raw, _ := s.Sign(order.Token{UserID: 1, MerchantID: 2, OrderID: 3, Seq: 1, Digest: strings.Repeat("a", 64), ExpiresAt: 1,
		Items: []order.TokenItem{{DishID: 3, Qty: 2, UnitPriceFen: 3200, Name: "Tofu"}}, Address: order.Address{Name: "n", Phone: "1", Detail: "d"}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(raw); err != nil {
			b.Fatal(err)
		}
	}
}
