package catalog

import (
	"context"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// HandleMerchants serves GET /v1/merchants.
func HandleMerchants(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := s.MerchantsJSON(r.Context())
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.RawJSON(w, http.StatusOK, b)
	})
}

// HandleMenu serves GET /v1/merchants/{id}/menu.
func HandleMenu(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := web.PathID(r, ErrMerchantNotFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		b, err := s.MenuJSON(r.Context(), id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.RawJSON(w, http.StatusOK, b)
	})
}

// HandleCreateMerchant serves POST /admin/v1/merchants (admins only),
// exactly once per Idempotency-Key.
func HandleCreateMerchant(s *Service, idem *idempotency.Store) http.Handler {
	return idempotency.Creating(idem, s, false, auth.StaffScope, func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
		req, err := web.Decode[CreateMerchantRequest](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		m, err := s.CreateMerchant(ctx, tx, req)
		if err != nil {
			return idempotency.Created{}, err
		}
		c, err := idempotency.JSONCreated(http.StatusCreated, m, "Location", "/v1/merchants/"+m.ID+"/menu")
		c.AfterCommit = func() { s.Changed(ctx, idOf(m.ID)) }
		return c, err
	})
}

// HandleUpdateMerchant serves PATCH /admin/v1/merchants/{id}.
func HandleUpdateMerchant(s *Service) http.Handler {
	return staffHandler(ErrMerchantNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		req, err := web.Decode[UpdateMerchantRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		m, err := s.UpdateMerchant(r.Context(), staff, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, m)
	})
}

// DishList is the answer of GET /admin/v1/merchants/{id}/dishes.
type DishList struct {
	Dishes []Dish `json:"dishes"`
}

// HandleListDishes serves GET /admin/v1/merchants/{id}/dishes.
func HandleListDishes(s *Service) http.Handler {
	return staffHandler(ErrMerchantNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		dishes, err := s.Dishes(r.Context(), staff, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, DishList{Dishes: dishes})
	})
}

// HandleCreateDish serves POST /admin/v1/merchants/{id}/dishes, exactly
// once per Idempotency-Key.
func HandleCreateDish(s *Service, idem *idempotency.Store) http.Handler {
	return staffCreating(s, idem, false, ErrMerchantNotFound, func(ctx context.Context, tx pgx.Tx, r *http.Request, staff auth.Staff, id int64) (idempotency.Created, error) {
		req, err := web.Decode[CreateDishRequest](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		d, err := s.CreateDish(ctx, tx, staff, id, req)
		if err != nil {
			return idempotency.Created{}, err
		}
		c, err := idempotency.JSONCreated(http.StatusCreated, d, "Location", "/admin/v1/dishes/"+d.ID)
		c.AfterCommit = func() { s.Changed(ctx, id) }
		return c, err
	})
}

// HandleGetDish serves GET /admin/v1/dishes/{id}.
func HandleGetDish(s *Service) http.Handler {
	return staffHandler(ErrDishNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		d, err := s.Dish(r.Context(), staff, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, d)
	})
}

// HandleUpdateDish serves PATCH /admin/v1/dishes/{id}.
func HandleUpdateDish(s *Service) http.Handler {
	return staffHandler(ErrDishNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		req, err := web.Decode[UpdateDishRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		d, err := s.UpdateDish(r.Context(), staff, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, d)
	})
}

// HandleSetStock serves PUT /admin/v1/dishes/{id}/stock: set what is on
// hand.
func HandleSetStock(s *Service) http.Handler {
	return staffHandler(ErrDishNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		req, err := web.Decode[SetStockRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		d, err := s.SetStock(r.Context(), staff, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, d)
	})
}

