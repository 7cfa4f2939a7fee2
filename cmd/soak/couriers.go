package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/takeout/takeout/internal/courier"
	"github.com/takeout/takeout/internal/couriersim"
)

// The invariants of courier deliveries.
const (
	invOneActiveDelivery  = "each_dispatched_order_has_one_active_delivery"
	invDeliveryForward    = "no_delivery_status_goes_backward"
	invCourierFeesLedger  = "every_courier_fee_in_the_ledger"
	invCompletedDelivered = "no_order_completed_by_a_courier_undelivered"
	invCourierTruth       = "deliveries_agree_with_the_providers"
)

// courierDispatchOf is when the soak's merchant i hands its delivery
// orders to a courier: the first (the busiest) on accept, the second
// when ready, the third never (its staff dispatch).
func courierDispatchOf(i int) string {
	return []string{courier.DispatchAccept, courier.DispatchReady, courier.DispatchOff}[i]
}

// courierFaults are the courier providers' faults through the run: down,
// placements answered never, refused, failed after placing (Dada), no
// rider, riders reassigned, steps skipped, callbacks lost, repeated and
// reordered.
func courierFaults(callbackBase string) couriersim.Config {
	f := couriersim.Faults{DownRate: 0.03, HangRate: 0.02, RefuseRate: 0.03, NoRiderRate: 0.04, ReassignRate: 0.1,
		SkipRate: 0.1, LoseRate: 0.1, RepeatRate: 0.1, ReorderRate: 0.1}
	dada := f
	dada.FailRate = 0.03
	return couriersim.Config{Dada: dada, Meituan: f, MeituanCallbackURL: callbackBase + "/v1/couriers/meituan/callback"}
}

// setCourierFaults sets the courier simulator's faults (the callback
// address is the gateway's either way).
func setCourierFaults(ctx context.Context, client *http.Client, wxsimURL string, cfg couriersim.Config) error {
	body, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wxsimURL+"/couriersim/config", bytes.NewReader(body)) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("couriersim config: HTTP %d", resp.StatusCode)
	}
	return nil
}

