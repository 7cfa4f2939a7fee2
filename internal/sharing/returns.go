package sharing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/payment"
)

// A refund of a payment frozen for sharing leaves WeChat Pay from what is
// still frozen, or, once the payment was shared, from the merchant's own
// account. The platform keeps commission only on what stays sold, so
// before such a refund is sent the platform's account returns (回退) the
// refund's part of the commission to the merchant's: what was shared
// less what the order owes after the refund (the ledger's proportional
// figure). Refunds and shares of one payment take turns on its row: a
// refund waits for a share in flight, and after a share for the refunds
// asked for before it (and any sent); a share waits for the refunds
// sent.

// BeforeRefund makes refund r ready to send: it returns what r needs of
// the shared money (sending the return, or asking how it went) and says
// how long to wait when that is not done. A FAILED return holds the
// refund until an operator retries it.
func (s *Service) BeforeRefund(ctx context.Context, r dbsqlc.Refund) (time.Duration, error) {
	p, err := s.q.PaymentGetByID(ctx, s.o.Pool, r.PaymentID)
	if err != nil {
		return 0, fmt.Errorf("read payment: %w", err)
	}
	if !p.ProfitSharing || r.TransactionID != nil {
		return 0, nil
	}
	var ret dbsqlc.ProfitSharing
	var wait time.Duration
	err = db.WithTx(ctx, s.o.Pool, func(tx pgx.Tx) error {
		if _, err := s.q.SharingPaymentForUpdate(ctx, tx, p.ID); err != nil {
			return fmt.Errorf("lock payment: %w", err)
		}
		need, share, hold, err := s.returnNeeded(ctx, tx, r)
		if err != nil || hold {
			wait = s.o.Poll
			return err
		}
		if need == 0 {
			return nil
		}
		ret, err = s.q.SharingLiveReturn(ctx, tx, &r.ID)
		if errors.Is(err, db.ErrNotFound) {
			attempt, err := s.q.SharingLastAttempt(ctx, tx, dbsqlc.SharingLastAttemptParams{PaymentID: p.ID, RefundID: &r.ID})
			if err != nil {
				return err
			}
			ret, err = s.q.SharingInsert(ctx, tx, dbsqlc.SharingInsertParams{Kind: KindReturn, PaymentID: p.ID, OrderID: p.OrderID,
				MerchantID: share.MerchantID, RefundID: &r.ID, Attempt: attempt + 1, OutNo: ReturnNo(r.OutRefundNo, attempt+1),
				Cause: r.OutRefundNo, AmountFen: need})
			if err != nil {
				return fmt.Errorf("record return: %w", err)
			}
			now := s.o.Now()
			_, err = s.q.SharingMarkSent(ctx, tx, dbsqlc.SharingMarkSentParams{ID: ret.ID, AmountFen: need, SentAt: &now})
			ret.Status = StatusProcessing
			return err
		}
		return err
	})
	if err != nil || wait > 0 || ret.ID == 0 {
		return wait, err
	}
	switch ret.Status {
	case StatusSuccess:
		return 0, nil
	case StatusFailed:
		return s.o.FailedWait, nil // an operator's: retried as a new attempt
	}
	share, err := s.q.SharingLiveShare(ctx, s.o.Pool, p.ID)
	if err != nil {
		return 0, fmt.Errorf("read share: %w", err)
	}
	var got payment.SharingReturn
	if ret.WxID == nil {
		got, err = s.o.Client.ReturnShare(ctx, payment.SubOf(p), share.OutNo, ret.OutNo, ret.AmountFen, "refund "+r.OutRefundNo)
	} else {
		got, err = s.o.Client.QueryReturn(ctx, payment.SubOf(p), share.OutNo, ret.OutNo)
	}
	if err != nil {
		if code, final := refusal(err); final {
			return s.o.FailedWait, s.finish(ctx, ret, StatusFailed, code, nil)
		}
		return 0, err
	}
	if got.ReturnID != "" && ret.WxID == nil {
		if err := s.q.SharingSetWxID(ctx, s.o.Pool, dbsqlc.SharingSetWxIDParams{ID: ret.ID, WxID: &got.ReturnID}); err != nil {
			return 0, err
		}
	}
	switch got.Result {
	case payment.ReturnSuccess:
		return 0, s.finish(ctx, ret, StatusSuccess, "", nil)
	case payment.ReturnFailed:
		return s.o.FailedWait, s.finish(ctx, ret, StatusFailed, got.FailReason, nil)
	}
	return s.o.Poll, nil
}

// ClearTx reports, in the refund's turn (tx holds the payment's row),
// whether refund r may be sent now: no share of its payment is in
// flight, and what r needs of the shared money came back.
func (s *Service) ClearTx(ctx context.Context, tx pgx.Tx, r dbsqlc.Refund) (bool, error) {
	p, err := s.q.PaymentGetByID(ctx, tx, r.PaymentID)
	if err != nil {
		return false, fmt.Errorf("read payment: %w", err)
	}
	if !p.ProfitSharing || r.TransactionID != nil {
		return true, nil
	}
	need, _, hold, err := s.returnNeeded(ctx, tx, r)
	if err != nil || hold {
		return false, err
	}
	if need == 0 {
		return true, nil
	}
	ret, err := s.q.SharingLiveReturn(ctx, tx, &r.ID)
	if errors.Is(err, db.ErrNotFound) {
		return false, nil
	}
	return err == nil && ret.Status == StatusSuccess, err
}

// returnNeeded is what refund r needs returned of its payment's shared
// money (0 when the payment was not shared), the payment's share, and
// whether r must wait: a share in flight, or (after a share) a refund of
// the payment asked for before r, or sent, that has not ended.
func (s *Service) returnNeeded(ctx context.Context, tx pgx.Tx, r dbsqlc.Refund) (need int64, share dbsqlc.ProfitSharing, hold bool, err error) {
	share, err = s.q.SharingLiveShare(ctx, tx, r.PaymentID)
	if errors.Is(err, db.ErrNotFound) {
		return 0, share, false, nil // not shared: the refund takes frozen money
	}
	if err != nil {
		return 0, share, false, fmt.Errorf("read share: %w", err)
	}
	switch share.Status {
	case StatusPending, StatusProcessing:
		return 0, share, true, nil
	case StatusSuccess:
	default:
		return 0, share, false, nil // failed: nothing moved, the money is frozen still
	}
	// A return already done (or under way) for r stands as it is.
	if ret, err := s.q.SharingLiveReturn(ctx, tx, &r.ID); err == nil {
		return ret.AmountFen, share, false, nil
	} else if !errors.Is(err, db.ErrNotFound) {
		return 0, share, false, err
	}
	others, err := s.q.SharingRefundsInFlight(ctx, tx, dbsqlc.SharingRefundsInFlightParams{PaymentID: r.PaymentID, RefundID: r.ID})
	if err != nil || others > 0 {
		return 0, share, true, err
	}
	fig, err := s.q.SharingPaymentFigures(ctx, tx, &r.PaymentID)
	if err != nil {
		return 0, share, false, err
	}
	sale, err := s.q.SharingCommissionOfSale(ctx, tx, r.PaymentID)
	if err != nil {
		return 0, share, false, err
	}
	// The order's commission once r is refunded, as the ledger will post
	// it (rounded on the running total of refunds).
	after := min(sale.RefundedFen+r.AmountFen, sale.AmountFen)
	owedAfter := sale.CommissionFen - sale.CommissionFen*after/sale.AmountFen
	return max(fig.SharedFen-owedAfter, 0), share, false, nil
}
