package order

// The placement of an order, whole: the submit and its exactly-once
// protocol (submission, run by idempotency.Store.Do), the one-statement
// path (placeDirect: order_place, committed in groups) and the
// transaction path (place, create). What an order is lives in three
// places that change together: db/functions/order_place.sql, the orders
// queries of db/queries, and orderFromRow (order.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/fulfilment"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/promotion"
	"github.com/takeout/takeout/internal/statemachine"
	"github.com/takeout/takeout/internal/voucher"
)

// Errors of submit.
var (
	ErrTokenInvalid = problem.New(problem.TokenInvalid, "the confirm token is not one we issued, or it was altered; confirm again")
	ErrTokenExpired = problem.New(problem.TokenExpired, "the confirm token expired; confirm again")
	// ErrTokenOutdated is a token issued before an upgrade changed the
	// canonical form (options, packaging fees): 410 like an expired one.
	ErrTokenOutdated = problem.New(problem.TokenExpired, "the confirm token was issued by an earlier version of the service; confirm again")
	ErrTokenNotYour  = problem.New(problem.TokenNotYours, "this confirm token was issued to another user")
)

// submitRoute is the route part of a submit's fingerprint: the same key
// with another token is a different request.
const submitRoute = "POST /v1/orders"

// Reply renders a submit's outcome as the response stored and sent for
// it (the handler's HTTP shape: PlacedReply).
type Reply func(Placed) (idempotency.Response, error)

// Submit places the order of a confirm token exactly once per
// Idempotency-Key: the idempotency store runs the protocol (its layers,
// the claim, the replay) around a submission, which checks the token,
// places the order by one statement or in a transaction, and renders it
// with reply as the response to record. The answer is the response to
// send, and whether it replays an earlier one.
func (s *Service) Submit(ctx context.Context, userID int64, key, rawToken string, reply Reply) (idempotency.Result, error) {
	sub := &submission{s: s, userID: userID, rawToken: rawToken, reply: reply}
	res, err := s.opts.Idempotency.Do(ctx, idempotency.Request{
		Scope: idempotency.UserScope(userID), Key: key, Route: submitRoute, Body: rawToken,
	}, sub)
	if sub.ran {
		s.countSubmit(res, err, sub.tok)
	}
	return res, err
}

// submission is one submit, as the idempotency store runs it
// (idempotency.Operation).
type submission struct {
	s        *Service
	userID   int64
	rawToken string
	reply    Reply
	// Set by Check:
	tok Token
	in  Intent
	// ran: the placement reached PostgreSQL.
	ran bool
}

// Check verifies the token before anything outside the process is
// touched: signature and ownership first, so a forged token touches
// nothing; an expired or outdated token, or a closed shop, refuses only a
// request that has not been answered before.
func (sub *submission) Check() error {
	tok, err := sub.s.opts.Signer.Verify(sub.rawToken)
	switch {
	case errors.Is(err, errTokenOutdated):
		return idempotency.ReplayOnly(ErrTokenOutdated)
	case err != nil:
		return problem.Wrap(problem.TokenInvalid, err, "%s", ErrTokenInvalid.Detail)
	}
	if tok.UserID != sub.userID {
		return ErrTokenNotYour
	}
	in := tok.Intent()
	in.Normalize()
	if in.IntentDigest(tok.Seq).String() != tok.Digest {
		return ErrTokenInvalid
	}
	sub.tok, sub.in = tok, in
	now := sub.s.now()
	if tok.Expired(now) {
		return idempotency.ReplayOnly(ErrTokenExpired)
	}
	// The slot stopped taking orders, or the opening the cart was quoted
	// in has ended (the stock take checks the closed flag and the rules
	// themselves).
	if tok.SlotCutoff != 0 && now.Unix() > tok.SlotCutoff {
		return idempotency.ReplayOnly(problem.New(problem.SlotUnavailable, "the slot stopped taking orders at %s: choose a later one",
			time.Unix(tok.SlotCutoff, 0).UTC().Format(time.RFC3339)))
	}
	if tok.OpenUntil != 0 && now.Unix() >= tok.OpenUntil {
		var next time.Time
		if tok.NextOpen > 0 {
			next = time.Unix(tok.NextOpen, 0)
		}
		return idempotency.ReplayOnly(closedUntil(next))
	}
	return nil
}

