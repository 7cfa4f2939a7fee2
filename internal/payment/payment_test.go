package payment

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/jobs"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/orderstream"
	"github.com/takeout/takeout/internal/payment/wxpay"
	"github.com/takeout/takeout/internal/paystate"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/testenv"
)

const (
	testMchID  = "1900000109"
	testAppID  = "wxd0000000000000test"
	testSerial = "PLATFORM-1"
)

// fixture is one database with the payment service and the order service
// it applies transitions through, as cmd/api wires them.
type fixture struct {
	pool     *pgxpool.Pool
	hub      *orderstream.Hub // the live-order outbox, which every instance records events in
	svc      *Service
	platform *rsa.PrivateKey // signs notifications as the platform does
	apiV3Key []byte
	merchant int64
	user     int64
	next     int64
	// lifecycle, when set, is the order state table of the services
	// built after it is set.
	lifecycle *statemachine.Machine
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := testenv.NewDB(t)
	ctx := context.Background()
	f := &fixture{pool: pool, apiV3Key: []byte("0123456789abcdef0123456789abcdef"), next: 1000}
	if err := pool.QueryRow(ctx, "INSERT INTO users (openid) VALUES ('sim-pay') RETURNING id").Scan(&f.user); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "INSERT INTO merchants (name, status, delivery_fee_fen) VALUES ('Pay Kitchen', 'open', 0) RETURNING id").Scan(&f.merchant); err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f.platform = key
	if f.hub, err = orderstream.NewHub(orderstream.Options{Pool: pool, Redis: testenv.NewRedis(t).Conn(t)}); err != nil {
		t.Fatal(err)
	}
	f.svc = f.newService(t)
	return f
}

// newService builds a payment service on the fixture's database: each
// is one instance.
func (f *fixture) newService(t *testing.T) *Service {
	t.Helper()
	return f.newServiceWith(t, nil)
}

// newServiceWith is newService with its options changed by with.
func (f *fixture) newServiceWith(t *testing.T, with func(*Options)) *Service {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	inserter, err := jobs.NewInserter(f.pool, logger, 25)
	if err != nil {
		t.Fatal(err)
	}
	effects := NewEffects(inserter)
	orders, err := order.NewService(order.Options{Pool: f.pool, Jobs: inserter, Payments: effects, Logger: logger, Now: time.Now,
		Events: f.hub, Lifecycle: f.lifecycle})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Pool: f.pool, Orders: orders, Effects: effects, Logger: logger, Now: time.Now,
		MchID: testMchID, AppID: testAppID, Platform: wxpay.NewKeyring(wxpay.PublicKey{Serial: testSerial, Key: &f.platform.PublicKey}),
		APIv3Key: f.apiV3Key}
	if with != nil {
		with(&opts)
	}
	svc, err := NewService(opts)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// order inserts an order of 1,200 fen (one line) in status with an open
