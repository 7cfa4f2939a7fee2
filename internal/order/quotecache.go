package order

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/promotion"
)

// A confirm prices a cart from what QuoteCart reads: the merchant's rules
// and promotions, and each dish's name, price and options. Those change
// rarely, and re-reading them (every option as JSON, the promotions with
// their budgets) cost a confirm more than the submit it guards. So a
// confirm keeps QuoteCart's answers, stamped with the versions they were
// read at (merchants.version and quote_version, which every change of the
// merchant's row and of its promotions bumps; dishes.version, which every
// change of a dish and of its options bumps), and reads afresh only those
// versions, the cart's stock and the budgets left (QuoteLive: index
// lookups, no JSON). A version that moved is a miss: QuoteCart reads it
// all again. The answer is then exactly what QuoteCart alone would give,
// whoever changed the menu and whether or not any invalidation reached
// this instance; the placement checks the quote again regardless.

// quoteMenu is one merchant's cached QuoteCart answers.
type quoteMenu struct {
	merchantVersion, quoteVersion int64
	rules                         merchantRules
	dispatch                      string
	// terms are the merchant's promotions; a budgeted one's BudgetLeft is
	// as read then (a view takes the live figure).
	terms []promotion.Term
	// budgeted are the ids of the terms with a budget, ascending.
	budgeted []int64
	// dishes are the dishes read so far, their stock as read then.
	dishes map[int64]cachedDish
}

// cachedDish is a dish as QuoteCart read it, at its version.
type cachedDish struct {
	version int64
	dish    quotedDish
}

// quoteView is what one confirm prices its cart from.
type quoteView struct {
	rules    merchantRules
	dispatch string
	terms    []promotion.Term
	// dishes are the cart's dishes that the merchant has, by id, with
	// their stock now.
	dishes map[int64]quotedDish
}

// newQuoteCache is the cache of merchants' QuoteCart answers: size
// merchants at most, each for ttl at most (a bound on memory and on how
// long a promotion that ended stays in the terms; staleness is caught by
// the versions, not by expiry).
func newQuoteCache(size int, ttl time.Duration) (*otter.Cache[int64, *quoteMenu], error) {
	c, err := otter.New(&otter.Options[int64, *quoteMenu]{
		MaximumSize:      size,
		ExpiryCalculator: otter.ExpiryWriting[int64, *quoteMenu](ttl),
	})
	if err != nil {
		return nil, fmt.Errorf("quote cache: %w", err)
	}
	return c, nil
}

// readQuote returns what the cart of dishes ids at merchantID is priced
// from: from the cache while QuoteLive finds its versions unchanged (two
// index lookups and the stock); from QuoteCart otherwise, which refills
// the cache.
func (s *Service) readQuote(ctx context.Context, merchantID int64, ids []int64) (quoteView, error) {
	cached, ok := s.quotes.GetIfPresent(merchantID)
	if ok {
		live, err := s.q.QuoteLive(ctx, s.opts.Pool, dbsqlc.QuoteLiveParams{MerchantID: merchantID, Ids: ids, Budgeted: cached.budgeted})
		if err != nil {
			return quoteView{}, fmt.Errorf("confirm: versions and stock: %w", err)
		}
		if len(live) == 0 {
			return quoteView{}, ErrMerchantNotFound
		}
		if v, ok := cached.view(live); ok {
			s.quoteReads.WithLabelValues("cached").Inc()
			return v, nil
		}
		s.quoteReads.WithLabelValues("changed").Inc()
	} else {
		s.quoteReads.WithLabelValues("miss").Inc()
	}
	rows, err := s.q.QuoteCart(ctx, s.opts.Pool, dbsqlc.QuoteCartParams{MerchantID: merchantID, Ids: ids})
	if err != nil {
		return quoteView{}, fmt.Errorf("confirm: merchant and dishes: %w", err)
	}
	if len(rows) == 0 {
		return quoteView{}, ErrMerchantNotFound
	}
	m, err := quoteMenuFromRows(rows, cached)
	if err != nil {
		return quoteView{}, err
	}
	s.quotes.Set(merchantID, m)
	v := quoteView{rules: m.rules, dispatch: m.dispatch, terms: m.terms, dishes: make(map[int64]quotedDish, len(rows))}
	for _, r := range rows {
		if r.DishID != nil {
			v.dishes[*r.DishID] = m.dishes[*r.DishID].dish
		}
	}
	return v, nil
}

// quoteMenuFromRows is the cache entry of QuoteCart's rows: a new one, or
// had's dishes with these added when had is of the same merchant
// versions (entries are never changed once cached: concurrent confirms
// read them).
func quoteMenuFromRows(rows []dbsqlc.QuoteCartRow, had *quoteMenu) (*quoteMenu, error) {
	r0 := rows[0]
	m := &quoteMenu{merchantVersion: r0.MerchantVersion, quoteVersion: r0.QuoteVersion, dispatch: r0.CourierDispatch,
		dishes: make(map[int64]cachedDish, len(rows))}
	var err error
	if m.rules, err = rulesFromRow(r0); err != nil {
		return nil, err
	}
	if m.terms, err = promotion.Terms(r0.Promotions); err != nil {
		return nil, err
	}
	for _, t := range m.terms {
		if t.BudgetFen != nil {
			m.budgeted = append(m.budgeted, t.ID)
		}
	}
	slices.Sort(m.budgeted)
	if had != nil && had.merchantVersion == m.merchantVersion && had.quoteVersion == m.quoteVersion {
		for id, d := range had.dishes {
			m.dishes[id] = d
		}
	}
	for _, r := range rows {
		if r.DishID == nil { // the dish columns are NOT NULL in dishes
			continue
		}
		d, err := quotedDishFromRow(r)
		if err != nil {
			return nil, err
		}
		m.dishes[d.ID] = cachedDish{version: *r.Version, dish: d}
	}
	return m, nil
}

// view is the cached menu as QuoteLive's rows find it: the cart's dishes
// with their stock now and the terms with their budgets now; false when
// the merchant or a dish of the cart changed since it was cached.
func (m *quoteMenu) view(live []dbsqlc.QuoteLiveRow) (quoteView, bool) {
	l0 := live[0]
	if l0.MerchantVersion != m.merchantVersion || l0.QuoteVersion != m.quoteVersion {
		return quoteView{}, false
	}
	v := quoteView{rules: m.rules, dispatch: m.dispatch, terms: m.terms, dishes: make(map[int64]quotedDish, len(live))}
	for _, r := range live {
		if r.DishID == nil {
			continue
		}
		c, ok := m.dishes[*r.DishID]
		if !ok || c.version != *r.DishVersion {
			return quoteView{}, false
		}
		d := c.dish
		d.Stock = *r.Stock
		v.dishes[d.ID] = d
	}
	if len(m.budgeted) > 0 {
		left := make(map[int64]int64, len(l0.BudgetIds))
		for i, id := range l0.BudgetIds {
			left[id] = l0.BudgetsLeft[i]
		}
		v.terms = slices.Clone(m.terms)
		for i, t := range v.terms {
			if t.BudgetFen != nil {
				n := left[t.ID] // no shard left: nothing left
				v.terms[i].BudgetLeft = &n
			}
		}
	}
	return v, true
}
