package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// claimers is how many customers the claim storms use (their own logins,
// apart from the ordering users).
const claimers = 24

// claims is what the claim storms sent and were told: the checker holds
// the vouchers to it (a claim retried under faults gives one voucher, and
// a key is always answered with the same one).
type claims struct {
	mu        sync.Mutex
	templates int
	sent      int                        // claim keys sent
	answers   map[string]map[string]bool // claim key -> voucher ids answered 201
	refusals  map[string]int             // problem type -> count
}

func newClaims() *claims {
	return &claims{answers: map[string]map[string]bool{}, refusals: map[string]int{}}
}

// claimStorms plays the merchants issuing vouchers and their customers
// rushing to claim them, until stop: every 5 to 15 seconds a merchant
// issues a template with a small budget (a handful to two dozen) and a
// limit of one or two per customer, and each claimer sends one claim more
// than the limit allows, each key d.o.dup times at once, every send
// retried with its key through the faults.
func (d *driver) claimStorms(ctx context.Context, stop <-chan struct{}, log *claims) {
	users := make([]string, claimers)
	for i := range users {
		users[i] = d.loginCode(ctx, fmt.Sprintf("soak-claimer-%d", i))
	}
	for round := 0; ; round++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(5000+rand.IntN(10000)) * time.Millisecond):
		}
		m := d.merchants[round%len(d.merchants)]
		limit := 1 + rand.IntN(2)
		now := time.Now().UTC()
		r := d.retry(ctx, entry{Op: "voucher_template", Method: "POST", Path: "/admin/v1/voucher-templates"}, m.Staff, map[string]any{
			"merchant_id": m.ID, "name": fmt.Sprintf("soak %d", round), "amount_fen": 300, "threshold_fen": 2000, "funded_by": "merchant",
			"claim_from": now.Add(-time.Minute).Format(time.RFC3339), "claim_until": now.Add(time.Hour).Format(time.RFC3339),
			"valid_days": 7, "budget": 5 + rand.IntN(20), "per_user_limit": limit,
		}, map[string]string{"Idempotency-Key": newKey()})
		var tpl struct {
			ID string `json:"id"`
		}
		if !r.ok() || json.Unmarshal(r.body, &tpl) != nil {
			continue
		}
		log.mu.Lock()
		log.templates++
		log.mu.Unlock()
		var storm sync.WaitGroup
		for _, user := range users {
			for range limit + 1 {
				key := newKey()
				log.mu.Lock()
				log.sent++
				log.answers[key] = map[string]bool{}
				log.mu.Unlock()
				for range max(d.o.dup, 1) {
					storm.Go(func() { d.claim(ctx, user, tpl.ID, key, log) })
				}
			}
		}
		storm.Wait()
	}
}

// claim sends one claim, retried with its key, and notes the answer.
func (d *driver) claim(ctx context.Context, user, templateID, key string, log *claims) {
	r := d.retry(ctx, entry{Op: "claim", Method: "POST", Path: "/v1/vouchers/claim"}, user,
		map[string]string{"template_id": templateID}, map[string]string{"Idempotency-Key": key})
	log.mu.Lock()
	defer log.mu.Unlock()
	if r.ok() {
		var v struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(r.body, &v)
		log.answers[key][v.ID] = true
	} else if p := r.problemType(); p != "" {
		log.refusals[p]++
	}
}

