package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/paystate"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/statemachine"
)

// A refund that ends ABNORMAL or CLOSED at the platform is FAILED: money
// owed to a customer, which must never stay stuck silently. Operators
// list these (GET /admin/v1/refunds), retry one (a new refund with a new
// out_refund_no; the platform keeps a failed one failed) or settle it
// outside WeChat with a note, and an alert fires on
// takeout_refunds_needing_attention.

// Refund is a refund as operators see it.
type Refund struct {
	OutRefundNo   string          `json:"out_refund_no"`
	OrderID       string          `json:"order_id"`
	AmountFen     int64           `json:"amount_fen"`
	Status        paystate.Refund `json:"status"`
	Reason        string          `json:"reason"`
	Note          string          `json:"note"`
	TransactionID *string         `json:"transaction_id"`
	// Partial refunds give back lines (units of the order's lines) or an
	// amount; Restock says whether the lines' stock went back on sale.
	Partial   bool            `json:"partial"`
	Lines     json.RawMessage `json:"lines"`
	Restock   bool            `json:"restock"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

func refundFromRow(r dbsqlc.Refund) Refund {
	return Refund{OutRefundNo: r.OutRefundNo, OrderID: strconv.FormatInt(r.OrderID, 10), AmountFen: r.AmountFen, Status: r.Status,
		Reason: r.Reason, Note: r.Note, TransactionID: r.TransactionID, Partial: r.Partial, Lines: json.RawMessage(r.Lines), Restock: r.Restock,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// RefundPage is a page of refunds, oldest first.
type RefundPage struct {
	Refunds    []Refund `json:"refunds"`
	NextCursor *string  `json:"next_cursor"`
}

// Refunds lists refunds in status after the cursor (the last id seen).
func (s *Service) Refunds(ctx context.Context, status paystate.Refund, after int64, limit int) (RefundPage, error) {
	rows, err := s.q.RefundsByStatus(ctx, s.o.Pool, dbsqlc.RefundsByStatusParams{Status: status, AfterID: after, MaxRows: int32(limit + 1)}) //nolint:gosec // G115: limit <= 200
	if err != nil {
		return RefundPage{}, fmt.Errorf("list refunds: %w", err)
	}
	page := RefundPage{Refunds: make([]Refund, 0, len(rows))}
	if len(rows) > limit {
		rows = rows[:limit]
		c := strconv.FormatInt(rows[limit-1].ID, 10)
		page.NextCursor = &c
	}
	for _, r := range rows {
		page.Refunds = append(page.Refunds, refundFromRow(r))
	}
	return page, nil
}

// Errors of the refund actions.
var (
	ErrRefundNotFound = problem.New(problem.NotFound, "no such refund")
)

func refundConflict(r dbsqlc.Refund, action string) error {
	return problem.New(problem.RefundStatusConflict, "only a FAILED refund can be %s; this one is %s", action, r.Status).With("current_status", r.Status)
}

// RetryRefund replaces a FAILED refund by a new one for the same money
// (the platform keeps a failed out_refund_no failed), in one transaction
// with its job; the failed one becomes RETRIED with the note. Retrying a
// refund already retried answers with its replacement.
func (s *Service) RetryRefund(ctx context.Context, outRefundNo, note, by string) (Refund, error) {
	return db.WithTxV(ctx, s.o.Pool, func(tx pgx.Tx) (Refund, error) {
		old, err := s.lockRefund(ctx, tx, outRefundNo)
		if err != nil {
			return Refund{}, err
		}
		next := retryNo(outRefundNo)
		if old.Status == paystate.Retried {
			r, err := s.q.RefundGetByOutRefundNo(ctx, tx, next)
			if err != nil {
				return Refund{}, fmt.Errorf("read the retry of %s: %w", outRefundNo, err)
			}
			return refundFromRow(r), nil
		}
		if old.Status != paystate.Failed {
			return Refund{}, refundConflict(old, "retried")
		}
		if _, err := s.q.RefundClose(ctx, tx, dbsqlc.RefundCloseParams{OutRefundNo: outRefundNo, Status: paystate.Retried, Note: by + ": " + note}); err != nil {
			return Refund{}, err
		}
		r, err := s.q.RefundInsertRetry(ctx, tx, dbsqlc.RefundInsertRetryParams{NewOutRefundNo: next, Reason: "retry of " + outRefundNo + ": " + note, RetryOf: outRefundNo})
		if err != nil {
			return Refund{}, fmt.Errorf("insert the retry of %s: %w", outRefundNo, err)
		}
		if err := s.o.Effects.refundJobTx(ctx, tx, r.OutRefundNo); err != nil {
			return Refund{}, err
		}
		return refundFromRow(r), nil
	})
}

// lockRefund reads a refund and holds it for an operator's action.
func (s *Service) lockRefund(ctx context.Context, tx pgx.Tx, outRefundNo string) (dbsqlc.Refund, error) {
	r, err := s.q.RefundGetForUpdate(ctx, tx, outRefundNo)
	if errors.Is(err, db.ErrNotFound) {
		return r, ErrRefundNotFound
	}
	return r, err
}

// retryNo is the out_refund_no of a refund's retry: R…_2, R…_3, ...
// (characters the platform takes in an out_refund_no).
func retryNo(outRefundNo string) string {
	if i := strings.LastIndex(outRefundNo, "_"); i >= 0 {
		if n, err := strconv.Atoi(outRefundNo[i+1:]); err == nil {
			return outRefundNo[:i] + "_" + strconv.Itoa(n+1)
		}
	}
	return outRefundNo + "_2"
}

// SettleRefund records that a FAILED refund's money went back to the
// customer outside WeChat (note says how), and its order leaves
// REFUNDING for REFUNDED, in one transaction. Settling it again changes
// nothing.
func (s *Service) SettleRefund(ctx context.Context, outRefundNo, note, by string) (Refund, error) {
	return db.WithTxV(ctx, s.o.Pool, func(tx pgx.Tx) (Refund, error) {
		old, err := s.lockRefund(ctx, tx, outRefundNo)
		if err != nil {
			return Refund{}, err
		}
		if old.Status == paystate.Settled {
			return refundFromRow(old), nil
		}
		if old.Status != paystate.Failed {
			return Refund{}, refundConflict(old, "settled")
		}
		r, err := s.q.RefundClose(ctx, tx, dbsqlc.RefundCloseParams{OutRefundNo: outRefundNo, Status: paystate.Settled, Note: by + ": " + note})
		if err != nil {
			return Refund{}, err
		}
		err = s.endIfRefunded(ctx, tx, r, order.Actor{Kind: statemachine.Admin, Name: by}, "refund settled outside WeChat: "+note)
		return refundFromRow(r), err
	})
}

// refundsCollector reports the refunds needing attention, counted in the
// database at each scrape (an index holds only them).
type refundsCollector struct {
	s    *Service
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *refundsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *refundsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.s.q.RefundsNeedingAttention(ctx, c.s.o.Pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}

// RefundView is a refund's row as the API shows it.
func RefundView(r dbsqlc.Refund) Refund { return refundFromRow(r) }