// payment attempt and returns the order id and the attempt's out_trade_no.
func (f *fixture) order(t *testing.T, status statemachine.Status) (int64, string) {
	t.Helper()
	ctx := context.Background()
	f.next++
	id := f.next
	digest := make([]byte, 32)
	digest[0], digest[1] = byte(id), byte(id>>8)
	if _, err := f.pool.Exec(ctx, `INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
		items_total_fen, delivery_fee_fen, total_fen, address, pay_deadline, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4, 1, 'sm3/v1', $5, 1200, 0, 1200, '{}', now() + interval '1 hour', now(), now())`,
		id, f.user, f.merchant, digest, string(status)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO order_items (order_id, line, dish_id, name, qty, unit_price_fen, line_total_fen)
		VALUES ($1, 0, 1, 'Rice bowl', 2, 600, 1200)`, id); err != nil {
		t.Fatal(err)
	}
	no := OutTradeNo(id, 1)
	if _, err := f.pool.Exec(ctx, `INSERT INTO payments (order_id, channel, mchid, appid, out_trade_no, amount_fen) VALUES ($1, $2, $3, $4, $5, 1200)`,
		id, Channel, testMchID, testAppID, no); err != nil {
		t.Fatal(err)
	}
	return id, no
}

func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (f *fixture) orderStatus(t *testing.T, id int64) statemachine.Status {
	t.Helper()
	var s string
	if err := f.pool.QueryRow(context.Background(), "SELECT status FROM orders WHERE id = $1", id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return statemachine.Status(s)
}

func paid(no, txn string, amount int64) Transaction {
	t := Transaction{AppID: testAppID, MchID: testMchID, OutTradeNo: no, TransactionID: txn, TradeState: TradeSuccess, SuccessTime: "2026-12-02T10:00:00+08:00"}
	t.Amount.Total, t.Amount.Currency = amount, "CNY"
	return t
}

// A reported transaction is held to the payment asked for, field by
// field; a state other than SUCCESS is not held to the amount.
func TestMismatch(t *testing.T) {
	t.Parallel()
	p := dbsqlc.Payment{Mchid: testMchID, Appid: testAppID, AmountFen: 1200, Currency: "CNY"}
	for _, tc := range []struct {
		name string
		edit func(*Transaction)
		want string
	}{
		{"as asked", func(*Transaction) {}, ""},
		{"another merchant", func(t *Transaction) { t.MchID = "1900000999" }, "mchid"},
		{"another app", func(t *Transaction) { t.AppID = "wx-other" }, "appid"},
		{"less money", func(t *Transaction) { t.Amount.Total = 1199 }, "amount"},
		{"more money", func(t *Transaction) { t.Amount.Total = 1201 }, "amount"},
		{"another currency", func(t *Transaction) { t.Amount.Currency = "USD" }, "currency"},
		{"no currency said", func(t *Transaction) { t.Amount.Currency = "" }, ""},
		{"not paid, any amount", func(t *Transaction) { t.TradeState, t.Amount.Total = "NOTPAY", 0 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := paid("T1-1", "4200", 1200)
			tc.edit(&tr)
			if kind, detail := mismatch(tr, p); kind != tc.want {
				t.Errorf("mismatch %q (%s), want %q", kind, detail, tc.want)
			}
		})
	}
}

// Concurrent deliveries of one payment, on two instances at once, apply
// it once: the order is PAID at version 2, one notification is recorded,
// the payment is SUCCESS, and every delivery is answered success or told
// to retry (never an error the platform would take for a refusal).
func TestConcurrentDeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := f.newService(t)
	id, no := f.order(t, statemachine.PendingPayment)
	const copies = 24
	errs := make([]error, copies)
	var wg sync.WaitGroup
	for i := range copies {
		svc := f.svc
		if i%2 == 1 {
			svc = other
		}
		wg.Go(func() {
			errs[i] = svc.HandleTransaction(context.Background(), Source{Kind: "v3", NotificationID: "n-" + strconv.Itoa(i%3), EventType: "TRANSACTION.SUCCESS"}, paid(no, "4200000001", 1200))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, ErrInFlight) {
			t.Errorf("delivery %d: %v", i, err)
		}
	}
	if got := f.orderStatus(t, id); got != statemachine.Paid {
		t.Fatalf("order %s, want PAID", got)
	}
	if n := f.count(t, "SELECT count(*) FROM order_status_history WHERE order_id = $1 AND to_status = 'PAID'", id); n != 1 {
		t.Errorf("%d PAID history rows, want 1", n)
	}
	if n := f.count(t, "SELECT count(*) FROM payment_notifications WHERE transaction_id = '4200000001'"); n != 1 {
		t.Errorf("%d notifications recorded, want 1", n)
	}
	if n := f.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = $2", id, string(paystate.Paid)); n != 1 {
		t.Errorf("%d payments SUCCESS, want 1", n)
	}
	if n := f.count(t, "SELECT count(*) FROM refunds"); n != 0 {
		t.Errorf("%d refunds of a payment applied once, want none", n)
	}
	// A later redelivery is a duplicate, answered from memory.
	if err := f.svc.HandleTransaction(context.Background(), Source{Kind: "v3", NotificationID: "n-9", EventType: "TRANSACTION.SUCCESS"}, paid(no, "4200000001", 1200)); err != nil {
		t.Errorf("redelivery: %v", err)
	}
}

// Money that cannot be taken is given back, once: a payment for a
// cancelled order, and a second transaction for a paid one; a mismatch is
// an anomaly that changes no order.
func TestUnexpectedMoney(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	src := func(n string) Source { return Source{Kind: "v3", NotificationID: n, EventType: "TRANSACTION.SUCCESS"} }

	cancelled, no := f.order(t, statemachine.Cancelled)
	for range 3 {
		if err := f.svc.HandleTransaction(ctx, src("late"), paid(no, "4200000010", 1200)); err != nil {
			t.Fatalf("late payment: %v", err)
		}
	}
	if n := f.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND amount_fen = 1200 AND status = 'PENDING'", cancelled); n != 1 {
		t.Errorf("late payment: %d refunds, want 1", n)
	}
	if n := f.count(t, "SELECT count(*) FROM river_job WHERE kind = 'payment.refund'"); n != 1 {
		t.Errorf("late payment: %d refund jobs, want 1", n)
	}
	if got := f.orderStatus(t, cancelled); got != statemachine.Cancelled {
		t.Errorf("late payment moved the order to %s", got)
	}

	paidOrder, no2 := f.order(t, statemachine.PendingPayment)
	if err := f.svc.HandleTransaction(ctx, src("first"), paid(no2, "4200000020", 1200)); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.HandleTransaction(ctx, src("second"), paid(no2, "4200000021", 1200)); err != nil {
		t.Fatalf("second transaction: %v", err)
	}
	if n := f.count(t, "SELECT count(*) FROM refunds WHERE order_id = $1 AND transaction_id = '4200000021'", paidOrder); n != 1 {
		t.Errorf("second transaction: %d refunds of it, want 1", n)
	}
	if n := f.count(t, "SELECT count(*) FROM payment_anomalies WHERE kind = 'second_transaction'"); n != 1 {
		t.Errorf("second transaction: %d anomalies, want 1", n)
	}

	pending, no3 := f.order(t, statemachine.PendingPayment)
	if err := f.svc.HandleTransaction(ctx, src("short"), paid(no3, "4200000030", 1)); !errors.Is(err, ErrAnomaly) {
		t.Fatalf("1 fen for 1,200: %v, want ErrAnomaly", err)
	}
	if got := f.orderStatus(t, pending); got != statemachine.PendingPayment {
		t.Errorf("a mismatched payment moved the order to %s", got)
	}
	if n := f.count(t, "SELECT count(*) FROM payment_anomalies WHERE kind = 'amount'"); n != 1 {
		t.Errorf("%d amount anomalies, want 1", n)
	}
}

// A refund's result is applied once: SUCCESS moves a REFUNDING order to
// REFUNDED and the payment to REFUNDED; a result that does not match our
// refund is an anomaly; a failure leaves the refund FAILED for an
// operator, who can settle it.
func TestRefundResults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	refunding := func() (int64, string) {
		t.Helper()
		id, no := f.order(t, statemachine.PendingPayment)
		if err := f.svc.HandleTransaction(ctx, Source{Kind: "v3", NotificationID: "p-" + no, EventType: "TRANSACTION.SUCCESS"}, paid(no, "42"+strconv.FormatInt(id, 10), 1200)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.o.Orders.(*order.Service).Apply(ctx, id, statemachine.Reject, order.Actor{Kind: statemachine.Admin, Name: "test"}, "test"); err != nil {
			t.Fatal(err)
		}
		return id, OutRefundNo(no)
	}
	result := func(no string, state RefundState, amount int64) RefundResult {
		r := RefundResult{OutRefundNo: no, RefundID: "50" + no, RefundStatus: state, MchID: testMchID}
		r.Amount.Refund = amount
		return r
	}
	src := func(n string, state RefundState) Source {
		return Source{Kind: "v3", NotificationID: n, EventType: "REFUND." + string(state)}
	}

	id, no := refunding()
	if n := f.count(t, "SELECT count(*) FROM refunds WHERE out_refund_no = $1", no); n != 1 {
		t.Fatalf("the reject recorded %d refunds, want 1", n)
	}
	if _, err := f.svc.HandleRefund(ctx, src("r-short", RefundSuccess), result(no, RefundSuccess, 1)); !errors.Is(err, ErrAnomaly) {
		t.Errorf("a refund of 1 fen reported for 1,200: %v, want ErrAnomaly", err)
	}
	if got := f.orderStatus(t, id); got != statemachine.Refunding {
		t.Errorf("a mismatched refund moved the order to %s", got)
	}
	for i, want := range []string{"applied", "duplicate"} {
		outcome, err := f.svc.HandleRefund(ctx, src("r-ok", RefundSuccess), result(no, RefundSuccess, 1200))
		if err != nil || outcome != want {
			t.Errorf("delivery %d: %q, %v; want %q", i, outcome, err, want)
		}
	}
	if got := f.orderStatus(t, id); got != statemachine.Refunded {
		t.Errorf("order %s after the refund, want REFUNDED", got)
	}
	if n := f.count(t, "SELECT count(*) FROM payments WHERE order_id = $1 AND status = 'REFUNDED'", id); n != 1 {
		t.Errorf("the payment was not marked refunded")
	}

	failed, no2 := refunding()
	if outcome, err := f.svc.HandleRefund(ctx, src("r-bad", RefundAbnormal), result(no2, RefundAbnormal, 1200)); err != nil || outcome != "refund_failed" {
		t.Fatalf("an abnormal refund: %q, %v", outcome, err)
	}
	page, err := f.svc.Refunds(ctx, paystate.Failed, 0, 10)
	if err != nil || len(page.Refunds) != 1 || page.Refunds[0].OutRefundNo != no2 {
		t.Fatalf("refunds needing attention: %+v, %v; want %s", page, err, no2)
	}
	for range 2 { // settling twice changes nothing the second time
		r, err := f.svc.SettleRefund(ctx, no2, "paid back in cash", "admin:test")
		if err != nil || r.Status != paystate.Settled {
			t.Fatalf("settle: %+v, %v", r, err)
		}
	}
	if got := f.orderStatus(t, failed); got != statemachine.Refunded {
		t.Errorf("order %s after the settle, want REFUNDED", got)
	}
	if _, err := f.svc.RetryRefund(ctx, no2, "again", "admin:test"); err == nil {
		t.Error("a settled refund was retried")
	}
}

// notification builds a v3 payment notification as the platform sends
// it: the transaction encrypted with the APIv3 key, the whole signed with
// the platform key.
func (f *fixture) notification(t *testing.T, id string, tr Transaction, at time.Time) (wxpay.SignedHeaders, []byte) {
	t.Helper()
	plain, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := wxpay.EncryptAEAD(f.apiV3Key, "nonce-123456", "transaction", plain)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(wxpay.Notification{ID: id, CreateTime: at.Format(time.RFC3339), EventType: "TRANSACTION.SUCCESS", ResourceType: "encrypt-resource",
		Resource: wxpay.Resource{OriginalType: "transaction", Algorithm: "AEAD_AES_256_GCM", Ciphertext: ct, AssociatedData: "transaction", Nonce: "nonce-123456"}})
	if err != nil {
		t.Fatal(err)
	}
	h := wxpay.SignedHeaders{Timestamp: strconv.FormatInt(at.Unix(), 10), Nonce: "n0nce" + id, Serial: testSerial}
	if h.Signature, err = wxpay.SignSHA256WithRSA(f.platform, []byte(h.Timestamp+"\n"+h.Nonce+"\n"+string(body)+"\n")); err != nil {
		t.Fatal(err)
	}
	return h, body
}

// NotifyV3 checks the signature before anything else and applies what
// verifies; what is refused changes nothing.
func TestNotifyV3(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id, no := f.order(t, statemachine.PendingPayment)
	now := time.Now()
	h, body := f.notification(t, "EV-1", paid(no, "4200000100", 1200), now)

	forged := h
	forged.Signature = h.Signature[:len(h.Signature)-4] + "AAAA"
	stale, staleBody := f.notification(t, "EV-2", paid(no, "4200000100", 1200), now.Add(-10*time.Minute))
	unknown := h
	unknown.Serial = "PLATFORM-9"
	for _, tc := range []struct {
		name string
		h    wxpay.SignedHeaders
		body []byte
		want error
	}{
		{"forged signature", forged, body, ErrBadSignature},
		{"altered body", h, append([]byte(nil), append(body[:len(body)-1:len(body)-1], ' ', '}')...), ErrBadSignature},
		{"timestamp outside the window", stale, staleBody, ErrBadSignature},
		{"unknown platform serial", unknown, body, ErrBadSignature},
	} {
		if err := f.svc.NotifyV3(ctx, tc.h, tc.body); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := f.orderStatus(t, id); got != statemachine.PendingPayment {
		t.Fatalf("a refused notification moved the order to %s", got)
	}
	for i := range 3 { // the same bytes again are a duplicate
		if err := f.svc.NotifyV3(ctx, h, body); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	if got := f.orderStatus(t, id); got != statemachine.Paid {
		t.Errorf("order %s after a verified notification, want PAID", got)
	}
	if n := f.count(t, "SELECT count(*) FROM payment_notifications WHERE notification_id = 'EV-1'"); n != 1 {
		t.Errorf("%d notifications recorded, want 1", n)
	}
}
