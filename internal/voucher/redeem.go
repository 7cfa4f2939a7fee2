package voucher

// Spending a voucher on an order: what confirm prices a cart with, the
// take that goes with the placement and the release that goes with a
// cancel. The order capability calls them inside its own transactions;
// the one-statement placement takes the voucher as Take does, in
// db/functions/order_place.sql.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
)

// Why a voucher cannot be spent (the reason member of a
// voucher-unavailable problem).
const (
	ReasonUsed           = "used"
	ReasonExpired        = "expired"
	ReasonOtherMerchant  = "other_merchant"
	ReasonBelowThreshold = "below_threshold"
	ReasonNoRoom         = "no_room"
)

// Spendable is a customer's voucher that may be spent on a cart.
type Spendable struct {
	ID        int64
	Name      string
	AmountFen int64
	FundedBy  string
	// HeldBy is the order that holds it (0: none): a cart may carry it only
	// as that order again (a confirm of the same cart answered as its
	// duplicate); anything else is refused with Used.
	HeldBy int64
}

// Used is the refusal of a voucher held by an order.
func (v Spendable) Used() error {
	return unavailable(ReasonUsed, "voucher %d is spent on order %d", v.ID, v.HeldBy).With("order_id", strconv.FormatInt(v.HeldBy, 10))
}

func unavailable(reason, format string, args ...any) *problem.Error {
	return problem.New(problem.VoucherUnavailable, format, args...).With("reason", reason)
}

// ForCart reads the customer's voucher id and checks that it may be spent
// at now on an order of merchantID whose items come to itemsFen: valid,
// the platform's or this merchant's, and the threshold reached. One that
// an order holds is returned with HeldBy: the caller refuses it (Used)
// unless the cart is that order again.
func ForCart(ctx context.Context, q dbsqlc.DBTX, userID, id, merchantID, itemsFen int64, now time.Time) (Spendable, error) {
	v, err := dbsqlc.New().VoucherOfUser(ctx, q, dbsqlc.VoucherOfUserParams{ID: id, UserID: userID})
	if errors.Is(err, db.ErrNotFound) {
		return Spendable{}, problem.Field("voucher_id", "there is no voucher %d in your wallet", id)
	}
	if err != nil {
		return Spendable{}, fmt.Errorf("read voucher: %w", err)
	}
	out := Spendable{ID: v.ID, Name: v.Name, AmountFen: v.AmountFen, FundedBy: v.FundedBy}
	switch {
	case v.OrderID != nil:
		out.HeldBy = *v.OrderID
		return out, nil
	case !now.Before(v.ValidUntil):
		return Spendable{}, unavailable(ReasonExpired, "voucher %d expired at %s", id, v.ValidUntil.UTC().Format(time.RFC3339))
	case v.MerchantID != nil && *v.MerchantID != merchantID:
		return Spendable{}, unavailable(ReasonOtherMerchant, "voucher %d is good only at merchant %d", id, *v.MerchantID).
			With("merchant_id", strconv.FormatInt(*v.MerchantID, 10))
	case itemsFen < v.ThresholdFen:
		return Spendable{}, unavailable(ReasonBelowThreshold, "voucher %d needs dishes worth %d fen; the cart's come to %d", id, v.ThresholdFen, itemsFen).
			With("threshold_fen", v.ThresholdFen).With("items_total_fen", itemsFen)
	}
	return out, nil
}

// NoRoom is the refusal of a voucher that would take nothing off: the
// merchant's promotions take off all the dishes may lose (order.Confirm
// applies the voucher after them, never beyond the dishes nor the whole
// order).
func NoRoom(id int64) error {
	return unavailable(ReasonNoRoom, "voucher %d would take nothing off: the promotions take off all that the dishes may lose", id)
}

// Take marks the customer's voucher id held by orderID in tx, waiting for
// a transaction that holds its row. A voucher that is no longer unused
// and valid at now is refused with a voucher-unavailable problem naming
// why.
func Take(ctx context.Context, tx pgx.Tx, userID, id, orderID int64, now time.Time) error {
	q := dbsqlc.New()
	_, err := q.VoucherTake(ctx, tx, dbsqlc.VoucherTakeParams{ID: id, UserID: userID, OrderID: orderID, Now: now})
	if !errors.Is(err, db.ErrNotFound) {
		if err != nil {
			return fmt.Errorf("take voucher: %w", err)
		}
		return nil
	}
	v, err := q.VoucherOfUser(ctx, tx, dbsqlc.VoucherOfUserParams{ID: id, UserID: userID})
	switch {
	case err != nil:
		return fmt.Errorf("read voucher: %w", err)
	case v.OrderID != nil:
		return unavailable(ReasonUsed, "voucher %d was spent on order %d since you confirmed; confirm again without it", id, *v.OrderID).
			With("order_id", strconv.FormatInt(*v.OrderID, 10))
	default:
		return unavailable(ReasonExpired, "voucher %d expired at %s since you confirmed; confirm again without it", id, v.ValidUntil.UTC().Format(time.RFC3339))
	}
}

// Release gives back the voucher orderID holds, if it holds one, in the
// transaction of the transition that releases it; it reports whether one
// went back. A voucher that expired meanwhile goes back expired.
func Release(ctx context.Context, q dbsqlc.DBTX, orderID int64) (bool, error) {
	n, err := dbsqlc.New().VoucherRelease(ctx, q, orderID)
	if err != nil {
		return false, fmt.Errorf("release voucher: %w", err)
	}
	return n > 0, nil
}
