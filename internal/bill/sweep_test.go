package bill

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/jobs"
	"github.com/takeout/takeout/internal/testenv"
)

// The sweep queues a run of each day since the first payment whose bill
// is out and that is not reconciled, once however often it runs.
func TestSweepQueuesMissedDays(t *testing.T) {
	t.Parallel()
	pool := testenv.NewDB(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 7, 11, 0, 0, 0, Shanghai) // yesterday's bill is out
	for _, q := range []string{
		`INSERT INTO users (openid) VALUES ('sweep')`,
		`INSERT INTO merchants (name) VALUES ('Sweep')`,
		`INSERT INTO orders (id, user_id, merchant_id, intent_digest, content_digest, intent_seq, digest_alg, status,
		   items_total_fen, delivery_fee_fen, total_fen, address, pay_deadline, created_at, updated_at)
		 SELECT 1, u.id, m.id, decode(repeat('ab', 32), 'hex'), decode(repeat('cd', 32), 'hex'), 1, 'SM3', 'PAID',
		   100, 0, 100, '{}', now(), now(), now() FROM users u, merchants m`,
		`INSERT INTO payments (order_id, channel, mchid, appid, out_trade_no, amount_fen, status, transaction_id, paid_at)
		 VALUES (1, 'wechatpay', 'm', 'a', 'T1-1', 100, 'SUCCESS', 'X1', '2026-12-03 12:00:00+08')`,
		`INSERT INTO reconciliations (bill_date, status) VALUES ('2026-12-04', 'done'), ('2026-12-05', 'failed')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	inserter, err := jobs.NewInserter(pool, slog.New(slog.DiscardHandler), 5)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewService(Options{Pool: pool, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	w := &SweepWorker{S: s, Jobs: inserter}
	for range 3 {
		if err := w.Work(ctx, &river.Job[SweepArgs]{}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, `SELECT args->>'date' FROM river_job WHERE kind = 'bill.run' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var dates []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		dates = append(dates, d)
	}
	if want := []string{"2026-12-03", "2026-12-05", "2026-12-06"}; !slices.Equal(dates, want) {
		t.Errorf("queued %v, want %v (the 4th is done; the 7th's bill is not out)", dates, want)
	}
}
