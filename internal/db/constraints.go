package db

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// RequiredUniqueIndexes returns the unique indexes that are the last line
// of defence of takeout's guarantees: a missing or invalid one would let a
// retry create a duplicate. The service checks them at start and /readyz
// reports them.
func RequiredUniqueIndexes() []string {
	return []string{
		"users_openid_key",                                // one user per WeChat openid
		"dishes_merchant_name_key",                        // a retried dish create makes no second dish
		"categories_merchant_name_key",                    // a retried category create makes no second category
		"orders_user_intent_key",                          // one order per (user, intent digest)
		"orders_user_content_seq_key",                     // one intent sequence number per content
		"stock_reservations_order_dish_key",               // one reservation per (order, dish)
		"idempotency_records_user_key_key",                // one completed response per (user, key)
		"worker_leases_pkey",                              // one holder per Snowflake worker id
		"payments_channel_mchid_out_trade_no_key",         // one payment row per (channel, mchid, out_trade_no)
		"payment_notifications_channel_id_key",            // one processed notification per id
		"payment_notifications_channel_txn_event_key",     // ... and per (transaction, event type)
		"refunds_out_refund_no_key",                       // one refund per out_refund_no
		"payment_anomalies_channel_notification_kind_key", // one anomaly record per notification and kind
		"ledger_entries_journal_account_key",              // one entry per journal and account: an event posted once
		"after_sales_one_open_idx",                        // one open after-sales request per order
	}
}

// ConstraintProblems checks RequiredUniqueIndexes and returns one line per
// index that is missing, not unique or not valid; none means all is well.
func ConstraintProblems(ctx context.Context, q dbsqlc.DBTX) ([]string, error) {
	required := RequiredUniqueIndexes()
	rows, err := dbsqlc.New().ConstraintIndexStatus(ctx, q, required)
	if err != nil {
		return nil, fmt.Errorf("check constraints: %w", err)
	}
	var problems []string
	for _, name := range required {
		i := slices.IndexFunc(rows, func(r dbsqlc.ConstraintIndexStatusRow) bool { return r.IndexName == name })
		switch {
		case i < 0:
			problems = append(problems, name+": missing")
		case !rows[i].Indisunique:
			problems = append(problems, name+": not unique")
		case !rows[i].Indisvalid:
			problems = append(problems, name+": invalid (rebuild it)")
		}
	}
	return problems, nil
}

// CheckConstraints is ConstraintProblems as a single error.
func CheckConstraints(ctx context.Context, q dbsqlc.DBTX) error {
	problems, err := ConstraintProblems(ctx, q)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("required unique constraints: %s", strings.Join(problems, "; "))
	}
	return nil
}
