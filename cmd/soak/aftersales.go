package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
)

// After-sales requests in the run: customers of orders on the way or
// completed ask for some money back (copies of one request at once,
// under one key); each merchant's staff agree some, reject others
// (sometimes both at once), and leave the rest to the deadline
// (afterSalesRespondWithin); some rejections are escalated and left to
// wait for the platform.

// invAfterSaleRefundedOnce: every agreed request has exactly one refund,
// of what was asked, no refund answers two requests, and no order has two
// open requests.
const invAfterSaleRefundedOnce = "each_agreed_request_refunded_once"

// afterSalesRespondWithin is the merchants' time to answer in the run.
const afterSalesRespondWithin = "20s"

// sessions remembers the customer's token of each order placed.
type sessions struct{ m sync.Map }

func (s *sessions) put(orderID, token string) { s.m.Store(orderID, token) }

func (s *sessions) get(orderID string) (string, bool) {
	v, ok := s.m.Load(orderID)
	if !ok {
		return "", false
	}
	return v.(string), true
}

// afterSales drives one merchant's after-sales requests: each order on
// the way or completed is asked about once (its fate fixed by its id).
func (d *driver) afterSales(ctx context.Context, m merchant) {
	for _, status := range []string{"DELIVERING", "COMPLETED"} {
		r := d.call(ctx, entry{Op: "staff_search", Method: "GET", Path: "/admin/v1/orders?limit=50&merchant_id=" + m.ID + "&status=" + status, Inst: d.randInst()},
			m.Staff, nil, nil)
		if !r.ok() {
			continue
		}
		var page struct {
			Orders []struct {
				ID string `json:"id"`
			} `json:"orders"`
		}
		_ = json.Unmarshal(r.body, &page)
		for _, o := range page.Orders {
			h := fnv.New32a()
			_, _ = h.Write([]byte(o.ID + "after-sales"))
			pick := h.Sum32() % 100
			token, ok := d.sessions.get(o.ID)
			if pick >= 15 || !ok {
				continue
			}
			if _, loaded := d.askedAfter.LoadOrStore(o.ID, true); loaded {
				continue
			}
			d.afterSale(ctx, m, o.ID, token, pick)
		}
	}
}

// afterSale asks about one order and plays the merchant's answer.
func (d *driver) afterSale(ctx context.Context, m merchant, orderID, token string, pick uint32) {
	key := "after-" + orderID
	body := map[string]any{"amount_fen": 50 + 10*pick, "reason": "soak: not as ordered", "photos": []string{"https://cdn.example.com/soak.jpg"}}
	answers := make([]result, 1+rand.IntN(3))
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			answers[i] = d.retry(ctx, entry{Op: "after_sale", Method: "POST", Path: "/v1/orders/" + orderID + "/after-sales", Order: orderID, Key: key},
				token, body, map[string]string{"Idempotency-Key": key})
		})
	}
	wg.Wait()
	var req struct {
		ID string `json:"id"`
	}
	if !answers[0].ok() || json.Unmarshal(answers[0].body, &req) != nil {
		return // refused (more than is left to refund, an order refunded meanwhile): fine
	}
	d.afterSaleRequests.Add(1)
	decide := func(action string) {
		b := map[string]any{}
		if action == "reject" {
			b["note"] = "soak: as ordered"
		}
		d.retry(ctx, entry{Op: "after_sale_" + action, Method: "POST", Path: "/admin/v1/after-sales/" + req.ID + "/" + action, Order: orderID}, m.Staff, b, nil)
	}
	switch {
	case pick < 5:
		decide("agree")
	case pick < 8:
		decide("reject")
		if pick%2 == 0 {
			d.retry(ctx, entry{Op: "after_sale_escalate", Method: "POST", Path: "/v1/after-sales/" + req.ID + "/escalate", Order: orderID}, token,
				map[string]any{"note": "soak: it was not"}, nil)
		}
	case pick < 11:
		// The merchant's two taps at once: one outcome.
		var taps sync.WaitGroup
		taps.Go(func() { decide("agree") })
		taps.Go(func() { decide("reject") })
		taps.Wait()
	default:
		// Left for the deadline to agree.
	}
}

// checkAfterSales holds the run to invAfterSaleRefundedOnce and finds
// requests left waiting for the merchant past their deadline.
func checkAfterSales(ctx context.Context, db querier, dl deadlines, f *findings) error {
	rows, err := db.Query(ctx, `
	  SELECT 'request ' || a.id || ' agreed without its refund' FROM after_sales a
	   LEFT JOIN refunds r ON r.id = a.refund_id
	   WHERE a.status = 'agreed' AND (r.id IS NULL OR r.order_id <> a.order_id OR (a.amount_fen IS NOT NULL AND r.amount_fen <> a.amount_fen))
	  UNION ALL
	  SELECT 'refund ' || refund_id || ' answers ' || count(*) || ' requests' FROM after_sales
	   WHERE refund_id IS NOT NULL GROUP BY refund_id HAVING count(*) > 1
	  UNION ALL
	  SELECT 'order ' || order_id || ' has ' || count(*) || ' open requests' FROM after_sales
	   WHERE status IN ('requested', 'escalated') GROUP BY order_id HAVING count(*) > 1`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return err
		}
		f.add(invAfterSaleRefundedOnce, 1, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = db.Query(ctx, `SELECT 'after-sales request ' || id || ' waiting for the merchant past its deadline ' || respond_by
	   FROM after_sales WHERE status = 'requested' AND respond_by < $2::timestamptz - $1::interval`, dl.grace.String(), dl.asOf())
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		f.add(invStuck, 1, s)
	}
	return rows.Err()
}

// afterSaleCounts are the report's figures of after-sales requests.
func afterSaleCounts(ctx context.Context, db querier) (map[string]int, error) {
	out := map[string]int{}
	rows, err := db.Query(ctx, `SELECT 'after_sales_' || status, count(*)::int FROM after_sales GROUP BY status
	  UNION ALL SELECT 'after_sales_agreed_at_deadline', count(*)::int FROM after_sales WHERE status = 'agreed' AND decided_by LIKE 'system%'`)
	if err != nil {
		return nil, fmt.Errorf("after-sales counts: %w", err)
	}
	defer rows.Close()
	for _, k := range []string{"after_sales_requested", "after_sales_agreed", "after_sales_rejected", "after_sales_escalated", "after_sales_refused", "after_sales_agreed_at_deadline"} {
		out[k] = 0
	}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}
