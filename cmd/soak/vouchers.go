package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
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