// checkClaims: every claim key answered 201 was answered with one
// voucher, which exists, and no two keys got the same voucher.
func checkClaims(ctx context.Context, db querier, cl *claims, f *findings) error {
	if cl == nil {
		return nil
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	owner := map[string]string{} // voucher id -> the key answered with it
	var ids []string
	for key, got := range cl.answers {
		if len(got) > 1 {
			f.add(invClaimAcks, 1, fmt.Sprintf("claim key %s answered with vouchers %v", key, keys(got)))
		}
		for id := range got {
			if other, ok := owner[id]; ok {
				f.add(invClaimAcks, 1, fmt.Sprintf("voucher %s answered to claim keys %s and %s", id, other, key))
				continue
			}
			owner[id] = key
			ids = append(ids, id)
		}
	}
	var found int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM vouchers WHERE id = ANY($1::bigint[])`, ids).Scan(&found); err != nil {
		return err
	}
	if found != len(ids) {
		f.add(invClaimAcks, len(ids)-found, fmt.Sprintf("%d acknowledged vouchers of %d are not in the database", len(ids)-found, len(ids)))
	}
	return nil
}

// checkVouchers: no template gave more than its budget (what was claimed
// and what remains add up to it), and no customer holds more of one than
// its per-user limit.
func checkVouchers(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `
		SELECT t.id, t.budget, (SELECT count(*) FROM vouchers v WHERE v.template_id = t.id),
		       (SELECT coalesce(sum(remaining), 0) FROM voucher_budget b WHERE b.template_id = t.id)
		FROM voucher_templates t ORDER BY t.id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, budget, claimed, remaining int64
		if err := rows.Scan(&id, &budget, &claimed, &remaining); err != nil {
			return err
		}
		if claimed > budget || claimed+remaining != budget {
			f.add(invVoucherBudget, 1, fmt.Sprintf("template %d: budget %d, %d claimed, %d remaining", id, budget, claimed, remaining))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = db.Query(ctx, `
		SELECT v.template_id, v.user_id, count(*), t.per_user_limit
		FROM vouchers v JOIN voucher_templates t ON t.id = v.template_id
		GROUP BY v.template_id, v.user_id, t.per_user_limit HAVING count(*) > t.per_user_limit`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var tpl, user, n, limit int64
		if err := rows.Scan(&tpl, &user, &n, &limit); err != nil {
			return err
		}
		f.add(invVoucherPerUser, 1, fmt.Sprintf("user %d holds %d of template %d (limit %d)", user, n, tpl, limit))
	}
	return rows.Err()
}

// checkRedemptions holds the vouchers spent on orders to the state
// table's rule: an order keeps the voucher it spent unless it was
// cancelled, or refunded whole before the merchant accepted it (then the
// voucher went back). So no voucher is kept by two orders, the order
// that keeps one is the one its row names, and no voucher is held by an
// order that gave it back.
func checkRedemptions(ctx context.Context, db querier, f *findings) error {
	rows, err := db.Query(ctx, `
		WITH spent AS (
		    SELECT o.voucher_id, o.id,
		           o.status = 'CANCELLED' OR (o.status IN ('REFUNDING', 'REFUNDED') AND NOT EXISTS (
		               SELECT 1 FROM order_status_history h WHERE h.order_id = o.id AND h.to_status = 'ACCEPTED')) AS gave_back
		    FROM orders o WHERE o.voucher_id IS NOT NULL
		)
		SELECT v.id, v.order_id,
		       coalesce(array_agg(s.id ORDER BY s.id) FILTER (WHERE NOT s.gave_back), '{}'),
		       coalesce(bool_or(s.gave_back AND s.id = v.order_id), false)
		FROM vouchers v LEFT JOIN spent s ON s.voucher_id = v.id
		GROUP BY v.id, v.order_id
		HAVING v.order_id IS NOT NULL OR count(s.id) > 0`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var holder *int64
		var keeping []int64
		var heldByReleased bool
		if err := rows.Scan(&id, &holder, &keeping, &heldByReleased); err != nil {
			return err
		}
		switch {
		case len(keeping) > 1:
			f.add(invVoucherTwoOrders, 1, fmt.Sprintf("voucher %d is kept by orders %v", id, keeping))
		case heldByReleased:
			f.add(invVoucherReleased, 1, fmt.Sprintf("voucher %d is held by order %d, which gave it back", id, *holder))
		case len(keeping) == 1 && (holder == nil || *holder != keeping[0]):
			f.add(invVoucherTwoOrders, 1, fmt.Sprintf("voucher %d is kept by order %d but its row names %v", id, keeping[0], holder))
		case len(keeping) == 0 && holder != nil:
			f.add(invVoucherReleased, 1, fmt.Sprintf("voucher %d is held by order %d, which does not record it", id, *holder))
		}
	}
	return rows.Err()
}

// acked is how many claim keys were answered with a voucher.
func (cl *claims) acked() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	n := 0
	for _, got := range cl.answers {
		if len(got) > 0 {
			n++
		}
	}
	return n
}

// wallets hands the ordering users vouchers to spend: platform vouchers
// of 2 yuan off anything, claimed when a purchase wants one. A template
// lets each customer hold 100 of it; the next template is issued when a
// user has claimed them all.
type wallets struct {
	admin string
	mu    sync.Mutex
	tpls  []string // platform templates, in issue order
	users []wallet // by user number; each touched by its user alone
	spent atomic.Int64
}

// wallet is one ordering user's vouchers: how many claimed, and the last.
type wallet struct {
	claimed int
	last    string
}

const walletTemplateLimit = 100

func newWallets(admin string, users int) *wallets {
	return &wallets{admin: admin, users: make([]wallet, users)}
}

// template is the k-th wallet template, issued when first wanted.
func (d *driver) walletTemplate(ctx context.Context, k int) string {
	w := d.wallets
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.tpls) <= k {
		now := time.Now().UTC()
		r := d.retry(ctx, entry{Op: "voucher_template", Method: "POST", Path: "/admin/v1/voucher-templates"}, w.admin, map[string]any{
			"name": fmt.Sprintf("soak wallet %d", len(w.tpls)), "amount_fen": 200, "threshold_fen": 0, "funded_by": "platform",
			"claim_from": now.Add(-time.Minute).Format(time.RFC3339), "claim_until": now.Add(24 * time.Hour).Format(time.RFC3339),
			"valid_days": 1, "budget": 10_000_000, "per_user_limit": walletTemplateLimit,
		}, map[string]string{"Idempotency-Key": newKey()})
		var tpl struct {
			ID string `json:"id"`
		}
		if !r.ok() || json.Unmarshal(r.body, &tpl) != nil {
			return ""
		}
		w.tpls = append(w.tpls, tpl.ID)
	}
	return w.tpls[k]
}

// voucherToSpend is a voucher for user's next purchase: mostly a fresh
// one claimed now, sometimes the last one again (it may be spent, or
// given back by a cancel or a timeout: confirm says which).
func (d *driver) voucherToSpend(ctx context.Context, user int, session string) string {
	w := &d.wallets.users[user]
	if w.last != "" && rand.IntN(4) == 0 {
		return w.last
	}
	tpl := d.walletTemplate(ctx, w.claimed/walletTemplateLimit)
	if tpl == "" {
		return ""
	}
	r := d.retry(ctx, entry{Op: "claim", User: user, Method: "POST", Path: "/v1/vouchers/claim"}, session,
		map[string]string{"template_id": tpl}, map[string]string{"Idempotency-Key": newKey()})
	var v struct {
		ID string `json:"id"`
	}
	switch {
	case r.ok() && json.Unmarshal(r.body, &v) == nil:
		w.claimed++
		w.last = v.ID
		return v.ID
	case r.problemType() == "voucher-limit-reached":
		w.claimed = (w.claimed/walletTemplateLimit + 1) * walletTemplateLimit // on to the next template
	}
	return ""
}

// issued is how many wallet templates were issued.
func (w *wallets) issued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.tpls)
}
