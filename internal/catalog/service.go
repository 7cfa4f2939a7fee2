package catalog

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/maypok86/otter/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/hours"
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/promotion"
	"github.com/takeout/takeout/internal/redisconn"
)

// Errors of the catalog.
var (
	ErrMerchantNotFound = problem.New(problem.NotFound, "no such merchant")
	ErrDishNotFound     = problem.New(problem.NotFound, "no such dish")
	ErrDishExists       = problem.New(problem.AlreadyExists, "this merchant already has a dish of that name")
	ErrCategoryNotFound = problem.New(problem.NotFound, "no such category")
	// ErrCategoryOfOther is a dish placed in a category of another
	// merchant, or one that does not exist.
	ErrCategoryOfOther = problem.Field("category_id", "the merchant has no such category")
	ErrCategoryExists  = problem.New(problem.AlreadyExists, "this merchant already has a category of that name")
)

const (
	keyMerchants  = "merchants"
	keyMenuPrefix = "menu:"
	invalidateAll = "*"
	channelSuffix = "catalog:invalidate"
)

// Service reads and changes the catalog. Reads of the public catalog come
// from an in-process cache of encoded responses; every change invalidates
// it here and, over Redis pub/sub, on every other instance.
type Service struct {
	pool    *pgxpool.Pool
	q       *dbsqlc.Queries
	redis   *redisconn.Conn
	logger  *slog.Logger
	cache   *otter.Cache[string, cacheEntry]
	now     func() time.Time
	channel string
	// origin tags this instance's invalidations, so that it skips its own
	// echo (it invalidated locally already).
	origin string

	cacheLookups  *prometheus.CounterVec
	invalidations *prometheus.CounterVec
}

// Options configure NewService.
type Options struct {
	Pool       *pgxpool.Pool
	Redis      *redisconn.Conn
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	CacheTTL   time.Duration
	CacheSize  int
	// Now is the clock the menu's open_now is read on (time.Now when
	// nil).
	Now func() time.Time
}

// NewService returns a catalog service.
func NewService(opts Options) (*Service, error) {
	cache, err := otter.New(&otter.Options[string, cacheEntry]{
		MaximumSize:      opts.CacheSize,
		ExpiryCalculator: otter.ExpiryWriting[string, cacheEntry](opts.CacheTTL),
	})
	if err != nil {
		return nil, fmt.Errorf("catalog cache: %w", err)
	}
	s := &Service{
		pool:    opts.Pool,
		q:       dbsqlc.New(),
		redis:   opts.Redis,
		logger:  opts.Logger,
		cache:   cache,
		now:     opts.Now,
		channel: opts.Redis.Key(channelSuffix),
		origin:  newOrigin(),
		cacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_catalog_cache_lookups_total",
			Help: "Catalog L1 cache lookups by result (hit, miss).",
		}, []string{"result"}),
		invalidations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "takeout_catalog_invalidations_total",
			Help: "Catalog cache invalidations by source (local, remote, resubscribe).",
		}, []string{"source"}),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{s.cacheLookups, s.invalidations} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register catalog metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Close stops the cache's background maintenance.
func (s *Service) Close() { s.cache.StopAllGoroutines() }

// cacheEntry is a cached public read: its encoding, and for a menu the
// merchant's closed flag and hours, which say at each request whether it
// is open now.
type cacheEntry struct {
	body     []byte
	open     bool
	schedule *hours.Schedule
}

// MerchantsJSON returns the encoded public merchant list.
func (s *Service) MerchantsJSON(ctx context.Context) ([]byte, error) {
	e, err := s.cached(ctx, keyMerchants, func(ctx context.Context) (cacheEntry, error) {
		rows, err := s.q.MerchantList(ctx, s.pool)
		if err != nil {
			return cacheEntry{}, fmt.Errorf("list merchants: %w", err)
		}
		list := MerchantList{Merchants: make([]Merchant, len(rows))}
		for i, r := range rows {
			list.Merchants[i] = merchantFromRow(r)
		}
		b, err := json.Marshal(list)
		return cacheEntry{body: b}, err
	})
	return e.body, err
}

