package main

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/takeout/takeout/internal/order"
	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/voucher"
	"github.com/takeout/takeout/internal/wxsim"
)

// claimed claims a voucher of templateID for user and returns it.
func (sh *shop) claimed(t *testing.T, user, templateID string) voucher.Voucher {
	t.Helper()
	r := sh.claim(t, sh.apis[0], user, "", templateID)
	if r.status != 201 {
		t.Fatalf("claim: %d %s", r.status, r.body)
	}
	var v voucher.Voucher
	r.json(t, &v)
	return v
}

// withVoucher is cart with the voucher id to spend.
func withVoucher(cart map[string]any, voucherID string) map[string]any {
	cart["voucher_id"] = voucherID
	return cart
}

// voucherHolder is the order that holds the voucher, "" when none does.
func (sh *shop) voucherHolder(t *testing.T, voucherID string) string {
	t.Helper()
	var holder *int64
	if err := sh.pool.QueryRow(t.Context(), "SELECT order_id FROM vouchers WHERE id = $1", voucherID).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if holder == nil {
		return ""
	}
	return fmt.Sprint(*holder)
}

// problemMember is a member of a problem document's body.
func (r response) problemMember(t *testing.T, name string) any {
	t.Helper()
	var m map[string]any
	r.json(t, &m)
	return m[name]
}

