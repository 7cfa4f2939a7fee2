package catalog

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/takeout/takeout/internal/auth"
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
		id, err := pathID(r, ErrMerchantNotFound)
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

// HandleCreateMerchant serves POST /admin/v1/merchants (admins only).
func HandleCreateMerchant(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[CreateMerchantRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		m, err := s.CreateMerchant(r.Context(), req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/merchants/"+m.ID+"/menu")
		web.JSON(w, http.StatusCreated, m)
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

// HandleCreateDish serves POST /admin/v1/merchants/{id}/dishes.
func HandleCreateDish(s *Service) http.Handler {
	return staffHandler(ErrMerchantNotFound, func(w http.ResponseWriter, r *http.Request, staff auth.Staff, id int64) {
		req, err := web.Decode[CreateDishRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		d, err := s.CreateDish(r.Context(), staff, id, req)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		w.Header().Set("Location", "/admin/v1/dishes/"+d.ID)
		web.JSON(w, http.StatusCreated, d)
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

// HandleSetStock serves PUT /admin/v1/dishes/{id}/stock.
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

// staffHandler adapts a handler that needs the staff member and the {id}
// path parameter.
func staffHandler(notFound error, h func(http.ResponseWriter, *http.Request, auth.Staff, int64)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		staff, ok := auth.StaffFrom(r.Context())
		if !ok {
			web.Error(w, r, problem.New(problem.Unauthorized, "staff token required"))
			return
		}
		id, err := pathID(r, notFound)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		h(w, r, staff, id)
	})
}

// pathID parses the {id} path parameter; an id that cannot exist is the
// resource's not-found problem.
func pathID(r *http.Request, notFound error) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, notFound
	}
	return id, nil
}