// MenuJSON returns the encoded public menu of a merchant, saying whether
// it is open now.
func (s *Service) MenuJSON(ctx context.Context, merchantID int64) ([]byte, error) {
	e, err := s.cached(ctx, keyMenuPrefix+strconv.FormatInt(merchantID, 10), func(ctx context.Context) (cacheEntry, error) {
		return s.menu(ctx, merchantID)
	})
	if err != nil {
		return nil, err
	}
	return withOpenNow(e, s.now()), nil
}

// withOpenNow puts open_now and next_open_at in front of a cached menu's
// other members.
func withOpenNow(e cacheEntry, now time.Time) []byte {
	var st hours.State
	if e.open {
		st = e.schedule.At(now)
	}
	out := make([]byte, 0, len(e.body)+64)
	out = append(out, `{"open_now":`...)
	out = strconv.AppendBool(out, st.Open)
	out = append(out, `,"next_open_at":`...)
	if st.Open || st.NextOpen.IsZero() {
		out = append(out, "null"...)
	} else {
		out = append(out, '"')
		out = st.NextOpen.UTC().AppendFormat(out, time.RFC3339)
		out = append(out, '"')
	}
	out = append(out, ',')
	return append(out, e.body[1:]...) // the body is an object: "{" ...
}

// menuBody is a menu as cached: all but what depends on the time.
type menuBody struct {
	Merchant   Merchant              `json:"merchant"`
	Categories []Category            `json:"categories"`
	Dishes     []Dish                `json:"dishes"`
	Promotions []promotion.Promotion `json:"promotions"`
}

func (s *Service) menu(ctx context.Context, merchantID int64) (cacheEntry, error) {
	m, err := s.q.MerchantGetByID(ctx, s.pool, merchantID)
	if err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return cacheEntry{}, otter.ErrNotFound
		}
		return cacheEntry{}, fmt.Errorf("get merchant: %w", err)
	}
	schedule, err := hours.FromDB(m.TimeZone, m.WeeklyHours, m.ClosedDates)
	if err != nil {
		return cacheEntry{}, fmt.Errorf("merchant %d: %w", m.ID, err)
	}
	dishes, err := s.merchantDishes(ctx, merchantID, dishFromRow)
	if err != nil {
		return cacheEntry{}, err
	}
	categories, err := s.q.CategoryListByMerchant(ctx, s.pool, merchantID)
	if err != nil {
		return cacheEntry{}, fmt.Errorf("list categories: %w", err)
	}
	promos, err := s.q.PromotionsOnMenu(ctx, s.pool, merchantID)
	if err != nil {
		return cacheEntry{}, fmt.Errorf("list promotions: %w", err)
	}
	menu := menuBody{Merchant: merchantFromRow(m), Categories: make([]Category, len(categories)), Dishes: dishes,
		Promotions: []promotion.Promotion{}}
	today := s.now().In(cmp.Or(schedule.Location, time.UTC)).Format(time.DateOnly)
	for _, p := range promos {
		// Those that ended before the merchant's today are off the menu.
		if !p.Promotion.EndsOn.Valid || p.Promotion.EndsOn.Time.Format(time.DateOnly) >= today {
			menu.Promotions = append(menu.Promotions, promotion.Out(p.Promotion, p.BudgetLeft))
		}
	}
	for i, c := range categories {
		menu.Categories[i] = categoryFromRow(c)
	}
	b, err := json.Marshal(menu)
	return cacheEntry{body: b, open: m.Status == MerchantOpen, schedule: &schedule}, err
}

// merchantDishes reads a merchant's dishes, rendered by render, with
// their options.
func (s *Service) merchantDishes(ctx context.Context, merchantID int64, render func(dbsqlc.DishesWithStock) Dish) ([]Dish, error) {
	rows, err := s.q.DishListByMerchant(ctx, s.pool, merchantID)
	if err != nil {
		return nil, fmt.Errorf("list dishes: %w", err)
	}
	options, err := s.q.OptionsByMerchant(ctx, s.pool, merchantID)
	if err != nil {
		return nil, fmt.Errorf("list dish options: %w", err)
	}
	out := make([]Dish, len(rows))
	for i, r := range rows {
		out[i] = render(r)
	}
	withOptions(out, options)
	return out, nil
}