// Twenty orders spending one voucher, submitted at once over two
// instances: one is placed and holds the voucher, the other nineteen are
// told it is used and take no stock; a retry of the placed one replays
// without touching the voucher, and the same token under a new key is the
// same order.
func TestVoucherSpentByOneOfTwentyOrders(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 1000)
	tpl := sh.voucherTemplate(t, sh.admin, nil) // 500 off 3000, the merchant's
	user := sh.login(t, "spender")
	v := sh.claimed(t, user, tpl.ID)

	// Twenty different carts (3 to 22 units of a 1000-fen dish).
	confirms := make([]order.ConfirmResponse, 20)
	for i := range confirms {
		c := sh.confirm(t, sh.apis[i%2], user, withVoucher(sh.cart(int32(3+i)), v.ID)) //nolint:gosec // G115: small
		want := []order.Discount{{Kind: "voucher", VoucherID: v.ID, Name: "5 off 30", AmountFen: 500, FundedBy: "merchant"}}
		if diff := cmp.Diff(want, c.Discounts); diff != "" || c.DiscountFen != 500 ||
			c.TotalFen != c.ItemsTotalFen+c.PackagingFeeFen+c.DeliveryFeeFen-500 || c.Items[0].DiscountFen != 500 {
			t.Fatalf("confirm %d: discount %d, total %d, items %+v; discounts (-want +got):\n%s", i, c.DiscountFen, c.TotalFen, c.Items, diff)
		}
		confirms[i] = c
	}
	answers := make([]response, len(confirms))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range confirms {
		wg.Go(func() {
			<-start
			answers[i] = sh.submitUntilAnswered(t, sh.apis[i%2], user, fmt.Sprintf("spend-%d", i), confirms[i].ConfirmToken)
		})
	}
	close(start)
	wg.Wait()
	placed := -1
	for i, r := range answers {
		switch {
		case r.status == 201 && placed < 0:
			placed = i
		case r.status == 409 && r.problemType() == "voucher-unavailable" && r.problemMember(t, "reason") == "used":
		default:
			t.Errorf("order %d: %d %s", i, r.status, r.body)
		}
	}
	if placed < 0 {
		t.Fatal("no order was placed")
	}
	o := placedOrder(t, answers[placed])
	if o.VoucherID == nil || *o.VoucherID != v.ID || o.DiscountFen != 500 || o.MerchantDiscountFen != 500 || o.PlatformDiscountFen != 0 ||
		o.TotalFen != confirms[placed].TotalFen {
		t.Errorf("the placed order: voucher %v, discount %d (merchant %d, platform %d), total %d (confirmed %d)",
			o.VoucherID, o.DiscountFen, o.MerchantDiscountFen, o.PlatformDiscountFen, o.TotalFen, confirms[placed].TotalFen)
	}
	if n := sh.count(t, "SELECT count(*) FROM orders WHERE user_id = (SELECT user_id FROM vouchers WHERE id = $1)", v.ID); n != 1 {
		t.Errorf("twenty orders spending one voucher placed %d", n)
	}
	if got := sh.voucherHolder(t, v.ID); got != o.ID {
		t.Errorf("the voucher is held by %q, want the placed order %s", got, o.ID)
	}
	if got, want := sh.stock(t, 0), 1000-(3+placed); got != want {
		t.Errorf("stock %d, want %d: only the placed order takes any", got, want)
	}

	// Retries: the same key replays; a new key with the same token is the
	// same order; the voucher stays where it is.
	again := sh.submit(t, sh.apis[1], user, fmt.Sprintf("spend-%d", placed), confirms[placed].ConfirmToken)
	if again.status != 201 || string(again.body) != string(answers[placed].body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a retry of the placed order: %d %s", again.status, again.body)
	}
	dup := sh.submit(t, sh.apis[0], user, "spend-new-key", confirms[placed].ConfirmToken)
	var d order.Placed
	dup.json(t, &d)
	if dup.status != 200 || !d.Duplicate || d.ID != o.ID {
		t.Errorf("the token under a new key: %d %s", dup.status, dup.body)
	}
	if got := sh.voucherHolder(t, v.ID); got != o.ID || sh.count(t, "SELECT count(*) FROM orders WHERE voucher_id = $1", v.ID) != 1 {
		t.Errorf("after retries the voucher is held by %q", got)
	}
	// The placed cart confirmed again is that order (a tap on "place
	// order" after it went through); another cart with the voucher is
	// refused.
	re := sh.confirm(t, sh.apis[1], user, withVoucher(sh.cart(int32(3+placed)), v.ID)) //nolint:gosec // G115: small
	if !re.Duplicate || re.OrderID != o.ID || re.DiscountFen != 500 {
		t.Errorf("the placed cart confirmed again: duplicate %v, order %s, discount %d; want order %s", re.Duplicate, re.OrderID, re.DiscountFen, o.ID)
	}
	other := withVoucher(sh.cart(int32(3+(placed+1)%20)), v.ID) //nolint:gosec // G115: small
	if r := sh.do(t, sh.apis[0], "POST", "/v1/orders/confirm", user, other); r.status != 409 || r.problemMember(t, "order_id") != o.ID {
		t.Errorf("another cart with the spent voucher: %d %s", r.status, r.body)
	}
	// The wallet says so.
	var w voucher.WalletList
	sh.do(t, sh.apis[0], "GET", "/v1/vouchers", user, nil).json(t, &w)
	if len(w.Vouchers) != 1 || w.Vouchers[0].Status != "used" || w.Vouchers[0].OrderID == nil || *w.Vouchers[0].OrderID != o.ID {
		t.Errorf("wallet: %+v", w.Vouchers)
	}
}

