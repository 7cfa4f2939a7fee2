package catalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
)

// The menu's structure: categories, and each dish's option groups.

// CreateCategory adds a category to a merchant's menu in tx. The caller
// commits, then calls Changed.
func (s *Service) CreateCategory(ctx context.Context, tx pgx.Tx, staff auth.Staff, merchantID int64, req CreateCategoryRequest) (Category, error) {
	if !staff.CanManage(merchantID) {
		return Category{}, auth.ErrOtherMerchant
	}
	p := dbsqlc.CategoryInsertParams{MerchantID: merchantID, Name: req.Name}
	if req.Position != nil {
		p.Position = *req.Position
	}
	// A savepoint, so that a duplicate name leaves tx usable.
	row, err := db.WithTxV(ctx, tx, func(tx pgx.Tx) (dbsqlc.Category, error) {
		return s.q.CategoryInsert(ctx, tx, p)
	})
	if err != nil {
		return Category{}, categoryWriteError(err, "insert category")
	}
	return categoryFromRow(row), nil
}

func categoryWriteError(err error, what string) error {
	if _, ok := db.ForeignKeyViolation(err); ok {
		return ErrMerchantNotFound
	}
	if _, ok := db.UniqueViolation(err); ok {
		return ErrCategoryExists
	}
	return fmt.Errorf("%s: %w", what, err)
}

// staffCategory reads a category that staff may manage.
func (s *Service) staffCategory(ctx context.Context, staff auth.Staff, id int64) (dbsqlc.Category, error) {
	row, err := s.q.CategoryGetByID(ctx, s.pool, id)
	if err != nil {
		return row, notFoundOr(err, ErrCategoryNotFound)
	}
	if !staff.CanManage(row.MerchantID) {
		return row, auth.ErrOtherMerchant
	}
	return row, nil
}

// UpdateCategory renames or moves a category if req.Version is still
// current.
func (s *Service) UpdateCategory(ctx context.Context, staff auth.Staff, id int64, req UpdateCategoryRequest) (Category, error) {
	cur, err := s.staffCategory(ctx, staff, id)
	if err != nil {
		return Category{}, err
	}
	row, err := s.q.CategoryUpdate(ctx, s.pool, dbsqlc.CategoryUpdateParams{ID: id, Version: *req.Version, Name: req.Name, Position: req.Position})
	if errors.Is(err, db.ErrNotFound) {
		return Category{}, s.categoryConflict(ctx, id, *req.Version)
	}
	if err != nil {
		return Category{}, categoryWriteError(err, "update category")
	}
	s.invalidate(ctx, cur.MerchantID)
	return categoryFromRow(row), nil
}

func (s *Service) categoryConflict(ctx context.Context, id, sent int64) error {
	cur, err := s.q.CategoryGetByID(ctx, s.pool, id)
	if err != nil {
		return notFoundOr(err, ErrCategoryNotFound)
	}
	return versionConflict(cur.Version, sent)
}

// DeleteCategory removes a category of the version read; its dishes stay
// on the menu, uncategorised.
func (s *Service) DeleteCategory(ctx context.Context, staff auth.Staff, id, version int64) error {
	cur, err := s.staffCategory(ctx, staff, id)
	if err != nil {
		return err
	}
	n, err := s.q.CategoryDelete(ctx, s.pool, dbsqlc.CategoryDeleteParams{ID: id, Version: version})
	if err != nil {
		return fmt.Errorf("delete category: %w", err)
	}
	if n == 0 {
		return s.categoryConflict(ctx, id, version)
	}
	s.invalidate(ctx, cur.MerchantID)
	return nil
}

// Categories lists a merchant's categories, fresh from the database.
func (s *Service) Categories(ctx context.Context, staff auth.Staff, merchantID int64) ([]Category, error) {
	if !staff.CanManage(merchantID) {
		return nil, auth.ErrOtherMerchant
	}
	if _, err := s.q.MerchantGetByID(ctx, s.pool, merchantID); err != nil {
		return nil, notFoundOr(err, ErrMerchantNotFound)
	}
	rows, err := s.q.CategoryListByMerchant(ctx, s.pool, merchantID)
	if err != nil {
		return nil, fmt.Errorf("list categories: %w", err)
	}
	out := make([]Category, len(rows))
	for i, r := range rows {
		out[i] = categoryFromRow(r)
	}
	return out, nil
}

