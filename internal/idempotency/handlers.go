package idempotency

import (
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/takeout/takeout/internal/web"
)

func pathKey(r *http.Request) (int64, string, error) {
	userID, err := ParseUserID(chi.URLParam(r, "user_id"))
	if err != nil {
		return 0, "", err
	}
	key, err := url.PathUnescape(chi.URLParam(r, "key"))
	if err != nil {
		return 0, "", ErrNoRecord
	}
	key, err = ParseKey(key)
	if err != nil {
		return 0, "", err
	}
	return userID, key, nil
}

// HandleInspect serves GET /admin/v1/idempotency-keys/{user_id}/{key}.
func HandleInspect(s *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, key, err := pathKey(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		in, err := s.Inspect(r.Context(), userID, key)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, in)
	})
}

// HandlePurge serves DELETE /admin/v1/idempotency-keys/{user_id}/{key}.
func HandlePurge(s *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, key, err := pathKey(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		if err := s.Purge(r.Context(), userID, key); err != nil {
			web.Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