// One submit spending a voucher, sent twelve times at once with its key
// over two instances and six more under new keys: one order, its stock
// taken once, the voucher held by it alone; one key placed it, the
// others are its duplicate, and every copy of a key gets one answer.
func TestVoucherSubmitStormPlacesOnce(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, nil, 50)
	user := sh.login(t, "stormy")
	v := sh.claimed(t, user, sh.voucherTemplate(t, sh.admin, nil).ID)
	c := sh.confirm(t, sh.apis[0], user, withVoucher(sh.cart(4), v.ID))
	var others []response
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			r := sh.submitUntilAnswered(t, sh.apis[i%2], user, fmt.Sprintf("storm-new-%d", i), c.ConfirmToken)
			mu.Lock()
			others = append(others, r)
			mu.Unlock()
		})
	}
	answers := sh.storm(t, sh.apis, 12, user, "storm", c.ConfirmToken)
	wg.Wait()
	// Whichever key came first placed it (201); every other key is the
	// same order, a duplicate (200); every copy of one key got one answer.
	var o order.Placed
	answers[0].json(t, &o)
	placed := 0
	for _, r := range append([]response{answers[0]}, others...) {
		var p order.Placed
		r.json(t, &p)
		switch {
		case r.status == 201 && p.ID == o.ID:
			placed++
		case r.status == 200 && p.Duplicate && p.ID == o.ID:
		default:
			t.Errorf("a copy: %d %s", r.status, r.body)
		}
	}
	if placed != 1 {
		t.Errorf("%d keys were answered as having placed the order, want 1", placed)
	}
	for _, r := range answers {
		if r.status != answers[0].status || string(r.body) != string(answers[0].body) {
			t.Errorf("a copy of the key: %d %s, want its first answer %d %s", r.status, r.body, answers[0].status, answers[0].body)
		}
	}
	if n := sh.count(t, "SELECT count(*) FROM orders WHERE voucher_id = $1", v.ID); n != 1 {
		t.Errorf("%d orders spent the voucher, want 1", n)
	}
	if got := sh.voucherHolder(t, v.ID); got != o.ID {
		t.Errorf("the voucher is held by %q, want %s", got, o.ID)
	}
	if sh.stock(t, 0) != 46 {
		t.Errorf("stock %d, want 46: the order's 4 units taken once", sh.stock(t, 0))
	}
}

// A placement that fails takes nothing: a cart short of stock at submit
// leaves the voucher unused, and a voucher that expired since confirm is
// refused without taking stock.
func TestVoucherPlacementThatFailsTakesNothing(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 5, 10)
	tpl := sh.voucherTemplate(t, sh.admin, nil)
	user, other := sh.login(t, "unlucky"), sh.login(t, "quicker")
	v := sh.claimed(t, user, tpl.ID)

	c := sh.confirm(t, sh.apis[0], user, withVoucher(sh.cart(3), v.ID))
	sh.place(t, other, "quicker", 3) // two left
	if r := sh.submit(t, sh.apis[0], user, "short", c.ConfirmToken); r.status != 409 || r.problemType() != "out-of-stock" {
		t.Fatalf("a cart short of stock: %d %s", r.status, r.body)
	}
	if got := sh.voucherHolder(t, v.ID); got != "" {
		t.Errorf("a refused placement holds the voucher: %s", got)
	}

	c = sh.confirm(t, sh.apis[0], user, withVoucher(sh.cart(0, 2), v.ID)) // 2 x 2000
	if _, err := sh.pool.Exec(t.Context(), "UPDATE vouchers SET valid_until = now() - interval '1 second' WHERE id = $1", v.ID); err != nil {
		t.Fatal(err)
	}
	r := sh.submit(t, sh.apis[0], user, "expired", c.ConfirmToken)
	if r.status != 409 || r.problemType() != "voucher-unavailable" || r.problemMember(t, "reason") != "expired" {
		t.Fatalf("a voucher expired since confirm: %d %s", r.status, r.body)
	}
	if sh.stock(t, 1) != 10 || sh.voucherHolder(t, v.ID) != "" ||
		sh.count(t, "SELECT count(*) FROM orders WHERE user_id = (SELECT user_id FROM vouchers WHERE id = $1)", v.ID) != 0 {
		t.Errorf("the refused placement took something: stock %d, holder %q", sh.stock(t, 1), sh.voucherHolder(t, v.ID))
	}
}