// staffDishOut renders one dish for its staff, with its options read in
// q (the transaction that changed it, or the pool).
func (s *Service) staffDishOut(ctx context.Context, q dbsqlc.DBTX, row dbsqlc.DishesWithStock) (Dish, error) {
	rows, err := s.q.OptionsByDishes(ctx, q, []int64{row.ID})
	if err != nil {
		return Dish{}, fmt.Errorf("read dish options: %w", err)
	}
	opts := make([]dbsqlc.OptionsByMerchantRow, len(rows))
	for i, r := range rows {
		opts[i] = dbsqlc.OptionsByMerchantRow(r)
	}
	out := []Dish{staffDishFromRow(row)}
	withOptions(out, opts)
	return out[0], nil
}

// cached returns the cached encoding of key, loading it with load on a
// miss. Concurrent misses of one key load once, and an invalidation that
// arrives during a load discards the loaded value (otter's guarantee), so
// a stale read can never be cached after the change that made it stale.
func (s *Service) cached(ctx context.Context, key string, load func(context.Context) (cacheEntry, error)) (cacheEntry, error) {
	if e, ok := s.cache.GetIfPresent(key); ok {
		s.cacheLookups.WithLabelValues("hit").Inc()
		return e, nil
	}
	s.cacheLookups.WithLabelValues("miss").Inc()
	e, err := s.cache.Get(ctx, key, otter.LoaderFunc[string, cacheEntry](func(ctx context.Context, _ string) (cacheEntry, error) {
		return load(ctx)
	}))
	if errors.Is(err, otter.ErrNotFound) {
		return cacheEntry{}, ErrMerchantNotFound
	}
	return e, err
}

// invalidate drops merchantID's cached entries here and tells every other
// instance to do the same. Without Redis the others catch up when their
// entries expire (TAKEOUT_CATALOG_CACHE_TTL).
func (s *Service) invalidate(ctx context.Context, merchantID int64) {
	id := strconv.FormatInt(merchantID, 10)
	s.invalidateLocal(id)
	s.invalidations.WithLabelValues("local").Inc()
	if err := s.redis.Publish(context.WithoutCancel(ctx), s.channel, s.origin+" "+id); err != nil {
		s.logger.WarnContext(ctx, "publish catalog invalidation failed; other instances catch up on cache expiry", "merchant_id", id, "err", err)
	}
}

func (s *Service) invalidateLocal(merchantID string) {
	if merchantID == invalidateAll {
		s.flush()
		return
	}
	s.cache.Invalidate(keyMenuPrefix + merchantID)
	s.cache.Invalidate(keyMerchants)
}

// flush drops every entry. Entries are invalidated one by one, since
// otter's InvalidateAll does not cover loads in flight.
func (s *Service) flush() {
	for k := range s.cache.Keys() {
		s.cache.Invalidate(k)
	}
}

// RunInvalidations applies other instances' invalidations until ctx ends.
// Messages published while this instance is disconnected are lost, so the
// whole cache is flushed on every (re)subscription. ready, if not nil, is
// closed after the first subscription.
func (s *Service) RunInvalidations(ctx context.Context, ready chan<- struct{}) {
	s.redis.Subscribe(ctx, s.channel, redisconn.Subscription{
		OnMessage: func(payload string) {
			origin, id, ok := strings.Cut(payload, " ")
			if !ok {
				id = origin // a bare id: from an older or foreign publisher
			} else if origin == s.origin {
				return
			}
			s.invalidateLocal(strings.TrimSpace(id))
			s.invalidations.WithLabelValues("remote").Inc()
		},
		OnSubscribe: func() {
			s.flush()
			s.invalidations.WithLabelValues("resubscribe").Inc()
		},
	}, ready)
}