// Direct places the order in one statement: placeDirect.
func (sub *submission) Direct(ctx context.Context, row idempotency.RecordRower) (idempotency.Record, bool, error) {
	sub.ran = true
	return sub.s.placeDirect(ctx, sub.tok, sub.in, sub.reply, row)
}

// Change places the order in tx, statement by statement. A new order's
// record goes with the stock take, its last statement, so that the shard
// it locks is held only until the commit; an order that exists is
// answered as it is.
func (sub *submission) Change(ctx context.Context, tx *idempotency.Tx) (idempotency.Answer, error) {
	sub.ran = true
	sub.s.placePath.WithLabelValues("transaction").Inc()
	var ans idempotency.Answer
	p, err := sub.s.place(ctx, tx.Tx, sub.tok, sub.in, func(q dbsqlc.DBTX, p Placed) error {
		rec, err := sub.record(p)
		if err != nil {
			return err
		}
		ans, err = tx.AnswerWith(ctx, q, rec)
		return err
	})
	if err != nil || !p.Duplicate {
		return ans, err
	}
	rec, err := sub.record(p)
	return tx.Answer(rec), err
}

// record is the idempotency record of a placed order's reply.
func (sub *submission) record(p Placed) (idempotency.Record, error) {
	resp, err := sub.reply(p)
	id, _ := strconv.ParseInt(p.ID, 10, 64)
	return idempotency.Record{OrderID: id, Response: resp}, err
}

// countSubmit counts a submit that reached PostgreSQL by its result, and
// the voucher and promotions of tok that a placed order got.
func (s *Service) countSubmit(res idempotency.Result, err error, tok Token) {
	var p *problem.Error
	switch {
	case err != nil && errors.As(err, &p) && p.Type == problem.OutOfStock:
		s.stockConflicts.Inc()
		s.placed.WithLabelValues("refused").Inc()
	case err != nil:
		s.placed.WithLabelValues("refused").Inc()
	case res.Replayed:
		s.placed.WithLabelValues("replay").Inc() // a request with the key committed first
	case res.Response.Status == http.StatusCreated:
		s.placed.WithLabelValues("placed").Inc()
		if tok.VoucherID != 0 {
			s.vouchers.WithLabelValues("spent").Inc()
		}
		for _, p := range tok.Promotions {
			s.promotions.WithLabelValues(p.Kind, "applied").Inc()
		}
	default:
		s.placed.WithLabelValues("duplicate").Inc()
	}
}