// Confirm refuses a voucher that cannot be spent on the cart, saying why,
// and prices a platform voucher as the platform's.
func TestVoucherConfirm(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 10, 10)
	api := sh.apis[0]
	otherMerchant := createMerchant(t, sh.stack, api, "Other Kitchen")
	user := sh.login(t, "picky")
	mine := sh.claimed(t, user, sh.voucherTemplate(t, sh.admin, nil).ID)
	elsewhere := sh.claimed(t, user, sh.voucherTemplate(t, sh.admin, map[string]any{"merchant_id": otherMerchant, "name": "there"}).ID)
	welcome := sh.claimed(t, user, sh.voucherTemplate(t, sh.admin, map[string]any{
		"merchant_id": nil, "funded_by": "platform", "name": "welcome", "threshold_fen": 0, "amount_fen": 5000}).ID)
	spent := sh.claimed(t, user, sh.voucherTemplate(t, sh.admin, map[string]any{"name": "spent"}).ID)
	someone := sh.claimed(t, sh.login(t, "someone"), sh.voucherTemplate(t, sh.admin, map[string]any{"name": "theirs"}).ID)

	// spent is held by an order of the user's.
	c := sh.confirm(t, api, user, withVoucher(sh.cart(4), spent.ID))
	if r := sh.submit(t, api, user, "spend", c.ConfirmToken); r.status != 201 {
		t.Fatalf("spend: %d %s", r.status, r.body)
	}

	for name, tt := range map[string]struct {
		cart           map[string]any
		status         int
		problem        string
		reason, member string
	}{
		"below the threshold": {withVoucher(sh.cart(2), mine.ID), 409, "voucher-unavailable", "below_threshold", "threshold_fen"},
		"another merchant's":  {withVoucher(sh.cart(5), elsewhere.ID), 409, "voucher-unavailable", "other_merchant", "merchant_id"},
		"already spent":       {withVoucher(sh.cart(5), spent.ID), 409, "voucher-unavailable", "used", "order_id"},
		"someone else's":      {withVoucher(sh.cart(5), someone.ID), 400, "invalid-request", "", "field"},
		"not an id":           {withVoucher(sh.cart(5), "v1"), 400, "invalid-request", "", "field"},
	} {
		r := sh.do(t, api, "POST", "/v1/orders/confirm", user, tt.cart)
		if r.status != tt.status || r.problemType() != tt.problem || (tt.reason != "" && r.problemMember(t, "reason") != tt.reason) ||
			r.problemMember(t, tt.member) == nil {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}

	// A platform voucher worth more than the dishes takes them all but
	// what a payment needs: 1 x 1000 + 500 delivery, 5000 off, held to
	// the dishes' 1000; the platform pays for it.
	c = sh.confirm(t, api, user, withVoucher(sh.cart(1), welcome.ID))
	if c.DiscountFen != 1000 || c.TotalFen != c.PackagingFeeFen+c.DeliveryFeeFen || c.Discounts[0].FundedBy != "platform" {
		t.Fatalf("platform voucher: %+v", c)
	}
	r := sh.submit(t, api, user, "welcome", c.ConfirmToken)
	o := placedOrder(t, r)
	if r.status != 201 || o.PlatformDiscountFen != 1000 || o.MerchantDiscountFen != 0 || o.Items[0].DiscountFen != 1000 {
		t.Errorf("platform voucher order: %d %s", r.status, r.body)
	}
}