// CreateMerchant creates a merchant (admins only) in tx. The caller
// commits, then calls Changed with its id.
func (s *Service) CreateMerchant(ctx context.Context, tx pgx.Tx, req CreateMerchantRequest) (Merchant, error) {
	p := dbsqlc.MerchantInsertParams{Name: req.Name, Status: MerchantOpen, TimeZone: req.TimeZone} // nil: the default, Asia/Shanghai
	if req.Status != nil {
		p.Status = *req.Status
	}
	r := req.MerchantRules
	if r.DeliveryFeeFen != nil {
		p.DeliveryFeeFen = *r.DeliveryFeeFen
	}
	if r.MinOrderFen != nil {
		p.MinOrderFen = *r.MinOrderFen
	}
	if r.Location != nil {
		p.Latitude, p.Longitude = &r.Location.Lat, &r.Location.Lng
	}
	if r.ClosedDates != nil {
		p.ClosedDates = *r.ClosedDates
	}
	p.AcceptWithinSeconds, p.AcceptTimeoutAction = req.AcceptWithinSeconds, req.AcceptTimeoutAction
	var err error
	if r.DeliveryBands != nil {
		if p.DeliveryBands, err = json.Marshal(*r.DeliveryBands); err != nil {
			return Merchant{}, err
		}
	}
	if r.Hours != nil {
		if p.WeeklyHours, err = json.Marshal(*r.Hours); err != nil {
			return Merchant{}, err
		}
	}
	if r.Fulfilment != nil {
		if p.Fulfilment, err = json.Marshal(*r.Fulfilment); err != nil {
			return Merchant{}, err
		}
	}
	// A savepoint, so that a refused row leaves tx usable.
	row, err := db.WithTxV(ctx, tx, func(tx pgx.Tx) (dbsqlc.Merchant, error) { return s.q.MerchantInsert(ctx, tx, p) })
	if err != nil {
		return Merchant{}, merchantWriteError(err, "insert merchant")
	}
	return merchantFromRow(row), nil
}

