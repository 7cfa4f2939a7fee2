package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/httprate"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// rateLimited answers a limited request; httprate has set Retry-After.
func rateLimited(w http.ResponseWriter, r *http.Request) {
	web.WriteProblem(w, r, problem.New(problem.RateLimited, "too many requests; retry after %s seconds", w.Header().Get("Retry-After")))
}

// limitByIP allows perMinute requests a minute from one client address
// (per instance); 0 disables it. header, when set, is where a trusted load
// balancer puts the client's address.
func limitByIP(perMinute int, header string) func(http.Handler) http.Handler {
	if perMinute <= 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	return httprate.LimitBy(perMinute, time.Minute, func(r *http.Request) (string, error) {
		return "ip:" + web.ClientIP(r, header), nil
	}, httprate.WithLimitHandler(rateLimited))
}

// limitByUser allows perMinute requests a minute from one logged-in user
// (per instance); it runs after auth.RequireUser. 0 disables it.
func limitByUser(perMinute int) func(http.Handler) http.Handler {
	if perMinute <= 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	return httprate.LimitBy(perMinute, time.Minute, func(r *http.Request) (string, error) {
		id, _ := auth.UserID(r.Context())
		return "user:" + strconv.FormatInt(id, 10), nil
	}, httprate.WithLimitHandler(rateLimited))
}