// A voucher goes back with a cancel, a payment timeout, and a whole
// refund before acceptance (the customer's cancel or the merchant's
// reject of a paid order), once, only if the order still holds it; an
// expired one goes back expired. Once the kitchen accepted, a refund
// leaves it spent.
func TestVoucherRelease(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, nil, 100)
	api := sh.apis[0]
	tpl := sh.voucherTemplate(t, sh.admin, map[string]any{"per_user_limit": 5})
	user := sh.login(t, "changeable")
	spend := func(key, voucherID string, qty int32) order.Placed {
		t.Helper()
		c := sh.confirm(t, api, user, withVoucher(sh.cart(qty), voucherID))
		r := sh.submit(t, api, user, key, c.ConfirmToken)
		if r.status != 201 {
			t.Fatalf("spend %s: %d %s", key, r.status, r.body)
		}
		return placedOrder(t, r)
	}
	staff := func(o order.Placed, action string) {
		t.Helper()
		if r := sh.do(t, api, "POST", "/admin/v1/orders/"+o.ID+"/"+action, sh.admin, nil); r.status != 200 {
			t.Fatalf("%s: %d %s", action, r.status, r.body)
		}
	}
	cancel := func(o order.Placed) {
		t.Helper()
		if r := sh.do(t, api, "POST", "/v1/orders/"+o.ID+"/cancel", user, nil); r.status != 200 {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
	}

	// Cancelled unpaid: back, and spendable again; a repeated cancel
	// changes nothing.
	v := sh.claimed(t, user, tpl.ID)
	first := spend("first", v.ID, 3)
	cancel(first)
	cancel(first)
	if got := sh.voucherHolder(t, v.ID); got != "" {
		t.Fatalf("after the cancel the voucher is held by %s", got)
	}
	second := spend("second", v.ID, 4)
	if got := sh.voucherHolder(t, v.ID); got != second.ID {
		t.Fatalf("spent again: held by %q, want %s", got, second.ID)
	}
	// A cancel of the first order again cannot take it from the second.
	cancel(first)
	if got := sh.voucherHolder(t, v.ID); got != second.ID {
		t.Errorf("a repeated cancel of an order that no longer holds it released it: held by %q", got)
	}

	// Paid, then cancelled by the customer before acceptance: back.
	sh.markPaid(t, second.ID)
	cancel(second)
	if got := sh.voucherHolder(t, v.ID); got != "" {
		t.Errorf("a paid order cancelled before acceptance keeps the voucher (%s)", got)
	}
	// Paid, then rejected by the merchant: back.
	third := spend("third", v.ID, 5)
	sh.markPaid(t, third.ID)
	staff(third, "reject")
	if got := sh.voucherHolder(t, v.ID); got != "" {
		t.Errorf("a rejected order keeps the voucher (%s)", got)
	}
	// Accepted, then refunded by the merchant: spent.
	fourth := spend("fourth", v.ID, 6)
	sh.markPaid(t, fourth.ID)
	staff(fourth, "accept")
	staff(fourth, "refund")
	if got := sh.voucherHolder(t, v.ID); got != fourth.ID {
		t.Errorf("a refund after acceptance gave the voucher back (held by %q)", got)
	}

	// Expired while held: back, as expired, and refused by confirm.
	w := sh.claimed(t, user, tpl.ID)
	fifth := spend("fifth", w.ID, 3)
	if _, err := sh.pool.Exec(t.Context(), "UPDATE vouchers SET valid_until = now() - interval '1 second' WHERE id = $1", w.ID); err != nil {
		t.Fatal(err)
	}
	cancel(fifth)
	var wallet voucher.WalletList
	sh.do(t, api, "GET", "/v1/vouchers", user, nil).json(t, &wallet)
	status := map[string]string{}
	for _, x := range wallet.Vouchers {
		status[x.ID] = x.Status
	}
	if diff := cmp.Diff(map[string]string{v.ID: "used", w.ID: "expired"}, status); diff != "" {
		t.Errorf("wallet (-want +got):\n%s", diff)
	}
	if r := sh.do(t, api, "POST", "/v1/orders/confirm", user, withVoucher(sh.cart(3), w.ID)); r.status != 409 || r.problemMember(t, "reason") != "expired" {
		t.Errorf("confirm with the expired voucher: %d %s", r.status, r.body)
	}
	// Each order still says which voucher it spent.
	if n := sh.count(t, "SELECT count(*) FROM orders WHERE voucher_id = $1", v.ID); n != 4 {
		t.Errorf("%d orders record the voucher, want 4", n)
	}
}

// An unpaid order's voucher goes back when its payment times out.
func TestVoucherReleasedByPaymentTimeout(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 1, map[string]string{"TAKEOUT_ORDER_PAY_WINDOW": "1s", "TAKEOUT_JOB_POLL_INTERVAL": "100ms"}, 10)
	user := sh.login(t, "slow payer")
	v := sh.claimed(t, user, sh.voucherTemplate(t, sh.admin, nil).ID)
	c := sh.confirm(t, sh.apis[0], user, withVoucher(sh.cart(3), v.ID))
	o := placedOrder(t, sh.submit(t, sh.apis[0], user, "slow", c.ConfirmToken))
	waitUntil(t, "the payment timeout", func() bool {
		return sh.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'CANCELLED'", o.ID) == 1
	})
	if got := sh.voucherHolder(t, v.ID); got != "" {
		t.Errorf("a timed-out order holds the voucher (%s)", got)
	}
}