// place writes the order of a verified token in tx: the order itself ON
// CONFLICT DO NOTHING on (user, intent digest), then, for a new order, its
// reservations, items, history and payment-timeout job, and the stock,
// taken last so that a stock shard is locked only until the commit that
// follows; beforeTake runs just before that, with the pipeline the take
// sends, for statements that should go with it. An order that exists
// (same token, another key, or a retry after Redis forgot) is returned
// as it is, marked Duplicate.
func (s *Service) place(ctx context.Context, tx pgx.Tx, tok Token, in Intent, beforeTake func(dbsqlc.DBTX, Placed) error) (Placed, error) {
	o, err := s.newOrderRow(tok, in)
	if err != nil {
		return Placed{}, err
	}
	row, err := s.q.OrderInsert(ctx, tx, dbsqlc.OrderInsertParams{
		ID: o.ID, UserID: o.UserID, MerchantID: o.MerchantID, IntentDigest: o.IntentDigest, ContentDigest: o.ContentDigest, IntentSeq: o.IntentSeq,
		DigestAlg: o.DigestAlg, ItemsTotalFen: o.ItemsTotalFen, PackagingFeeFen: o.PackagingFeeFen, DeliveryFeeFen: o.DeliveryFeeFen, TotalFen: o.TotalFen,
		Address: o.Address, Remark: o.Remark, PayDeadline: o.PayDeadline, CreatedAt: o.CreatedAt,
		VoucherID: o.VoucherID, DiscountFen: o.DiscountFen, PlatformDiscountFen: o.PlatformDiscountFen, MerchantDiscountFen: o.MerchantDiscountFen,
		Promotions: o.Promotions,
		Fulfilment: o.Fulfilment, PickupDay: o.PickupDay, SlotStart: o.SlotStart, SlotEnd: o.SlotEnd,
	})
	var p Placed
	switch {
	case errors.Is(err, db.ErrNotFound):
		existing, err := s.q.OrderGetByUserDigest(ctx, tx, dbsqlc.OrderGetByUserDigestParams{UserID: o.UserID, IntentDigest: o.IntentDigest})
		if err != nil {
			return Placed{}, fmt.Errorf("read placed order: %w", err)
		}
		if p.Order, err = s.load(ctx, tx, existing); err != nil {
			return Placed{}, err
		}
		p.Duplicate = true
	case err != nil:
		return Placed{}, fmt.Errorf("insert order: %w", err)
	default:
		if p.Order, err = s.create(ctx, tx, row, tok, beforeTake); err != nil {
			return Placed{}, err
		}
	}
	return p, nil
}

