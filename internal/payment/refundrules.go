package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
)

// WeChat Pay's rules for the refunds of one payment (one transaction): at
// most 50 (MaxRefundsPerPayment, refused when a refund is asked for), at
// least a minute apart, and sent in the order they were asked for. The
// refund job takes its turn before it calls WeChat: under the payment's
// row it waits for the earlier refunds of the transaction to be sent and
// for the last one sent to be Options.RefundGap old, then stamps its
// sent_at. A retry of a refund already sent is the same refund at WeChat
// (its out_refund_no), so it takes no turn.

// takeTurn stamps r as sent now, or returns how long it must wait.
func (s *Service) takeTurn(ctx context.Context, r dbsqlc.Refund) (time.Duration, error) {
	var wait time.Duration
	err := db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		if err := s.q.RefundTurnLock(ctx, tx, r.PaymentID); err != nil {
			return fmt.Errorf("lock payment: %w", err)
		}
		turn, err := s.q.RefundTurn(ctx, tx, dbsqlc.RefundTurnParams{PaymentID: r.PaymentID, ID: r.ID, TransactionID: r.TransactionID})
		if err != nil {
			return fmt.Errorf("read refund turn: %w", err)
		}
		now := s.o.Now()
		if s.o.Returns != nil {
			// Profit sharing may have moved since BeforeRefund looked.
			clear, err := s.o.Returns.ClearTx(ctx, tx, r)
			if err != nil {
				return err
			}
			if !clear {
				wait = time.Second
				return nil
			}
		}
		if turn.EarlierWaiting {
			wait = max(s.o.RefundGap, time.Second)
			return nil
		}
		if next := turn.LastSent.Add(s.o.RefundGap); next.After(now) {
			wait = next.Sub(now)
			return nil
		}
		return s.q.RefundMarkSent(ctx, tx, dbsqlc.RefundMarkSentParams{ID: r.ID, SentAt: &now})
	})
	return wait, err
}

// refundErrorCodes are the codes of WeChat Pay's refund API errors, with
// what each means for takeout (counted by takeout_refund_errors_total).
var refundErrorCodes = map[string]refundErrorAction{
	"SYSTEM_ERROR":          retryLater, // the platform's trouble: the same refund again
	"NOT_ENOUGH":            retryLater, // the merchant account's balance is short: again once funds arrive (alerted)
	"FREQUENCY_LIMITED":     backOff,    // too fast: wait a gap and send it again
	"USER_ACCOUNT_ABNORMAL": needsOperator,
	"INVALID_REQUEST":       needsOperator,
	"PARAM_ERROR":           needsOperator,
	"NO_AUTH":               needsOperator,
	"SIGN_ERROR":            needsOperator,
	"MCH_NOT_EXISTS":        needsOperator,
	"RESOURCE_NOT_EXISTS":   needsOperator,
	"REQUEST_BLOCKED":       needsOperator,
	"other":                 needsOperator,
}

type refundErrorAction int

const (
	retryLater refundErrorAction = iota
	backOff
	needsOperator
)

// refundFailed handles an error of the refund API for r: it returns what
// the job should return (nil when the refund now waits for an operator).
func (s *Service) refundFailed(ctx context.Context, r dbsqlc.Refund, err error) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return err // no answer: the same refund again
	}
	code := ae.Code
	action, known := refundErrorCodes[code]
	if !known {
		code, action = "other", needsOperator
		if ae.Status >= 500 {
			action = retryLater
		}
	}
	s.refundErrors.WithLabelValues(code).Inc()
	msg := fmt.Sprintf("%s (HTTP %d): %s", ae.Code, ae.Status, ae.Message)
	if rerr := s.q.RefundRecordError(ctx, s.o.Pool, dbsqlc.RefundRecordErrorParams{ID: r.ID, LastError: msg, Fail: action == needsOperator}); rerr != nil {
		return errors.Join(err, rerr)
	}
	switch action {
	case backOff:
		return river.JobSnooze(max(s.o.RefundGap, time.Second))
	case needsOperator:
		s.o.Logger.WarnContext(ctx, "refund refused: it needs an operator", "out_refund_no", r.OutRefundNo, "error", msg)
		return nil
	}
	return err
}
