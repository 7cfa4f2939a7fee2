package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/takeout/takeout/internal/wxsim"
)

// invShippedOnce: every order dispatched or collected has its shipping
// upload, settled (uploaded, or skipped or refused for a payment refunded
// first), and WeChat took at most one upload of each payment: exactly
// one for each upload recorded as uploaded.
const invShippedOnce = "each_dispatched_order_shipped_once"

// fetchShipping reads every upload wxsim received, by out_trade_no.
func fetchShipping(ctx context.Context, client *http.Client, wxsimURL string) (map[string][]wxsim.ShippingUpload, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, wxsimURL+"/sim/shipping", nil) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var log wxsim.ShippingLog
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil {
		return nil, fmt.Errorf("wxsim shipping: %w", err)
	}
	return log.Uploads, nil
}

// checkShipping holds the run to invShippedOnce and returns the report's
// counts of uploads.
func checkShipping(ctx context.Context, client *http.Client, wxsimURL string, db querier, f *findings) (map[string]int, error) {
	taken, err := fetchShipping(ctx, client, wxsimURL)
	if err != nil {
		return nil, err
	}
	accepted := map[string]int{}
	for no, ups := range taken {
		for _, u := range ups {
			if u.Errcode == 0 {
				accepted[no]++
			}
		}
	}
	rows, err := db.Query(ctx, `
		SELECT o.id, coalesce(s.status, ''),
		       coalesce((SELECT p.out_trade_no FROM payments p WHERE p.order_id = o.id AND p.transaction_id IS NOT NULL ORDER BY p.paid_at, p.id LIMIT 1), ''),
		       o.status = 'REFUNDED' OR EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id AND p.status = 'REFUNDED')
		FROM orders o LEFT JOIN shipping_uploads s ON s.order_id = o.id
		WHERE EXISTS (SELECT 1 FROM order_status_history h WHERE h.order_id = o.id
		              AND (h.to_status = 'DELIVERING' OR (h.from_status = 'READY' AND h.to_status = 'COMPLETED')))`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[string]int{"shipping_uploads": 0, "shipping_uploaded": 0, "shipping_refused": 0, "shipping_skipped": 0}
	for rows.Next() {
		var id int64
		var status, outTradeNo string
		var refunded bool
		if err := rows.Scan(&id, &status, &outTradeNo, &refunded); err != nil {
			return nil, err
		}
		counts["shipping_uploads"]++
		if status != "" {
			counts["shipping_"+status]++
		}
		n := accepted[outTradeNo]
		var broken string
		switch {
		case status == "":
			broken = "dispatched without a shipping upload"
		case status == "pending" || status == "failed":
			broken = "its upload is " + status
		case (status == "refused" || status == "skipped") && !refunded:
			broken = "its upload was " + status + ", and it was not refunded"
		case n > 1:
			broken = fmt.Sprintf("WeChat took %d uploads of its payment", n)
		case status == "uploaded" && n != 1:
			broken = "recorded uploaded, and WeChat took none"
		}
		if broken != "" {
			f.add(invShippedOnce, 1, fmt.Sprintf("order %d: %s", id, broken))
		}
	}
	return counts, rows.Err()
}