// create completes a newly inserted order: its stock reservations, items,
// history and payment-timeout job (and what beforeTake queues) go to
// PostgreSQL in one round trip with the first statement that takes its
// stock (they depend on nothing but their arguments). A pickup order
// takes its number last, and beforeTake runs after it.
func (s *Service) create(ctx context.Context, tx pgx.Tx, row dbsqlc.Order, tok Token, beforeTake func(dbsqlc.DBTX, Placed) error) (Order, error) {
	if row.SlotStart != nil {
		// The slot before the stock, as a cancel gives them back.
		if _, err := s.q.SlotTake(ctx, tx, dbsqlc.SlotTakeParams{MerchantID: row.MerchantID, SlotStart: *row.SlotStart}); errors.Is(err, db.ErrNotFound) {
			return Order{}, problem.New(problem.SlotFull, "the slot from %s is fully booked: choose another", row.SlotStart.UTC().Format(time.RFC3339)).
				With("slot_start", row.SlotStart.UTC().Format(time.RFC3339))
		} else if err != nil {
			return Order{}, fmt.Errorf("take the slot: %w", err)
		}
	}
	pipe := db.NewPipeline(tx)
	if row.SlotStart != nil {
		if err := s.q.SlotHoldInsert(ctx, pipe, dbsqlc.SlotHoldInsertParams{OrderID: row.ID, MerchantID: row.MerchantID, SlotStart: *row.SlotStart}); err != nil {
			return Order{}, fmt.Errorf("hold the slot: %w", err)
		}
	}
	lines := stockLines(tok)
	if err := inventory.Hold(ctx, pipe, row.ID, lines); err != nil {
		return Order{}, err
	}
	items := orderItems(row.ID, tok)
	for _, it := range items {
		if err := s.q.OrderItemInsert(ctx, pipe, dbsqlc.OrderItemInsertParams{
			OrderID: row.ID, Line: it.Line, DishID: it.DishID, Name: it.Name, Qty: it.Qty, UnitPriceFen: it.UnitPriceFen,
			LineTotalFen: it.LineTotalFen, Options: it.Options, PackagingFeeFen: it.PackagingFeeFen, DiscountFen: it.DiscountFen,
		}); err != nil {
			return Order{}, fmt.Errorf("insert order item: %w", err)
		}
	}
	if err := s.q.OrderHistoryInsert(ctx, pipe, dbsqlc.OrderHistoryInsertParams{
		OrderID: row.ID, ToStatus: row.Status, Version: row.Version, Actor: placedBy(row.UserID), Reason: "placed",
	}); err != nil {
		return Order{}, fmt.Errorf("insert order history: %w", err)
	}
	var addr Address
	if err := json.Unmarshal(row.Address, &addr); err != nil {
		return Order{}, fmt.Errorf("decode address: %w", err)
	}
	o := orderFromRow(row, items, addr)
	pickup := row.PickupDay.Valid
	if !pickup {
		if err := beforeTake(pipe, Placed{Order: o}); err != nil {
			return Order{}, err
		}
	}
	if err := inventory.Take(ctx, tx, pipe, inventory.Merchant{ID: tok.MerchantID, QuoteVersion: tok.QuoteVersion}, lines); err != nil {
		return Order{}, err
	}
	// Then the promotions' budgets and the first-order claim, in the
	// order order_place takes them.
	if taken, firstOrder := tok.promotionsTaken(); len(taken.Budgets) > 0 || taken.NewCustomerScope != nil {
		if err := promotion.Take(ctx, tx, tok.UserID, row.ID, taken, firstOrder); err != nil {
			return Order{}, err
		}
	}
	// The voucher last, as order_place takes it: a placement that waits
	// for its row holds nothing that the holder may wait for.
	if tok.VoucherID != 0 {
		if err := voucher.Take(ctx, tx, tok.UserID, tok.VoucherID, row.ID, row.CreatedAt); err != nil {
			return Order{}, err
		}
	}
	if pickup {
		// The pickup number after everything else: its counter is the
		// one row every pickup placement of the merchant's day waits
		// for, so it is held only from here to the commit, never while
		// this placement waits for stock, a budget or a voucher. The
		// answer names the number, so its record follows it.
		n, err := s.q.PickupNumberAssign(ctx, tx, dbsqlc.PickupNumberAssignParams{MerchantID: row.MerchantID, Day: row.PickupDay, OrderID: row.ID})
		if err != nil {
			return Order{}, fmt.Errorf("take a pickup number: %w", err)
		}
		row.PickupNo = &n
		o = orderFromRow(row, items, addr)
		if err := beforeTake(tx, Placed{Order: o}); err != nil {
			return Order{}, err
		}
	}
	return o, nil
}

// newOrderRow is the orders row of a verified token's new order, as
// inserting it writes it (the columns' defaults included): what both
// placement paths insert, and what the one-statement path answers with.
func (s *Service) newOrderRow(tok Token, in Intent) (dbsqlc.Order, error) {
	addr, err := json.Marshal(in.Address)
	if err != nil {
		return dbsqlc.Order{}, err
	}
	digest := in.IntentDigest(tok.Seq)
	now := s.now()
	platform, merchant := tok.discountShares()
	promos, err := tok.promotionsJSON()
	if err != nil {
		return dbsqlc.Order{}, err
	}
	o := dbsqlc.Order{
		ID: tok.OrderID, UserID: tok.UserID, MerchantID: tok.MerchantID, IntentDigest: digest[:], ContentDigest: digestBytes(in.ContentDigest()),
		IntentSeq: int32(tok.Seq), DigestAlg: DigestAlg, Status: statemachine.PendingPayment, //nolint:gosec // G115: small, from our signed token
		ItemsTotalFen: in.ItemsTotalFen, PackagingFeeFen: in.PackagingFeeFen, DeliveryFeeFen: in.DeliveryFeeFen, TotalFen: in.TotalFen,
		Address: addr, Remark: in.Remark, Version: 1, PayDeadline: now.Add(s.opts.PayWindow), CreatedAt: now, UpdatedAt: now,
		VoucherID: tok.voucher(), DiscountFen: tok.discountFen(), PlatformDiscountFen: platform, MerchantDiscountFen: merchant,
		Promotions: promos, Fulfilment: fulfilment.Delivery,
	}
	if tok.Fulfilment != "" {
		o.Fulfilment = tok.Fulfilment
	}
	if sl := tok.slot(); sl != nil {
		o.SlotStart, o.SlotEnd = &sl.Start, &sl.End
	}
	if o.Fulfilment == fulfilment.Pickup {
		loc, err := time.LoadLocation(tok.TimeZone)
		if err != nil {
			return dbsqlc.Order{}, fmt.Errorf("merchant time zone %q: %w", tok.TimeZone, err)
		}
		o.PickupDay = pgtype.Date{Time: fulfilment.PickupDay(loc, o.SlotStart, now), Valid: true}
	}
	return o, nil
}