// SetOptions replaces a dish's option set if req.Version (the dish's) is
// still current. Groups and choices that name an id keep it; the others
// get new ones. The dish's options version moves on, so a quote of its
// old options no longer places an order (409 quote-changed).
func (s *Service) SetOptions(ctx context.Context, staff auth.Staff, dishID int64, req SetOptionsRequest) (Dish, error) {
	if _, err := s.staffDish(ctx, staff, dishID); err != nil {
		return Dish{}, err
	}
	d, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (Dish, error) {
		if _, err := s.q.DishOptionsBump(ctx, tx, dbsqlc.DishOptionsBumpParams{ID: dishID, Version: *req.Version}); err != nil {
			return Dish{}, err
		}
		if err := s.writeOptions(ctx, tx, dishID, req.Groups); err != nil {
			return Dish{}, err
		}
		row, err := s.q.DishGetByID(ctx, tx, dishID)
		if err != nil {
			return Dish{}, fmt.Errorf("read dish: %w", err)
		}
		return s.staffDishOut(ctx, tx, row)
	})
	if errors.Is(err, db.ErrNotFound) {
		cur, gerr := s.q.DishGetByID(ctx, s.pool, dishID)
		if gerr != nil {
			return Dish{}, notFoundOr(gerr, ErrDishNotFound)
		}
		return Dish{}, versionConflict(cur.Version, *req.Version)
	}
	if err != nil {
		return Dish{}, err
	}
	s.invalidate(ctx, idOf(d.MerchantID))
	return d, nil
}

// writeOptions replaces the dish's groups and choices with groups, in tx
// (the dish's row is locked by the version bump).
func (s *Service) writeOptions(ctx context.Context, tx pgx.Tx, dishID int64, groups []OptionGroupRequest) error {
	existing, err := s.q.OptionIDsOfDish(ctx, tx, dishID)
	if err != nil {
		return fmt.Errorf("read dish options: %w", err)
	}
	groupIDs, choiceIDs := map[int64]bool{}, map[int64]bool{}
	for _, e := range existing {
		groupIDs[e.GroupID] = true
		if e.ChoiceID != nil {
			choiceIDs[*e.ChoiceID] = true
		}
	}
	if err := s.q.OptionGroupsDelete(ctx, tx, dishID); err != nil {
		return fmt.Errorf("delete dish options: %w", err)
	}
	for i, g := range groups {
		field := fmt.Sprintf("groups[%d]", i)
		id, err := keptID(field, g.ID, groupIDs)
		if err != nil {
			return err
		}
		gid, err := s.q.OptionGroupInsert(ctx, tx, dbsqlc.OptionGroupInsertParams{
			ID: id, DishID: dishID, Name: g.Name, Position: int32(i), MinChoices: g.MinChoices, MaxChoices: *g.MaxChoices, //nolint:gosec // G115: at most maxGroups
		})
		if err != nil {
			return fmt.Errorf("insert option group: %w", err)
		}
		for j, c := range g.Choices {
			id, err := keptID(fmt.Sprintf("%s.choices[%d]", field, j), c.ID, choiceIDs)
			if err != nil {
				return err
			}
			available := c.Available == nil || *c.Available
			if _, err := s.q.OptionChoiceInsert(ctx, tx, dbsqlc.OptionChoiceInsertParams{
				ID: id, GroupID: gid, Name: c.Name, Position: int32(j), PriceDeltaFen: c.PriceDeltaFen, Available: available, //nolint:gosec // G115: at most maxChoices
			}); err != nil {
				return fmt.Errorf("insert option choice: %w", err)
			}
		}
	}
	return nil
}

// keptID is the id a group or choice keeps: one the dish's options had.
func keptID(field string, id *string, had map[int64]bool) (*int64, error) {
	if id == nil {
		return nil, nil
	}
	n, _ := strconv.ParseInt(*id, 10, 64) // validated
	if !had[n] {
		return nil, problem.Field(field+".id", "this dish's options have no %s; leave id out for a new one", *id)
	}
	return &n, nil
}
