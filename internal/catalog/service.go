package catalog

import (
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
	"github.com/takeout/takeout/internal/inventory"
	"github.com/takeout/takeout/internal/problem"
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
	cache   *otter.Cache[string, []byte]
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
}

// NewService returns a catalog service.
func NewService(opts Options) (*Service, error) {
	cache, err := otter.New(&otter.Options[string, []byte]{
		MaximumSize:      opts.CacheSize,
		ExpiryCalculator: otter.ExpiryWriting[string, []byte](opts.CacheTTL),
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

// MerchantsJSON returns the encoded public merchant list.
func (s *Service) MerchantsJSON(ctx context.Context) ([]byte, error) {
	return s.cached(ctx, keyMerchants, func(ctx context.Context) (any, error) {
		rows, err := s.q.MerchantList(ctx, s.pool)
		if err != nil {
			return nil, fmt.Errorf("list merchants: %w", err)
		}
		list := MerchantList{Merchants: make([]Merchant, len(rows))}
		for i, r := range rows {
			list.Merchants[i] = merchantFromRow(r)
		}
		return list, nil
	})
}

// MenuJSON returns the encoded public menu of a merchant.
func (s *Service) MenuJSON(ctx context.Context, merchantID int64) ([]byte, error) {
	return s.cached(ctx, keyMenuPrefix+strconv.FormatInt(merchantID, 10), func(ctx context.Context) (any, error) {
		return s.menu(ctx, merchantID)
	})
}

func (s *Service) menu(ctx context.Context, merchantID int64) (Menu, error) {
	m, err := s.q.MerchantGetByID(ctx, s.pool, merchantID)
	if err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return Menu{}, otter.ErrNotFound
		}
		return Menu{}, fmt.Errorf("get merchant: %w", err)
	}
	dishes, err := s.merchantDishes(ctx, merchantID, dishFromRow)
	if err != nil {
		return Menu{}, err
	}
	categories, err := s.q.CategoryListByMerchant(ctx, s.pool, merchantID)
	if err != nil {
		return Menu{}, fmt.Errorf("list categories: %w", err)
	}
	menu := Menu{Merchant: merchantFromRow(m), Categories: make([]Category, len(categories)), Dishes: dishes}
	for i, c := range categories {
		menu.Categories[i] = categoryFromRow(c)
	}
	return menu, nil
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
func (s *Service) cached(ctx context.Context, key string, load func(context.Context) (any, error)) ([]byte, error) {
	if b, ok := s.cache.GetIfPresent(key); ok {
		s.cacheLookups.WithLabelValues("hit").Inc()
		return b, nil
	}
	s.cacheLookups.WithLabelValues("miss").Inc()
	b, err := s.cache.Get(ctx, key, otter.LoaderFunc[string, []byte](func(ctx context.Context, _ string) ([]byte, error) {
		v, err := load(ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	}))
	if errors.Is(err, otter.ErrNotFound) {
		return nil, ErrMerchantNotFound
	}
	return b, err
}

// invalidate drops merchantID's cached entries here and tells every other
// instance to do the same. Without Redis the others catch up when their
// entries expire (TAKEOUT_CATALOG_CACHE_TTL).
func (s *Service) invalidate(ctx context.Context, merchantID int64) {
	id := strconv.FormatInt(merchantID, 10)
	s.invalidateLocal(id)
	s.invalidations.WithLabelValues("local").Inc()
	if s.redis.Client == nil {
		return
	}
	if err := s.redis.Client.Publish(context.WithoutCancel(ctx), s.channel, s.origin+" "+id).Err(); err != nil {
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
	status := MerchantOpen
	if req.Status != nil {
		status = *req.Status
	}
	var fee int64
	if req.DeliveryFeeFen != nil {
		fee = *req.DeliveryFeeFen
	}
	row, err := s.q.MerchantInsert(ctx, tx, dbsqlc.MerchantInsertParams{Name: req.Name, Status: status, DeliveryFeeFen: fee})
	if err != nil {
		return Merchant{}, fmt.Errorf("insert merchant: %w", err)
	}
	return merchantFromRow(row), nil
}

// Changed drops the cached public catalog of a merchant whose change was
// just committed, here and on every other instance.
func (s *Service) Changed(ctx context.Context, merchantID int64) { s.invalidate(ctx, merchantID) }

// UpdateMerchant changes a merchant if req.Version is still current.
func (s *Service) UpdateMerchant(ctx context.Context, staff auth.Staff, id int64, req UpdateMerchantRequest) (Merchant, error) {
	if !staff.CanManage(id) {
		return Merchant{}, auth.ErrOtherMerchant
	}
	row, err := s.q.MerchantUpdate(ctx, s.pool, dbsqlc.MerchantUpdateParams{
		ID: id, Version: *req.Version, Name: req.Name, Status: req.Status, DeliveryFeeFen: req.DeliveryFeeFen,
	})
	if errors.Is(err, db.ErrNotFound) {
		cur, gerr := s.q.MerchantGetByID(ctx, s.pool, id)
		if gerr != nil {
			return Merchant{}, notFoundOr(gerr, ErrMerchantNotFound)
		}
		return Merchant{}, versionConflict(cur.Version, *req.Version)
	}
	if err != nil {
		return Merchant{}, fmt.Errorf("update merchant: %w", err)
	}
	s.invalidate(ctx, id)
	return merchantFromRow(row), nil
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