// voucher is the token's voucher id, nil for none.
func (t Token) voucher() *int64 {
	if t.VoucherID == 0 {
		return nil
	}
	return &t.VoucherID
}

// discountShares are the platform's and the merchant's shares of the
// token's discount: each discount's funder pays for it.
func (t Token) discountShares() (platform, merchant int64) {
	if t.VoucherFundedBy == voucher.FundedByMerchant {
		merchant += t.VoucherFen
	} else {
		platform += t.VoucherFen
	}
	for _, p := range t.Promotions {
		switch {
		case !p.itemsOff():
		case p.FundedBy == promotion.FundedByMerchant:
			merchant += p.AmountFen
		default:
			platform += p.AmountFen
		}
	}
	return platform, merchant
}

// OrderPromotion is a promotion an order got, as the order shows it (and
// orders.promotions keeps it): which, at what version, what it took off
// (the dishes, or the delivery fee it waived), and who pays for it.
type OrderPromotion struct {
	PromotionID string `json:"promotion_id"`
	Version     int64  `json:"version"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	AmountFen   int64  `json:"amount_fen"`
	FundedBy    string `json:"funded_by"`
}

// promotionsJSON is the token's promotions as orders.promotions keeps
// them.
func (t Token) promotionsJSON() ([]byte, error) {
	out := make([]OrderPromotion, len(t.Promotions))
	for i, p := range t.Promotions {
		out[i] = OrderPromotion{PromotionID: strconv.FormatInt(p.ID, 10), Version: p.Version, Kind: p.Kind, Name: p.Name,
			AmountFen: p.AmountFen, FundedBy: p.FundedBy}
	}
	return json.Marshal(out)
}

// promotionsTaken is what the token's order takes from promotions in its
// placement, and the first-order discount's promotion (0: none).
func (t Token) promotionsTaken() (promotion.Taken, int64) {
	var taken promotion.Taken
	var firstOrder int64
	for _, p := range t.Promotions {
		if p.Budget {
			taken.Budgets = append(taken.Budgets, promotion.Budget{PromotionID: p.ID, AmountFen: p.AmountFen})
		}
		if p.Scope != nil {
			taken.NewCustomerScope, firstOrder = p.Scope, p.ID
		}
	}
	return taken, firstOrder
}

// orderItems are the rows of tok's lines for order id, each with its
// share of the discount.
func orderItems(id int64, tok Token) []dbsqlc.OrderItem {
	items := make([]dbsqlc.OrderItem, len(tok.Items))
	totals := make([]int64, len(tok.Items))
	for i, it := range tok.Items {
		totals[i] = it.UnitPriceFen * int64(it.Qty)
	}
	shares := spreadDiscount(totals, tok.discountFen())
	for i, it := range tok.Items {
		items[i] = dbsqlc.OrderItem{OrderID: id, Line: int16(i), DishID: it.DishID, Name: it.Name, Qty: it.Qty, //nolint:gosec // G115: at most maxItems
			UnitPriceFen: it.UnitPriceFen, LineTotalFen: totals[i], Options: itemOptionsJSON(it.Options),
			PackagingFeeFen: it.PackagingFeeFen, DiscountFen: shares[i]}
	}
	return items
}

// placedBy is the actor of an order's first history row.
func placedBy(userID int64) string { return "user:" + strconv.FormatInt(userID, 10) }

// codeTakeNeedsFullPath is what order_place raises when a line found no
// free shard with its units at the quoted terms (db/functions/order_place.sql).
const codeTakeNeedsFullPath = "TK001"

// placeDirect places a new order, and records the answer rendered by
// reply, in one statement (order_place): the same rows as place and the
// record, in one round trip, committed with the placements of the same
// moment (newPlaceGroup). It reports false, having written nothing, when
// the order exists (a duplicate, answered the usual way) or when a line's
// stock needs the full take (a busy, short or changed dish): the caller
// then runs place in a transaction.
func (s *Service) placeDirect(ctx context.Context, tok Token, in Intent, reply Reply, recordRow idempotency.RecordRower) (idempotency.Record, bool, error) {
	if tok.Fulfilment == fulfilment.Pickup || tok.SlotStart != 0 {
		// A pickup number and a slot wait for their rows: the transaction
		// path takes them.
		return idempotency.Record{}, false, nil
	}
	row, err := s.newOrderRow(tok, in)
	if err != nil {
		return idempotency.Record{}, false, err
	}
	items := orderItems(row.ID, tok)
	resp, err := reply(Placed{Order: orderFromRow(row, items, in.Address)})
	if err != nil {
		return idempotency.Record{}, false, err
	}
	rec, err := recordRow(resp)
	if err != nil {
		return idempotency.Record{}, false, err
	}
	p := dbsqlc.OrderPlaceParams{
		ID: row.ID, UserID: row.UserID, MerchantID: row.MerchantID, IntentDigest: row.IntentDigest, ContentDigest: row.ContentDigest,
		IntentSeq: row.IntentSeq, DigestAlg: row.DigestAlg, ItemsTotalFen: row.ItemsTotalFen, PackagingFeeFen: row.PackagingFeeFen,
		DeliveryFeeFen: row.DeliveryFeeFen, TotalFen: row.TotalFen, Address: row.Address, Remark: row.Remark,
		PayDeadline: row.PayDeadline, CreatedAt: row.CreatedAt, Actor: placedBy(row.UserID), QuoteVersion: tok.QuoteVersion,
		VoucherID: row.VoucherID, DiscountFen: row.DiscountFen, PlatformDiscountFen: row.PlatformDiscountFen,
		MerchantDiscountFen: row.MerchantDiscountFen, Promotions: row.Promotions,
		RecordKey: rec.Key, RecordFingerprint: rec.Fingerprint, RecordDigestAlg: rec.DigestAlg, RecordStatusCode: rec.StatusCode,
		RecordHeaders: rec.Headers, RecordBody: rec.Body, RecordExpiresAt: rec.ExpiresAt,
	}
	for _, it := range items {
		p.ItemDishIds = append(p.ItemDishIds, it.DishID)
		p.ItemNames = append(p.ItemNames, it.Name)
		p.ItemQtys = append(p.ItemQtys, it.Qty)
		p.ItemUnitPricesFen = append(p.ItemUnitPricesFen, it.UnitPriceFen)
		p.ItemOptions = append(p.ItemOptions, it.Options)
		p.ItemPackagingFeesFen = append(p.ItemPackagingFeesFen, it.PackagingFeeFen)
		p.ItemDiscountsFen = append(p.ItemDiscountsFen, it.DiscountFen)
	}
	taken, _ := tok.promotionsTaken()
	p.NewCustomerScope = taken.NewCustomerScope
	p.BudgetPromotionIds, p.BudgetAmountsFen = []int64{}, []int64{}
	for _, b := range taken.Budgets {
		p.BudgetPromotionIds = append(p.BudgetPromotionIds, b.PromotionID)
		p.BudgetAmountsFen = append(p.BudgetAmountsFen, b.AmountFen)
	}
	take := inventory.FreeTakeOf(stockLines(tok))
	p.StockDishIds, p.StockQtys, p.StockPricesFen = take.DishIDs, take.Qtys, take.PricesFen
	p.StockPackagingFeesFen, p.StockOptionsVersions, p.StockStartShards = take.PackagingFeesFen, take.OptionsVersions, take.StartShards
	outcome, err := s.groups.Do(ctx, p)
	if err != nil || outcome != outcomePlaced {
		return idempotency.Record{}, false, err
	}
	s.placePath.WithLabelValues("one_statement").Inc()
	return idempotency.Record{OrderID: row.ID, Response: resp}, true, nil
}

// stockLines are the token's lines by dish: the stock of a dish on
// several lines (with different options) is taken once, for all of them.
func stockLines(tok Token) []inventory.Line {
	lines := make([]inventory.Line, 0, len(tok.Items))
	for _, it := range tok.Items { // sorted by dish
		if n := len(lines); n > 0 && lines[n-1].DishID == it.DishID {
			lines[n-1].Qty += it.Qty
			continue
		}
		lines = append(lines, inventory.Line{DishID: it.DishID, Qty: it.Qty, UnitPriceFen: it.basePriceFen(),
			PackagingFeeFen: it.PackagingFeeFen, OptionsVersion: it.OptionsVersion})
	}
	return lines
}

// placeOutcome is what the one-statement placement of an order did.
type placeOutcome int16

const (
	// outcomeBusy: a line found no free shard at the quoted terms (a busy,
	// short or changed dish); nothing was written.
	outcomeBusy placeOutcome = -1
	// outcomeExists: an order with the id or the (user, intent digest)
	// exists; nothing was written.
	outcomeExists placeOutcome = 0
	// outcomePlaced: the order, its rows and its record are committed.
	outcomePlaced placeOutcome = 1
)

// newPlaceGroup commits the one-statement placements of the same moment
// together (db.Group): order_place alone, order_place_grouped (each order
// in a subtransaction that answers -1 for order_place's TK001) for
// several.
func (s *Service) newPlaceGroup(maxGroup, slots int) *db.Group[dbsqlc.OrderPlaceParams, placeOutcome] {
	return db.NewGroup(db.GroupOptions{Statement: "order_place", Max: maxGroup, Slots: slots}, s.placeAlone, s.placeTogether)
}

// placeAlone places one order in a statement (and a transaction) of its
// own.
func (s *Service) placeAlone(ctx context.Context, p dbsqlc.OrderPlaceParams) (placeOutcome, error) {
	placed, err := s.q.OrderPlace(ctx, s.opts.Pool, p)
	switch {
	case db.Raised(err, codeTakeNeedsFullPath):
		return outcomeBusy, nil
	case err != nil:
		return 0, fmt.Errorf("place order: %w", err)
	case !placed:
		return outcomeExists, nil
	}
	return outcomePlaced, nil
}

// placeTogether places orders in one pipeline and one transaction.
func (s *Service) placeTogether(ctx context.Context, ps []dbsqlc.OrderPlaceParams) ([]placeOutcome, error) {
	params := make([]dbsqlc.OrderPlaceGroupedParams, len(ps))
	for i, p := range ps {
		params[i] = dbsqlc.OrderPlaceGroupedParams(p)
	}
	rows, err := db.BatchRows(len(ps), s.q.OrderPlaceGrouped(ctx, s.opts.Pool, params))
	if err != nil {
		return nil, fmt.Errorf("place orders together: %w", err)
	}
	out := make([]placeOutcome, len(rows))
	for i, r := range rows {
		out[i] = placeOutcome(r)
	}
	return out, nil
}