// fetchCourierOrders reads every order the simulated providers took.
func fetchCourierOrders(ctx context.Context, client *http.Client, wxsimURL string) ([]couriersim.Order, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, wxsimURL+"/couriersim/orders", nil) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Orders []couriersim.Order `json:"orders"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("couriersim orders: %w", err)
	}
	return out.Orders, nil
}

// takeOverFailedDeliveries is the merchant seeing the board's red
// banner: it dispatches by hand the orders the couriers gave up on.
func (d *driver) takeOverFailedDeliveries(ctx context.Context, m merchant) {
	if !m.Courier {
		return
	}
	r := d.call(ctx, entry{Op: "staff_deliveries", Method: "GET", Path: "/admin/v1/deliveries?final=true&merchant_id=" + m.ID, Inst: d.randInst()}, m.Staff, nil, nil)
	if !r.ok() {
		return
	}
	var page struct {
		Deliveries []struct {
			OrderID string `json:"order_id"`
		} `json:"deliveries"`
	}
	_ = json.Unmarshal(r.body, &page)
	for _, del := range page.Deliveries {
		d.retry(ctx, entry{Op: "staff_dispatch", Method: "POST", Path: "/admin/v1/orders/" + del.OrderID + "/dispatch", Order: del.OrderID}, m.Staff, nil, nil)
	}
}

// courierStaffAction is what a courier merchant's staff do instead: the
// riders pick the orders up and deliver them, so the staff only mark
// them ready (and confirm a few deliveries themselves).
func courierStaffAction(action, status string, h uint32) string {
	switch {
	case action == "dispatch" && status == "ACCEPTED":
		return "ready"
	case action == "dispatch":
		return ""
	case action == "complete" && h >= 10:
		return ""
	}
	return action
}

// checkCouriers holds the run's deliveries to the invariants and to the
// simulated providers' truth, and returns their counts for the report.
func checkCouriers(ctx context.Context, client *http.Client, wxsimURL string, db querier, f *findings) (map[string]int, error) {
	if err := checkDeliveries(ctx, db, f); err != nil {
		return nil, err
	}
	orders, err := fetchCourierOrders(ctx, client, wxsimURL)
	if err != nil {
		return nil, err
	}
	if err := checkCourierTruth(ctx, db, orders, f); err != nil {
		return nil, err
	}
	return courierCounts(ctx, db, orders)
}

// checkDeliveries holds the deliveries to the invariants the database
// alone answers.
func checkDeliveries(ctx context.Context, db querier, f *findings) error {
	for _, c := range []struct {
		inv, query string
	}{
		// At most one active delivery per order, none left for an order
		// that no longer waits for one, and one at least for every order a
		// courier merchant accepted (or marked ready).
		{invOneActiveDelivery, `SELECT 'order ' || order_id || ': ' || count(*) || ' active deliveries' FROM deliveries
			WHERE status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED') GROUP BY order_id HAVING count(*) > 1`},
		{invOneActiveDelivery, `SELECT 'order ' || o.id || ' is ' || o.status || ' with delivery ' || d.out_no || ' ' || d.status
			FROM deliveries d JOIN orders o ON o.id = d.order_id
			WHERE d.status NOT IN ('DELIVERED', 'CANCELLED', 'FAILED') AND o.status IN ('REFUNDING', 'REFUNDED', 'COMPLETED', 'CANCELLED')`},
		{invOneActiveDelivery, `SELECT 'order ' || o.id || ' (' || m.courier_dispatch || ') went ' || h.to_status || ' and has no delivery'
			FROM orders o JOIN merchants m ON m.id = o.merchant_id
			JOIN order_status_history h ON h.order_id = o.id AND h.to_status = CASE m.courier_dispatch WHEN 'accept' THEN 'ACCEPTED' ELSE 'READY' END
			WHERE m.courier_dispatch <> 'off' AND o.fulfilment = 'delivery' AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.order_id = o.id)`},
		// Along each delivery's events a status never goes back, the
		// events are numbered without a gap, and the last is the status.
		{invDeliveryForward, `WITH e AS (SELECT delivery_id, seq, status,
			    array_position(ARRAY['PLACED','ASSIGNED','ARRIVED','PICKED_UP','DELIVERED'], status) AS step,
			    lag(array_position(ARRAY['PLACED','ASSIGNED','ARRIVED','PICKED_UP','DELIVERED'], status)) OVER w AS prev_step,
			    lag(status) OVER w AS prev, row_number() OVER w AS n
			  FROM delivery_events WINDOW w AS (PARTITION BY delivery_id ORDER BY seq))
			SELECT 'delivery ' || delivery_id || ' seq ' || seq || ': ' || coalesce(prev, '-') || ' -> ' || status FROM e
			WHERE n <> seq OR prev IN ('DELIVERED', 'CANCELLED', 'FAILED') OR (step IS NOT NULL AND prev_step IS NOT NULL AND step < prev_step)`},
		{invDeliveryForward, `SELECT 'delivery ' || d.id || ' is ' || d.status || ', its last event ' || coalesce(e.status, 'none')
			FROM deliveries d LEFT JOIN LATERAL (SELECT status, seq FROM delivery_events WHERE delivery_id = d.id ORDER BY seq DESC LIMIT 1) e ON true
			WHERE d.status <> 'QUOTED' AND (e.status IS DISTINCT FROM d.status OR e.seq <> d.seq)`},
		// Every fee charged is in the ledger, once, and nothing else is.
		{invCourierFeesLedger, `WITH posted AS (SELECT ref, sum(amount_fen) FILTER (WHERE account = 'merchant_courier_fees') AS cost,
			    sum(amount_fen) FILTER (WHERE account = 'courier_payable') AS owed
			  FROM ledger_entries WHERE kind IN ('courier_fee', 'courier_cancel_fee') GROUP BY ref)
			SELECT 'delivery ' || d.out_no || ' ' || d.status || ': charged ' || x.charged || ', in the ledger ' || coalesce(p.cost, 0)
			FROM deliveries d CROSS JOIN LATERAL (SELECT
			    CASE WHEN d.status = 'DELIVERED' THEN coalesce(d.fee_fen, 0) + d.tip_fen ELSE 0 END + d.cancel_fee_fen AS charged) x
			LEFT JOIN posted p ON p.ref = d.out_no
			WHERE x.charged <> coalesce(p.cost, 0) OR coalesce(p.owed, 0) <> -coalesce(p.cost, 0)`},
		{invCourierFeesLedger, `SELECT 'courier journal ' || journal || ' of no delivery' FROM ledger_entries e
			WHERE kind IN ('courier_fee', 'courier_cancel_fee') AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.out_no = e.ref)`},
		// An order the courier completed was delivered; a delivered
		// delivery's order went on (completed, or refunded since).
		{invCompletedDelivered, `SELECT 'order ' || h.order_id || ' completed by the courier without a delivered delivery' FROM order_status_history h
			WHERE h.actor = 'system:courier' AND h.to_status = 'COMPLETED'
			  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.order_id = h.order_id AND d.status = 'DELIVERED')`},
		{invCompletedDelivered, `SELECT 'order ' || o.id || ' is ' || o.status || ' though delivery ' || d.out_no || ' was delivered' FROM deliveries d
			JOIN orders o ON o.id = d.order_id WHERE d.status = 'DELIVERED' AND o.status NOT IN ('COMPLETED', 'REFUNDED')`},
	} {
		if err := addRows(ctx, db, f, c.inv, c.query); err != nil {
			return fmt.Errorf("%s: %w", c.inv, err)
		}
	}
	return nil
}