// HandleAdjustStock serves POST /admin/v1/dishes/{id}/stock/adjustments:
// add (or remove) units on hand, exactly once per Idempotency-Key, which
// it requires (a retried delivery must not count twice).
func HandleAdjustStock(s *Service, idem *idempotency.Store) http.Handler {
	return staffCreating(s, idem, true, ErrDishNotFound, func(ctx context.Context, tx pgx.Tx, r *http.Request, staff auth.Staff, id int64) (idempotency.Created, error) {
		req, err := web.Decode[AdjustStockRequest](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		d, err := s.AdjustStock(ctx, tx, staff, id, req)
		if err != nil {
			return idempotency.Created{}, err
		}
		c, err := idempotency.JSONCreated(http.StatusCreated, d)
		c.AfterCommit = func() { s.Changed(ctx, idOf(d.MerchantID)) }
		return c, err
	})
}

// staffCreating is idempotency.Creating for a staff route with an {id}.
func staffCreating(s *Service, idem *idempotency.Store, required bool, notFound error,
	create func(context.Context, pgx.Tx, *http.Request, auth.Staff, int64) (idempotency.Created, error)) http.Handler {
	return idempotency.Creating(idem, s, required, auth.StaffScope, func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
		staff, ok := auth.StaffFrom(ctx)
		if !ok {
			return idempotency.Created{}, problem.New(problem.Unauthorized, "staff token required")
		}
		id, err := web.PathID(r, notFound)
		if err != nil {
			return idempotency.Created{}, err
		}
		return create(ctx, tx, r, staff, id)
	})
}

func idOf(s string) int64 {
	id, _ := strconv.ParseInt(s, 10, 64) // ids we formatted
	return id
}

// staffHandler adapts a handler that needs the staff member and the {id}
// path parameter.
func staffHandler(notFound error, h func(http.ResponseWriter, *http.Request, auth.Staff, int64)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, ok := auth.StaffFrom(r.Context())
		if !ok {
			web.Error(w, r, problem.New(problem.Unauthorized, "staff token required"))
			return
		}
		id, err := web.PathID(r, notFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		h(w, r, staff, id)
	})
}

// CategoryList is the answer of GET /admin/v1/merchants/{id}/categories.
type CategoryList struct {
	Categories []Category `json:"categories"`
}

// HandleListCategories serves GET /admin/v1/merchants/{id}/categories.
func HandleListCategories(s *Service) http.Handler {
	return staffHandler(ErrMerchantNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		cats, err := s.Categories(r.Context(), staff, id)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, CategoryList{Categories: cats})
	})
}

// HandleCreateCategory serves POST /admin/v1/merchants/{id}/categories,
// exactly once per Idempotency-Key.
func HandleCreateCategory(s *Service, idem *idempotency.Store) http.Handler {
	return staffCreating(s, idem, false, ErrMerchantNotFound, func(ctx context.Context, tx pgx.Tx, r *http.Request, staff auth.Staff, id int64) (idempotency.Created, error) {
		req, err := web.Decode[CreateCategoryRequest](r)
		if err != nil {
			return idempotency.Created{}, err
		}
		c, err := s.CreateCategory(ctx, tx, staff, id, req)
		if err != nil {
			return idempotency.Created{}, err
		}
		created, err := idempotency.JSONCreated(http.StatusCreated, c, "Location", "/admin/v1/categories/"+c.ID)
		created.AfterCommit = func() { s.Changed(ctx, id) }
		return created, err
	})
}

// HandleUpdateCategory serves PATCH /admin/v1/categories/{id}.
func HandleUpdateCategory(s *Service) http.Handler {
	return staffHandler(ErrCategoryNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		req, err := web.Decode[UpdateCategoryRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		c, err := s.UpdateCategory(r.Context(), staff, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, c)
	})
}

// HandleDeleteCategory serves DELETE /admin/v1/categories/{id}?version=N:
// its dishes stay, uncategorised.
func HandleDeleteCategory(s *Service) http.Handler {
	return staffHandler(ErrCategoryNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		q, err := web.Query(r, "version")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		version, err := strconv.ParseInt(q.Get("version"), 10, 64)
		if err != nil || version < 1 {
			web.Error(w, r, problem.Field("version", "required: the version you read, e.g. ?version=1"))
			return
		}
		if err := s.DeleteCategory(r.Context(), staff, id, version); err != nil {
			web.Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// HandleSetOptions serves PUT /admin/v1/dishes/{id}/options: the dish's
// whole option set.
func HandleSetOptions(s *Service) http.Handler {
	return staffHandler(ErrDishNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		req, err := web.Decode[SetOptionsRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		d, err := s.SetOptions(r.Context(), staff, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, d)
	})
}