// merchantWriteError maps the constraint violations of a merchant insert
// or update to their problems.
func merchantWriteError(err error, what string) error {
	if c, ok := db.CheckViolation(err); ok && c == "merchants_bands_location_check" {
		return problem.Field("delivery_bands", "distance bands need the merchant's location: send location too")
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Changed drops the cached public catalog of a merchant whose change was
// just committed, here and on every other instance.
func (s *Service) Changed(ctx context.Context, merchantID int64) { s.invalidate(ctx, merchantID) }

// UpdateMerchant changes a merchant if req.Version is still current.
func (s *Service) UpdateMerchant(ctx context.Context, staff auth.Staff, id int64, req UpdateMerchantRequest) (Merchant, error) {
	if !staff.CanManage(id) {
		return Merchant{}, auth.ErrOtherMerchant
	}
	p, err := merchantUpdateParams(id, req)
	if err != nil {
		return Merchant{}, err
	}
	row, err := s.q.MerchantUpdate(ctx, s.pool, p)
	if errors.Is(err, db.ErrNotFound) {
		cur, gerr := s.q.MerchantGetByID(ctx, s.pool, id)
		if gerr != nil {
			return Merchant{}, notFoundOr(gerr, ErrMerchantNotFound)
		}
		return Merchant{}, versionConflict(cur.Version, *req.Version)
	}
	if err != nil {
		return Merchant{}, merchantWriteError(err, "update merchant")
	}
	s.invalidate(ctx, id)
	return merchantFromRow(row), nil
}

func merchantUpdateParams(id int64, req UpdateMerchantRequest) (dbsqlc.MerchantUpdateParams, error) {
	r := req.MerchantRules
	p := dbsqlc.MerchantUpdateParams{ID: id, Version: *req.Version, Name: req.Name, Status: req.Status,
		DeliveryFeeFen: r.DeliveryFeeFen, MinOrderFen: r.MinOrderFen, TimeZone: r.TimeZone, QuoteChanged: r.changesQuote(),
		AcceptWithinSeconds: req.AcceptWithinSeconds, AcceptTimeoutAction: req.AcceptTimeoutAction}
	if r.Location != nil {
		p.SetLocation, p.Latitude, p.Longitude = true, &r.Location.Lat, &r.Location.Lng
	}
	if r.ClosedDates != nil {
		p.ClosedDates = append([]string{}, *r.ClosedDates...) // [] clears: not NULL
	}
	var err error
	if r.DeliveryBands != nil {
		if p.DeliveryBands, err = json.Marshal(*r.DeliveryBands); err != nil {
			return p, err
		}
	}
	if r.Hours != nil {
		if p.WeeklyHours, err = json.Marshal(*r.Hours); err != nil {
			return p, err
		}
	}
	if r.Fulfilment != nil {
		if p.Fulfilment, err = json.Marshal(*r.Fulfilment); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Dishes lists every dish of a merchant, fresh from the database, for its
// staff.
func (s *Service) Dishes(ctx context.Context, staff auth.Staff, merchantID int64) ([]Dish, error) {
	if !staff.CanManage(merchantID) {
		return nil, auth.ErrOtherMerchant
	}
	if _, err := s.q.MerchantGetByID(ctx, s.pool, merchantID); err != nil {
		return nil, notFoundOr(err, ErrMerchantNotFound)
	}
	return s.merchantDishes(ctx, merchantID, staffDishFromRow)
}

// CreateDish adds a dish to a merchant's menu in tx, with its opening
// stock on hand. The caller commits, then calls Changed.
func (s *Service) CreateDish(ctx context.Context, tx pgx.Tx, staff auth.Staff, merchantID int64, req CreateDishRequest) (Dish, error) {
	if !staff.CanManage(merchantID) {
		return Dish{}, auth.ErrOtherMerchant
	}
	p := dbsqlc.DishInsertParams{MerchantID: merchantID, Name: req.Name, PriceFen: *req.PriceFen, OnSale: true, ImageUrl: req.ImageURL}
	if req.OnSale != nil {
		p.OnSale = *req.OnSale
	}
	if req.Position != nil {
		p.Position = *req.Position
	}
	if req.PackagingFeeFen != nil {
		p.PackagingFeeFen = *req.PackagingFeeFen
	}
	if req.CategoryID != nil {
		c := idOf(*req.CategoryID) // validated
		p.CategoryID = &c
	}
	// A savepoint, so that a duplicate name leaves tx usable.
	row, err := db.WithTxV(ctx, tx, func(tx pgx.Tx) (dbsqlc.DishesWithStock, error) {
		id, err := s.q.DishInsert(ctx, tx, p)
		if err != nil {
			return dbsqlc.DishesWithStock{}, err
		}
		if _, err := inventory.Restock(ctx, tx, id, inventory.Change{SetOnHand: req.Stock, Opening: true, Actor: staff.Subject}); err != nil {
			return dbsqlc.DishesWithStock{}, err
		}
		return s.q.DishGetByID(ctx, tx, id)
	})
	if err != nil {
		return Dish{}, dishWriteError(err, "insert dish")
	}
	return staffDishFromRow(row), nil // a new dish has no options yet
}

// dishWriteError maps the constraint violations of a dish insert or
// update to their problems.
func dishWriteError(err error, what string) error {
	if fk, ok := db.ForeignKeyViolation(err); ok {
		if fk == "dishes_category_fkey" {
			return ErrCategoryOfOther
		}
		return ErrMerchantNotFound
	}
	if _, ok := db.UniqueViolation(err); ok {
		return ErrDishExists
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Dish returns one dish, fresh from the database, for its staff.
func (s *Service) Dish(ctx context.Context, staff auth.Staff, id int64) (Dish, error) {
	row, err := s.q.DishGetByID(ctx, s.pool, id)
	if err != nil {
		return Dish{}, notFoundOr(err, ErrDishNotFound)
	}
	if !staff.CanManage(row.MerchantID) {
		return Dish{}, auth.ErrOtherMerchant
	}
	return s.staffDishOut(ctx, s.pool, row)
}

// SetStock sets what a dish has on hand (see inventory.Restock).
func (s *Service) SetStock(ctx context.Context, staff auth.Staff, id int64, req SetStockRequest) (Dish, error) {
	row, err := s.staffDish(ctx, staff, id)
	if err != nil {
		return Dish{}, err
	}
	d, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (Dish, error) {
		return s.restock(ctx, tx, id, inventory.Change{SetOnHand: req.OnHand, IfOnHand: req.IfOnHand, Actor: staff.Subject})
	})
	if err != nil {
		return Dish{}, err
	}
	s.invalidate(ctx, row.MerchantID)
	return d, nil
}

// AdjustStock adds req.Delta units to what a dish has on hand (removes
// them when negative), in tx. The caller commits, then calls Changed.
func (s *Service) AdjustStock(ctx context.Context, tx pgx.Tx, staff auth.Staff, id int64, req AdjustStockRequest) (Dish, error) {
	if _, err := s.staffDish(ctx, staff, id); err != nil {
		return Dish{}, err
	}
	return s.restock(ctx, tx, id, inventory.Change{Delta: req.Delta, Actor: staff.Subject})
}

func (s *Service) restock(ctx context.Context, tx pgx.Tx, id int64, c inventory.Change) (Dish, error) {
	if _, err := inventory.Restock(ctx, tx, id, c); err != nil {
		return Dish{}, err
	}
	row, err := s.q.DishGetByID(ctx, tx, id)
	if err != nil {
		return Dish{}, fmt.Errorf("read dish: %w", err)
	}
	return s.staffDishOut(ctx, tx, row)
}

// staffDish reads a dish that staff may manage. A dish never moves
// between merchants, so the check holds for the change that follows.
func (s *Service) staffDish(ctx context.Context, staff auth.Staff, id int64) (dbsqlc.DishesWithStock, error) {
	row, err := s.q.DishGetByID(ctx, s.pool, id)
	if err != nil {
		return row, notFoundOr(err, ErrDishNotFound)
	}
	if !staff.CanManage(row.MerchantID) {
		return row, auth.ErrOtherMerchant
	}
	return row, nil
}

// UpdateDish changes a dish's name, price or sale status if req.Version
// is still current.
func (s *Service) UpdateDish(ctx context.Context, staff auth.Staff, id int64, req UpdateDishRequest) (Dish, error) {
	if _, err := s.staffDish(ctx, staff, id); err != nil {
		return Dish{}, err
	}
	p := dbsqlc.DishUpdateParams{ID: id, Version: *req.Version, Name: req.Name, PriceFen: req.PriceFen, OnSale: req.OnSale,
		Position: req.Position, PackagingFeeFen: req.PackagingFeeFen}
	if req.CategoryID != nil {
		p.SetCategory = true
		if *req.CategoryID != "" {
			c := idOf(*req.CategoryID) // validated
			p.CategoryID = &c
		}
	}
	if req.ImageURL != nil {
		p.SetImage = true
		if *req.ImageURL != "" {
			p.ImageUrl = req.ImageURL
		}
	}
	d, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (Dish, error) {
		if _, err := s.q.DishUpdate(ctx, tx, p); err != nil {
			return Dish{}, err
		}
		row, err := s.q.DishGetByID(ctx, tx, id)
		if err != nil {
			return Dish{}, err
		}
		return s.staffDishOut(ctx, tx, row)
	})
	if errors.Is(err, db.ErrNotFound) {
		cur, gerr := s.q.DishGetByID(ctx, s.pool, id)
		if gerr != nil {
			return Dish{}, notFoundOr(gerr, ErrDishNotFound)
		}
		return Dish{}, versionConflict(cur.Version, p.Version)
	}
	if err != nil {
		return Dish{}, dishWriteError(err, "update dish")
	}
	s.invalidate(ctx, idOf(d.MerchantID))
	return d, nil
}

func notFoundOr(err error, notFound error) error {
	if errors.Is(err, db.ErrNotFound) {
		return notFound
	}
	return err
}

func versionConflict(current, sent int64) error {
	return problem.New(problem.VersionConflict, "version %d is stale: the current version is %d; read it again and reapply your change", sent, current).
		With("current_version", current)
}

func newOrigin() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Begin starts a transaction on the catalog's pool: handlers that record
// an Idempotency-Key with a change run both in it.
func (s *Service) Begin(ctx context.Context) (pgx.Tx, error) { return s.pool.Begin(ctx) }