// addRows adds a violation of inv for each row (a description) query
// returns.
func addRows(ctx context.Context, db querier, f *findings, inv, query string) error {
	rows, err := db.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var ex string
		if err := rows.Scan(&ex); err != nil {
			return err
		}
		f.add(inv, 1, ex)
	}
	return rows.Err()
}

// checkCourierTruth holds every order the providers took to our record of
// it: each is ours, both ended (after the settle), the same way, with the
// same fees.
func checkCourierTruth(ctx context.Context, db querier, orders []couriersim.Order, f *findings) error {
	rows, err := db.Query(ctx, `SELECT out_no, provider, status, coalesce(fee_fen, 0), tip_fen, cancel_fee_fen FROM deliveries`)
	if err != nil {
		return err
	}
	defer rows.Close()
	type ours struct {
		provider, status    string
		fee, tip, cancelFee int64
	}
	mine := map[string]ours{}
	for rows.Next() {
		var no string
		var o ours
		if err := rows.Scan(&no, &o.provider, &o.status, &o.fee, &o.tip, &o.cancelFee); err != nil {
			return err
		}
		mine[no] = o
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, p := range orders {
		o, ok := mine[p.OutNo]
		var broken string
		switch {
		case !ok:
			broken = "placed at the provider, unknown here"
		case o.provider != p.Provider:
			broken = "placed with " + p.Provider + ", recorded with " + o.provider
		case !p.Status.Terminal():
			broken = fmt.Sprintf("still %s at the provider after the settle (here %s)", p.Status, o.status)
		case (p.Status == courier.Delivered) != (o.status == string(courier.Delivered)):
			broken = fmt.Sprintf("%s at the provider, %s here", p.Status, o.status)
		case p.Status == courier.Delivered && (p.FeeFen != o.fee || p.TipFen != o.tip):
			broken = fmt.Sprintf("charged %d + tip %d, recorded %d + %d", p.FeeFen, p.TipFen, o.fee, o.tip)
		case p.CancelFee != o.cancelFee:
			broken = fmt.Sprintf("cancel fee %d at the provider, %d here", p.CancelFee, o.cancelFee)
		}
		if broken != "" {
			f.add(invCourierTruth, 1, p.OutNo+": "+broken)
		}
	}
	return nil
}

// courierCounts are the run's deliveries for the report: a run whose
// couriers never reassigned, failed or were replaced proves nothing
// about them.
func courierCounts(ctx context.Context, db querier, orders []couriersim.Order) (map[string]int, error) {
	out := map[string]int{"courier_orders_at_providers": len(orders)}
	for _, o := range orders {
		if len(o.Riders) > 1 {
			out["courier_riders_reassigned"] += len(o.Riders) - 1
		}
		out["courier_callbacks_sent"] += o.Callbacks
	}
	var deliveries, delivered, replaced, final, cancelFees, fees int
	if err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'DELIVERED'), count(*) FILTER (WHERE attempt > 1),
		    count(*) FILTER (WHERE status IN ('CANCELLED', 'FAILED') AND attempt = (SELECT max(attempt) FROM deliveries n WHERE n.order_id = deliveries.order_id)
		                     AND EXISTS (SELECT 1 FROM orders o WHERE o.id = deliveries.order_id AND o.status NOT IN ('REFUNDING', 'REFUNDED'))),
		    count(*) FILTER (WHERE cancel_fee_fen > 0),
		    (SELECT count(*) FROM ledger_entries WHERE kind IN ('courier_fee', 'courier_cancel_fee') AND account = 'merchant_courier_fees')
		FROM deliveries`).Scan(&deliveries, &delivered, &replaced, &final, &cancelFees, &fees); err != nil {
		return nil, fmt.Errorf("courier counts: %w", err)
	}
	out["deliveries"], out["deliveries_delivered"], out["deliveries_replacing_another"] = deliveries, delivered, replaced
	out["deliveries_given_up"], out["deliveries_with_a_cancel_fee"], out["courier_fees_posted"] = final, cancelFees, fees
	return out, nil
}