// A discounted order's money to the fen: the discount spread over its
// lines, the payment the discounted total, a line refund the line's
// units less their part of the discount, and refunds of every line
// exactly what was paid.
func TestVoucherOrderRefundsToTheFen(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 10, 10)
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	user := ps.login(t, "refunded")
	tpl := ps.voucherTemplate(t, ps.admin, map[string]any{"amount_fen": 1000, "threshold_fen": 4000})
	v := ps.claimed(t, user, tpl.ID)
	// 3 x 1000 and 1 x 2000: 1000 off, spread 600 and 400.
	c := ps.confirm(t, ps.apis[0], user, withVoucher(ps.cart(3, 1), v.ID))
	r := ps.submit(t, ps.apis[0], user, "discounted", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	o := placedOrder(t, r)
	lines := map[string]order.Item{}
	for _, it := range o.Items {
		lines[it.DishID] = it
	}
	if lines[ps.dishes[0].ID].DiscountFen != 600 || lines[ps.dishes[1].ID].DiscountFen != 400 || o.DiscountFen != 1000 {
		t.Fatalf("discount spread: %+v", o.Items)
	}
	paid := o.TotalFen
	if want := o.ItemsTotalFen + o.PackagingFeeFen + o.DeliveryFeeFen - 1000; paid != want {
		t.Fatalf("total %d, want %d", paid, want)
	}
	ps.pay(t, user, o.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1)})
	waitUntil(t, "the order to be paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", o.ID) == 1
	})
	if n := ps.count(t, "SELECT amount_fen FROM payments WHERE order_id = $1 AND status = 'SUCCESS'", o.ID); int64(n) != paid {
		t.Fatalf("paid %d, want the discounted total %d", n, paid)
	}

	refund := func(key string, line int16, qty int32) int64 {
		t.Helper()
		r := ps.refundPart(t, staff, o.ID, key, fmt.Sprintf(`{"lines":[{"line":%d,"qty":%d}],"reason":"short"}`, line, qty))
		if r.status != 201 {
			t.Fatalf("refund %s: %d %s", key, r.status, r.body)
		}
		var ref payment.Refund
		r.json(t, &ref)
		return ref.AmountFen
	}
	l0, l1 := lines[ps.dishes[0].ID], lines[ps.dishes[1].ID]
	// One of three 1000-fen units with 600 off the line: 1000 - 200.
	got := []int64{refund("a", l0.Line, 1)}
	// The other two: 2000 - 400.
	got = append(got, refund("b", l0.Line, 2))
	// The last line, the order's last units: all that is left, its 2000
	// less 400 and the delivery fee.
	got = append(got, refund("c", l1.Line, 1))
	pk0, pk1 := l0.PackagingFeeFen, l1.PackagingFeeFen
	if diff := cmp.Diff([]int64{1000 + pk0 - 200, 2*(1000+pk0) - 400, 2000 + pk1 - 400 + o.DeliveryFeeFen}, got); diff != "" {
		t.Errorf("line refunds (-want +got):\n%s", diff)
	}
	if n := ps.count(t, "SELECT sum(amount_fen) FROM refunds WHERE order_id = $1", o.ID); int64(n) != paid {
		t.Errorf("refunds of every line come to %d, want the %d paid", n, paid)
	}
	waitUntil(t, "the order to be refunded", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'REFUNDED'", o.ID) == 1
	})
	// Refunded whole while PAID (never accepted): the voucher went back.
	if got := ps.voucherHolder(t, v.ID); got != "" {
		t.Errorf("refunded whole before acceptance, the voucher is still held by %s", got)
	}
}
