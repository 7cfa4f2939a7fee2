package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/takeout/takeout/internal/wxsim"
)

// checkSharingAtWeChat holds the run to invSharingSplits as WeChat Pay
// (wxsim) keeps the books: for each sharing transaction nothing is left
// frozen once shared, what the platform kept plus what the merchant kept
// is what was paid less refunds, and the platform's part is the one our
// ledger posted for that payment. It returns the report's counts.
func checkSharingAtWeChat(ctx context.Context, client *http.Client, wxsimURL string, db querier, f *findings) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, wxsimURL+"/sim/sharing", nil) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st wxsim.SharingState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("wxsim sharing: %w", err)
	}
	rows, err := db.Query(ctx, `SELECT p.out_trade_no, coalesce(sum(e.amount_fen) FILTER (WHERE e.account = 'platform_shared'), 0)::bigint,
		    EXISTS (SELECT 1 FROM profit_sharings s WHERE s.payment_id = p.id AND s.kind = 'share' AND s.status = 'SUCCESS')
		FROM payments p LEFT JOIN ledger_entries e ON e.payment_id = p.id
		WHERE p.profit_sharing AND p.transaction_id IS NOT NULL GROUP BY p.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type ours struct {
		platform int64
		shared   bool
	}
	byTrade := map[string]ours{}
	for rows.Next() {
		var no string
		var o ours
		if err := rows.Scan(&no, &o.platform, &o.shared); err != nil {
			return nil, err
		}
		byTrade[no] = o
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	counts := map[string]int{"sharing_transactions_at_wechat": len(st.Transactions), "shared_at_wechat": 0}
	for _, t := range st.Transactions {
		o, known := byTrade[t.OutTradeNo]
		if !known || !o.shared {
			continue // not shared (yet): its money is frozen or refunded
		}
		counts["shared_at_wechat"]++
		platform, merchant := t.Shared-t.Returned, t.Unfrozen+t.Returned-t.FromBalance
		if t.Frozen != 0 || platform+merchant != t.Total-t.Refunded || platform != o.platform {
			f.add(invSharingSplits, 1, fmt.Sprintf("%s at WeChat: paid %d, refunded %d, %d frozen; the platform kept %d (our ledger %d), the merchant %d",
				t.OutTradeNo, t.Total, t.Refunded, t.Frozen, platform, o.platform, merchant))
		}
	}
	return counts, nil
}
