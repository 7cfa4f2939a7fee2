package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/testenv"
)

// consistentShop writes one user, merchant and dish (seeded with 10) and
// one order of 1 unit in PENDING_PAYMENT, as the service would have, and
// returns the dish's initial stock and the order id.
func consistentShop(t *testing.T, pool *pgxpool.Pool) (map[int64]int64, int64) {
	t.Helper()
	ctx := context.Background()
	var user, merchant, dish int64
	const orderID = 1001
	steps := []struct {
		sql  string
		args []any
		out  *int64
	}{
		{`INSERT INTO users (openid) VALUES ('checker') RETURNING id`, nil, &user},
		{`INSERT INTO merchants (name) VALUES ('Checker') RETURNING id`, nil, &merchant},
	}
	for _, s := range steps {
		if err := pool.QueryRow(ctx, s.sql, s.args...).Scan(s.out); err != nil {
			t.Fatal(err)
		}
	}
	if err := pool.QueryRow(ctx, `INSERT INTO dishes (merchant_id, name, price_fen) VALUES ($1, 'D', 100) RETURNING id`, merchant).Scan(&dish); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
		   items_total_fen, delivery_fee_fen, total_fen, address, pay_deadline, created_at, updated_at)
		 VALUES (1001, $1, $2, decode(repeat('ab', 32), 'hex'), decode(repeat('cd', 32), 'hex'), 1, 'SM3', 'PENDING_PAYMENT',
		   100, 0, 100, '{}', now() + interval '1 hour', now(), now())`, []any{user, merchant}},
		{`INSERT INTO dish_stock (dish_id, shard, units) VALUES ($1, 0, 5), ($1, 1, 4)`, []any{dish}},
		{`INSERT INTO order_items (order_id, line, dish_id, name, qty, unit_price_fen, line_total_fen) VALUES (1001, 0, $1, 'D', 1, 100, 100)`, []any{dish}},
		{`INSERT INTO stock_reservations (order_id, dish_id, qty) VALUES (1001, $1, 1)`, []any{dish}},
		{`INSERT INTO stock_adjustments (dish_id, kind, delta, on_hand_after, actor) VALUES ($1, 'opening', 10, 10, 'seed')`, []any{dish}},
		{`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, NULL, 'PENDING_PAYMENT', 1, 'user:1')`, nil},
	} {
		if _, err := pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	return map[int64]int64{dish: 10}, orderID
}

// plantedShop is a database with consistentShop's shop and the
// statements of plant run on it, and the shop's initial stock.
func plantedShop(t *testing.T, plant []string) (*pgxpool.Pool, map[int64]int64) {
	t.Helper()
	pool := testenv.NewDB(t)
	initial, _ := consistentShop(t, pool)
	for _, q := range plant {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("plant %q: %v", q, err)
		}
	}
	return pool, initial
}

// The checker finds nothing in a consistent database and finds each kind
// of breakage when it is planted: it can fail.
// shared1001 shares order 1001's payment of 100: commission to the
// platform, the rest unfrozen; the request then says it sent recorded.
func shared1001(commission, recorded int64) []string {
	return []string{
		`UPDATE payments SET profit_sharing = true, sub_mchid = '1900000100'`,
		fmt.Sprintf(`INSERT INTO profit_sharings (kind, payment_id, order_id, merchant_id, out_no, cause, status, amount_fen, unfrozen_fen)
		 SELECT 'share', p.id, p.order_id, o.merchant_id, 'S1', 'completed', 'PROCESSING', %d, 100 - %d FROM payments p JOIN orders o ON o.id = p.order_id`, commission, commission),
		`UPDATE profit_sharings SET status = 'SUCCESS'`,
		fmt.Sprintf(`UPDATE profit_sharings SET amount_fen = %d, unfrozen_fen = 100 - %d`, recorded, recorded),
	}
}

func TestCheckFindsPlantedViolations(t *testing.T) {
	t.Parallel()
	ack1001 := []ack{{purchase: 1, digest: "d1", order: "1001"}}
	// Order 1001 spent voucher 71 of its customer's.
	spent71 := []string{
		`INSERT INTO voucher_templates (id, merchant_id, name, amount_fen, funded_by, claim_from, claim_until, valid_days, budget, per_user_limit, created_by)
		 OVERRIDING SYSTEM VALUE SELECT 7, id, 'v', 10, 'merchant', now(), now() + interval '1 hour', 1, 2, 2, 'x' FROM merchants`,
		`INSERT INTO voucher_budget (template_id, shard, remaining) VALUES (7, 0, 1)`,
		`INSERT INTO vouchers (id, template_id, user_id, claim_no, valid_until, order_id, used_at) OVERRIDING SYSTEM VALUE
		 SELECT 71, 7, id, 1, now() + interval '1 day', 1001, now() FROM users`,
		`UPDATE orders SET voucher_id = 71`,
	}
	// Order 1001 cancelled, as the service cancels it (its stock back).
	cancel1001 := []string{
		`UPDATE orders SET status = 'CANCELLED', version = 2`,
		`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'PENDING_PAYMENT', 'CANCELLED', 2, 'user:1')`,
		`UPDATE stock_reservations SET released_at = now()`,
		`UPDATE dish_stock SET units = units + 1 WHERE shard = 0`,
	}
	// Order 1001 got 200 fen of promotion 5's budget of 1000, and the
	// first-order discount of promotion 6.
	promoted1001 := []string{
		`INSERT INTO promotions (id, merchant_id, kind, name, tiers, funded_by, budget_fen, created_by)
		 OVERRIDING SYSTEM VALUE SELECT 5, id, 'spend_save', 'p', '[{"threshold_fen": 0, "off_fen": 200}]', 'merchant', 1000, 'x' FROM merchants`,
		`INSERT INTO promotions (id, merchant_id, kind, name, tiers, new_customer_scope, funded_by, created_by)
		 OVERRIDING SYSTEM VALUE SELECT 6, id, 'new_customer', 'n', '[{"threshold_fen": 0, "off_fen": 100}]', 'merchant', 'merchant', 'x' FROM merchants`,
		`INSERT INTO promotion_budget (promotion_id, shard, remaining) VALUES (5, 0, 500), (5, 1, 300)`,
		`UPDATE orders SET promotions = '[{"promotion_id": "5", "kind": "spend_save", "amount_fen": 200}, {"promotion_id": "6", "kind": "new_customer", "amount_fen": 100}]'`,
		`INSERT INTO new_customer_claims (user_id, scope, order_id) SELECT user_id, merchant_id, id FROM orders`,
	}
	// Order 1001 paid, with an accept deadline 10 s ago whose rule is to
	// accept; then accepted by the system at it.
	paid1001 := []string{
		`UPDATE orders SET status = 'PAID', version = 2, accept_by = now() - interval '10 seconds', accept_then = 'accept'`,
		`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'PENDING_PAYMENT', 'PAID', 2, 'payment:x')`,
		`INSERT INTO payments (order_id, channel, mchid, appid, out_trade_no, amount_fen, status, transaction_id) VALUES (1001, 'wechat', 'm', 'a', 'T1', 100, 'SUCCESS', 'X1')`,
	}
	autoAccepted1001 := append(slices.Clone(paid1001),
		`UPDATE orders SET status = 'ACCEPTED', version = 3, accept_deadline_applied = true`,
		`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'PAID', 'ACCEPTED', 3, 'system:accept-deadline')`)
	// A deadline's share of order 1001 recorded a minute ago, still open.
	shareOpenAMinute := append(slices.Clone(autoAccepted1001),
		`UPDATE payments SET profit_sharing = true, sub_mchid = '1900000100'`,
		`INSERT INTO profit_sharings (kind, payment_id, order_id, merchant_id, out_no, cause, status) SELECT 'share', p.id, p.order_id, o.merchant_id, 'S1', 'deadline', 'PENDING' FROM payments p JOIN orders o ON o.id = p.order_id`,
		`UPDATE profit_sharings SET updated_at = now() - interval '1 minute'`)
	for _, tc := range []struct {
		name   string
		plant  []string
		acks   []ack
		claims *claims
		want   map[string]int
		// counts, when set, are what the report says the orders got off
		// (discountCounts).
		counts map[string]int
		// stoppedAgo, when set, is how long before the check the
		// instances stopped.
		stoppedAgo time.Duration
	}{
		{name: "consistent", acks: ack1001, want: map[string]int{}},
		{name: "acknowledged order missing", acks: append(ack1001, ack{purchase: 2, digest: "d2", order: "4242"}),
			want: map[string]int{invAckMissing: 1}},
		{name: "one digest answered as two orders", acks: append(ack1001, ack{purchase: 1, digest: "d1", order: "4242"}),
			want: map[string]int{invAckMissing: 1, invAckDiverges: 1, invPurchaseTwoOrders: 1}},
		{name: "stock taken without a reservation", acks: ack1001, plant: []string{`UPDATE dish_stock SET units = units - 1 WHERE shard = 1`},
			want: map[string]int{invStockConserved: 1}},
		{name: "oversold", acks: ack1001, plant: []string{`UPDATE stock_reservations SET qty = 11`, `UPDATE order_items SET qty = 11, line_total_fen = 1100`,
			`UPDATE dish_stock SET units = 0`},
			want: map[string]int{invOversold: 1, invStockConserved: 1}},
		{name: "a restock in the ledger and on the shelf", acks: ack1001, plant: []string{
			`UPDATE dish_stock SET units = units + 3 WHERE shard = 0`,
			`INSERT INTO stock_adjustments (dish_id, kind, delta, on_hand_after, actor) SELECT dish_id, 'delta', 3, 13, 'x' FROM dish_stock WHERE shard = 0`},
			want: map[string]int{}},
		{name: "a restock counted twice on the shelf", acks: ack1001, plant: []string{
			`UPDATE dish_stock SET units = units + 6 WHERE shard = 0`,
			`INSERT INTO stock_adjustments (dish_id, kind, delta, on_hand_after, actor) SELECT dish_id, 'delta', 3, 13, 'x' FROM dish_stock WHERE shard = 0`},
			want: map[string]int{invStockConserved: 1}},
		{name: "dispatched order's units not consumed", acks: ack1001, plant: []string{
			`UPDATE orders SET status = 'DELIVERING', version = 2`},
			want: map[string]int{invReservations: 1, invHistoryPath: 1, invPaidWithoutPayment: 1}},
		{name: "cancelled order still holds stock", acks: ack1001, plant: []string{
			`UPDATE orders SET status = 'CANCELLED', version = 2`,
			`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'PENDING_PAYMENT', 'CANCELLED', 2, 'user:1')`},
			want: map[string]int{invReservations: 1}},
		{name: "history jumps outside the table", acks: ack1001, plant: []string{
			`UPDATE orders SET status = 'COMPLETED', version = 2`,
			`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'PENDING_PAYMENT', 'COMPLETED', 2, 'admin:x')`},
			want: map[string]int{invHistoryPath: 1, invPaidWithoutPayment: 1, invReservations: 1}},
		{name: "paid by a user, not by the payment", acks: ack1001, plant: []string{
			`UPDATE orders SET status = 'PAID', version = 2`,
			`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'PENDING_PAYMENT', 'PAID', 2, 'user:1')`,
			`INSERT INTO payments (order_id, channel, mchid, appid, out_trade_no, amount_fen, status, transaction_id) VALUES (1001, 'wechat', 'm', 'a', 'T1', 100, 'SUCCESS', 'X1')`},
			want: map[string]int{invHistoryPath: 1}},
		{name: "paid twice, nothing refunded", acks: ack1001, plant: []string{
			`UPDATE orders SET status = 'PAID', version = 2`,
			`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1001, 'PENDING_PAYMENT', 'PAID', 2, 'payment:x')`,
			`INSERT INTO payments (order_id, channel, mchid, appid, out_trade_no, amount_fen, status, transaction_id) VALUES (1001, 'wechat', 'm', 'a', 'T1', 100, 'SUCCESS', 'X1')`,
			`INSERT INTO payments (order_id, channel, mchid, appid, out_trade_no, amount_fen, status, transaction_id) VALUES (1001, 'wechat', 'm', 'a', 'T2', 100, 'SUCCESS', 'X2')`},
			want: map[string]int{invPaidTwice: 1}},
		{name: "unpaid past the deadline", acks: ack1001, plant: []string{`UPDATE orders SET pay_deadline = now() - interval '1 hour'`},
			want: map[string]int{invStuck: 1}},
		{name: "accepted by the system at its deadline", acks: ack1001, plant: autoAccepted1001, want: map[string]int{}},
		{name: "paid and left past its accept deadline", acks: ack1001, plant: append(slices.Clone(paid1001), `UPDATE orders SET accept_by = now() - interval '1 hour'`),
			want: map[string]int{invStuck: 1}},
		{name: "a deadline's due row never swept", acks: ack1001, plant: append(slices.Clone(autoAccepted1001),
			`INSERT INTO order_accept_deadlines (order_id, accept_by) VALUES (1001, now() - interval '1 hour')`),
			want: map[string]int{invStuck: 1}},
		{name: "moved on before its accept deadline", acks: ack1001, plant: append(slices.Clone(autoAccepted1001), `UPDATE orders SET accept_by = now() + interval '1 minute'`),
			want: map[string]int{invAcceptDeadline: 1}},
		{name: "moved on by the deadline, the order not saying so", acks: ack1001, plant: append(slices.Clone(autoAccepted1001), `UPDATE orders SET accept_deadline_applied = false`),
			want: map[string]int{invAcceptDeadline: 1}},
		{name: "accepted by the deadline of a rule to reject", acks: ack1001, plant: append(slices.Clone(autoAccepted1001), `UPDATE orders SET accept_then = 'reject'`),
			want: map[string]int{invAcceptDeadline: 1}},
		{name: "dead job", acks: ack1001, plant: []string{
			`INSERT INTO river_job (kind, args, max_attempts, state, attempt, attempted_at, finalized_at, errors)
			 VALUES ('webhook.deliver', '{}', 1, 'discarded', 1, now(), now(), ARRAY['{"attempt":1,"at":"2026-01-01T00:00:00Z","error":"boom","trace":""}'::jsonb])`},
			want: map[string]int{invDeadJobs: 1}},
		{name: "vouchers within their budget and limit", acks: ack1001, plant: []string{
			`INSERT INTO voucher_templates (id, merchant_id, name, amount_fen, funded_by, claim_from, claim_until, valid_days, budget, per_user_limit, created_by)
			 OVERRIDING SYSTEM VALUE SELECT 7, id, 'v', 100, 'merchant', now(), now() + interval '1 hour', 1, 3, 2, 'x' FROM merchants`,
			`INSERT INTO voucher_budget (template_id, shard, remaining) VALUES (7, 0, 1)`,
			`INSERT INTO vouchers (id, template_id, user_id, claim_no, valid_until) OVERRIDING SYSTEM VALUE
			 SELECT 70 + n, 7, u.id, n, now() + interval '1 day' FROM users u, generate_series(1, 2) n`},
			claims: &claims{answers: map[string]map[string]bool{"k1": {"71": true}, "k2": {"72": true}, "k3": {}}},
			want:   map[string]int{}},
		{name: "a voucher beyond the budget", acks: ack1001, plant: []string{
			`INSERT INTO voucher_templates (id, merchant_id, name, amount_fen, funded_by, claim_from, claim_until, valid_days, budget, per_user_limit, created_by)
			 OVERRIDING SYSTEM VALUE SELECT 7, id, 'v', 100, 'merchant', now(), now() + interval '1 hour', 1, 1, 2, 'x' FROM merchants`,
			`INSERT INTO voucher_budget (template_id, shard, remaining) VALUES (7, 0, 0)`,
			`INSERT INTO vouchers (id, template_id, user_id, claim_no, valid_until) OVERRIDING SYSTEM VALUE
			 SELECT 70 + n, 7, u.id, n, now() + interval '1 day' FROM users u, generate_series(1, 2) n`},
			want: map[string]int{invVoucherBudget: 1}},
		{name: "a customer above the limit", acks: ack1001, plant: []string{
			`INSERT INTO voucher_templates (id, merchant_id, name, amount_fen, funded_by, claim_from, claim_until, valid_days, budget, per_user_limit, created_by)
			 OVERRIDING SYSTEM VALUE SELECT 7, id, 'v', 100, 'merchant', now(), now() + interval '1 hour', 1, 2, 1, 'x' FROM merchants`,
			`INSERT INTO voucher_budget (template_id, shard, remaining) VALUES (7, 0, 0)`,
			`INSERT INTO vouchers (id, template_id, user_id, claim_no, valid_until) OVERRIDING SYSTEM VALUE
			 SELECT 70 + n, 7, u.id, n, now() + interval '1 day' FROM users u, generate_series(1, 2) n`},
			want: map[string]int{invVoucherPerUser: 1}},
		{name: "a claim answered with two vouchers, one missing", acks: ack1001, plant: []string{
			`INSERT INTO voucher_templates (id, merchant_id, name, amount_fen, funded_by, claim_from, claim_until, valid_days, budget, per_user_limit, created_by)
			 OVERRIDING SYSTEM VALUE SELECT 7, id, 'v', 100, 'merchant', now(), now() + interval '1 hour', 1, 3, 2, 'x' FROM merchants`,
			`INSERT INTO voucher_budget (template_id, shard, remaining) VALUES (7, 0, 1)`,
			`INSERT INTO vouchers (id, template_id, user_id, claim_no, valid_until) OVERRIDING SYSTEM VALUE
			 SELECT 70 + n, 7, u.id, n, now() + interval '1 day' FROM users u, generate_series(1, 2) n`},
			claims: &claims{answers: map[string]map[string]bool{"k1": {"71": true, "72": true}, "k2": {"99": true}}},
			want:   map[string]int{invClaimAcks: 2}},
		{name: "two claims answered with one voucher", acks: ack1001, plant: []string{
			`INSERT INTO voucher_templates (id, merchant_id, name, amount_fen, funded_by, claim_from, claim_until, valid_days, budget, per_user_limit, created_by)
			 OVERRIDING SYSTEM VALUE SELECT 7, id, 'v', 100, 'merchant', now(), now() + interval '1 hour', 1, 3, 2, 'x' FROM merchants`,
			`INSERT INTO voucher_budget (template_id, shard, remaining) VALUES (7, 0, 1)`,
			`INSERT INTO vouchers (id, template_id, user_id, claim_no, valid_until) OVERRIDING SYSTEM VALUE
			 SELECT 70 + n, 7, u.id, n, now() + interval '1 day' FROM users u, generate_series(1, 2) n`},
			claims: &claims{answers: map[string]map[string]bool{"k1": {"71": true}, "k2": {"71": true}}},
			want:   map[string]int{invClaimAcks: 1}},
		{name: "a voucher spent and kept", acks: ack1001, plant: spent71,
			want:   map[string]int{},
			counts: map[string]int{"orders_kept_voucher": 1, "orders_gave_back_voucher": 0, "promotion_budget_fen": 0, "promotion_budget_left_fen": 0}},
		{name: "a cancelled order that gave its voucher back", acks: ack1001,
			plant:  append(append(slices.Clone(spent71), cancel1001...), `UPDATE vouchers SET order_id = NULL, used_at = NULL WHERE id = 71`),
			want:   map[string]int{},
			counts: map[string]int{"orders_kept_voucher": 0, "orders_gave_back_voucher": 1, "promotion_budget_fen": 0, "promotion_budget_left_fen": 0}},
		{name: "a cancelled order still holding its voucher", acks: ack1001, plant: append(slices.Clone(spent71), cancel1001...),
			want: map[string]int{invVoucherReleased: 1}},
		{name: "a voucher held by an order that does not record it", acks: ack1001, plant: append(slices.Clone(spent71),
			`UPDATE orders SET voucher_id = NULL`),
			want: map[string]int{invVoucherReleased: 1}},
		{name: "a voucher kept by two orders", acks: ack1001, plant: append(slices.Clone(spent71),
			`UPDATE dish_stock SET units = units - 1 WHERE shard = 0`,
			`INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
			   items_total_fen, delivery_fee_fen, total_fen, address, pay_deadline, created_at, updated_at, voucher_id)
			 SELECT 1002, user_id, merchant_id, decode(repeat('ef', 32), 'hex'), content_digest, 2, digest_alg, status,
			   items_total_fen, delivery_fee_fen, total_fen, address, pay_deadline, created_at, updated_at, 71 FROM orders WHERE id = 1001`,
			`INSERT INTO order_items (order_id, line, dish_id, name, qty, unit_price_fen, line_total_fen)
			 SELECT 1002, line, dish_id, name, qty, unit_price_fen, line_total_fen FROM order_items WHERE order_id = 1001`,
			`INSERT INTO stock_reservations (order_id, dish_id, qty) SELECT 1002, dish_id, qty FROM stock_reservations WHERE order_id = 1001`,
			`INSERT INTO order_status_history (order_id, from_status, to_status, version, actor) VALUES (1002, NULL, 'PENDING_PAYMENT', 1, 'user:1')`),
			want: map[string]int{invVoucherTwoOrders: 1}},
		{name: "promotions kept to the fen", acks: ack1001, plant: promoted1001,
			want: map[string]int{},
			counts: map[string]int{"orders_kept_spend_save": 1, "orders_gave_back_spend_save": 0, "orders_kept_new_customer": 1, "orders_gave_back_new_customer": 0,
				"orders_kept_voucher": 0, "orders_gave_back_voucher": 0, "promotion_budget_fen": 1000, "promotion_budget_left_fen": 800}},
		{name: "a cancelled order that gave its promotions back", acks: ack1001, plant: append(append(slices.Clone(promoted1001), cancel1001...),
			`UPDATE promotion_budget SET remaining = remaining + 200 WHERE shard = 0`, `DELETE FROM new_customer_claims`),
			want: map[string]int{},
			counts: map[string]int{"orders_kept_spend_save": 0, "orders_gave_back_spend_save": 1, "orders_kept_new_customer": 0, "orders_gave_back_new_customer": 1,
				"orders_kept_voucher": 0, "orders_gave_back_voucher": 0, "promotion_budget_fen": 1000, "promotion_budget_left_fen": 1000}},
		{name: "a cancelled order that kept its promotions", acks: ack1001, plant: append(slices.Clone(promoted1001), cancel1001...),
			want: map[string]int{invPromotionBudget: 1, invFirstOrderOnce: 1}},
		{name: "a budget overspent", acks: ack1001, plant: append(slices.Clone(promoted1001), `UPDATE promotion_budget SET remaining = 400 WHERE shard = 0`),
			want: map[string]int{invPromotionBudget: 1}},
		{name: "a first-order discount without its claim", acks: ack1001, plant: append(slices.Clone(promoted1001), `DELETE FROM new_customer_claims`),
			want: map[string]int{invFirstOrderOnce: 1}},
		{name: "a pickup order with the day's first number", acks: ack1001, plant: pickup1001(1, 1), want: map[string]int{}},
		{name: "a pickup number skipped, the counter past it", acks: ack1001, plant: pickup1001(2, 2),
			want: map[string]int{invPickupOnce: 1}},
		{name: "a pickup counter behind its numbers", acks: ack1001, plant: pickup1001(1, 0),
			want: map[string]int{invPickupOnce: 1}},
		{name: "a slot held and counted", acks: ack1001, plant: slot1001(1, true), want: map[string]int{}},
		{name: "a slot counted without its hold", acks: ack1001, plant: slot1001(1, false),
			want: map[string]int{invSlotsConserved: 2}},
		{name: "a slot over its capacity", acks: ack1001, plant: append(slot1001(1, true), fmt.Sprintf(`UPDATE slot_bookings SET taken = %d`, soakSlotCapacity+1)),
			want: map[string]int{invSlotsConserved: 1}},
		{name: "a cancelled order that gave its slot back", acks: ack1001, plant: append(append(slot1001(1, true), cancel1001...),
			`DELETE FROM slot_holds`, `UPDATE slot_bookings SET taken = 0`), want: map[string]int{}},
		{name: "a cancelled order still holding its slot", acks: ack1001, plant: append(slot1001(1, true), cancel1001...),
			want: map[string]int{invSlotsConserved: 1}},
		{name: "a sale in the ledger", acks: ack1001, plant: autoAccepted1001, want: map[string]int{}},
		{name: "a journal that does not balance", acks: ack1001, plant: append(slices.Clone(autoAccepted1001),
			`INSERT INTO ledger_entries (journal, kind, account, amount_fen, order_id, merchant_id, ref) SELECT 'fee:X1', 'fee', 'wechat_fees', 5, id, merchant_id, 'X1' FROM orders`),
			want: map[string]int{invJournalsBalance: 1}},
		{name: "a ledger that says more came in than was paid", acks: ack1001, plant: append(slices.Clone(autoAccepted1001),
			`UPDATE ledger_entries SET amount_fen = amount_fen + 1 WHERE account = 'wechat_clearing'`,
			`UPDATE ledger_entries SET amount_fen = amount_fen - 1 WHERE account = 'merchant_sales'`),
			want: map[string]int{invLedgerMatches: 1}},
		{name: "an after-sales request agreed with its refund", acks: ack1001, plant: append(slices.Clone(autoAccepted1001), afterSale1001(60, 60)...),
			want: map[string]int{}},
		{name: "an after-sales request agreed with a refund of another amount", acks: ack1001, plant: append(slices.Clone(autoAccepted1001), afterSale1001(70, 60)...),
			want: map[string]int{invAfterSaleRefundedOnce: 1}},
		{name: "an after-sales request left past its deadline", acks: ack1001, plant: append(slices.Clone(autoAccepted1001),
			`INSERT INTO after_sales (order_id, merchant_id, user_id, amount_fen, reason, respond_by) SELECT id, merchant_id, user_id, 50, 'r', now() - interval '1 hour' FROM orders`),
			want: map[string]int{invStuck: 1}},
		{name: "a shared sale", acks: ack1001, plant: append(slices.Clone(autoAccepted1001), shared1001(10, 10)...), want: map[string]int{}},
		{name: "a share whose requests say the platform kept more", acks: ack1001, plant: append(slices.Clone(autoAccepted1001), shared1001(10, 20)...),
			want: map[string]int{invSharingSplits: 1}},
		{name: "a share left unfinished", acks: ack1001, plant: append(slices.Clone(autoAccepted1001),
			`UPDATE payments SET profit_sharing = true, sub_mchid = '1900000100'`,
			`INSERT INTO profit_sharings (kind, payment_id, order_id, merchant_id, out_no, cause, status) SELECT 'share', p.id, p.order_id, o.merchant_id, 'S1', 'completed', 'PROCESSING' FROM payments p JOIN orders o ON o.id = p.order_id`,
			`UPDATE profit_sharings SET updated_at = now() - interval '1 minute'`),
			want: map[string]int{invSharingSplits: 1}},
		{name: "a share recorded just before the end", acks: ack1001, plant: append(slices.Clone(autoAccepted1001),
			`UPDATE payments SET profit_sharing = true, sub_mchid = '1900000100'`,
			`INSERT INTO profit_sharings (kind, payment_id, order_id, merchant_id, out_no, cause, status) SELECT 'share', p.id, p.order_id, o.merchant_id, 'S1', 'deadline', 'PENDING' FROM payments p JOIN orders o ON o.id = p.order_id`),
			want: map[string]int{}},
		{name: "a share recorded just before the instances stopped, checked a minute later", acks: ack1001, stoppedAgo: 50 * time.Second,
			plant: shareOpenAMinute,
			want:  map[string]int{}},
		{name: "a share left open long before the instances stopped", acks: ack1001, stoppedAgo: 10 * time.Second,
			plant: shareOpenAMinute,
			want:  map[string]int{invSharingSplits: 1}},
		{name: "payment anomaly", acks: ack1001, plant: []string{
			`INSERT INTO payment_anomalies (channel, notification_id, out_trade_no, kind, detail, payload) VALUES ('wechat', 'n', 'T1', 'amount', 'x', '{}')`},
			want: map[string]int{invAnomalies: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, initial := plantedShop(t, tc.plant)
			ctx := context.Background()
			dl := deadlines{grace: time.Second, autoComplete: time.Second}
			if tc.stoppedAgo > 0 {
				dl.stopped = time.Now().Add(-tc.stoppedAgo)
			}
			f, err := check(ctx, pool, tc.acks, initial, nil, tc.claims, dl)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for inv, n := range f.violations {
				if n > 0 {
					got[inv] = n
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s\nexamples: %v", diff, f.examples)
			}
			if tc.counts == nil {
				return
			}
			counts, err := discountCounts(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.counts, counts); diff != "" {
				t.Errorf("discount counts (-want +got):\n%s", diff)
			}
		})
	}
}

// pickup1001 makes order 1001 a pickup order with number n of its
// merchant's day, the day's counter at last (none for 0).
func pickup1001(n, last int) []string {
	plant := []string{fmt.Sprintf(`UPDATE orders SET fulfilment = 'pickup', pickup_day = '2026-12-07', pickup_no = %d`, n)}
	if last > 0 {
		plant = append(plant, fmt.Sprintf(`INSERT INTO pickup_counters (merchant_id, day, last) SELECT merchant_id, '2026-12-07', %d FROM orders`, last))
	}
	return plant
}

// slot1001 makes order 1001 a scheduled order, its slot counted taken
// times, with its hold or without.
func slot1001(taken int, hold bool) []string {
	plant := []string{
		`UPDATE orders SET slot_start = '2026-12-07T04:00:00Z', slot_end = '2026-12-07T04:15:00Z'`,
		fmt.Sprintf(`INSERT INTO slot_bookings (merchant_id, slot_start, taken) SELECT merchant_id, slot_start, %d FROM orders`, taken),
	}
	if hold {
		plant = append(plant, `INSERT INTO slot_holds (order_id, merchant_id, slot_start) SELECT id, merchant_id, slot_start FROM orders`)
	}
	return plant
}

// An adjustment retried into the ledger twice is found: more ledger rows
// than keys sent.
func TestCheckFindsAnAdjustmentCountedTwice(t *testing.T) {
	t.Parallel()
	pool := testenv.NewDB(t)
	initial, _ := consistentShop(t, pool)
	ctx := context.Background()
	var dish int64
	for d := range initial {
		dish = d
	}
	rs := newRestocks(dish)
	rs.sent["k1"], rs.acked["k1"] = 4, true
	for range 2 { // the one adjustment, applied twice
		if _, err := pool.Exec(ctx, `UPDATE dish_stock SET units = units + 4 WHERE shard = 0`); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO stock_adjustments (dish_id, kind, delta, on_hand_after, actor) VALUES ($1, 'delta', 4, 14, 'x')`, dish); err != nil {
			t.Fatal(err)
		}
	}
	f, err := check(ctx, pool, []ack{{purchase: 1, digest: "d1", order: "1001"}}, initial, rs, nil, deadlines{grace: time.Second, autoComplete: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if f.violations[invRestocksOnce] != 1 || f.violations[invStockConserved] != 0 {
		t.Errorf("violations %v, want the adjustment counted twice and the stock otherwise conserved", f.violations)
	}
}

// afterSale1001 plants an after-sales request of order 1001 for asked
// fen, agreed with a (settled) refund of refunded fen.
func afterSale1001(asked, refunded int) []string {
	return []string{
		fmt.Sprintf(`INSERT INTO refunds (payment_id, order_id, out_refund_no, amount_fen, reason, status, partial)
		 SELECT id, order_id, 'R1-P1', %d, 'r', 'FAILED', true FROM payments`, refunded),
		`UPDATE refunds SET status = 'SETTLED'`, // posted to the ledger as an operator's settle is
		fmt.Sprintf(`INSERT INTO after_sales (order_id, merchant_id, user_id, amount_fen, reason, respond_by, status, refund_id)
		 SELECT o.id, o.merchant_id, o.user_id, %d, 'r', now(), 'agreed', r.id FROM orders o, refunds r`, asked),
	}
}
