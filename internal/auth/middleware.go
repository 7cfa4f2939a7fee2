package auth

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

type ctxKey int

const (
	userKey ctxKey = iota
	staffKey
)

// UserID returns the authenticated user of ctx (set by RequireUser).
func UserID(ctx context.Context) (int64, bool) {
	if id, ok := ctx.Value(userKey).(int64); ok {
		return id, true
	}
	u, ok := web.Principal(ctx).(user)
	return int64(u), ok
}

// user is the principal RequireUser records in the request's scope.
type user int64

// StaffFrom returns the authenticated staff member of ctx (set by
// RequireStaff).
func StaffFrom(ctx context.Context) (Staff, bool) {
	s, ok := ctx.Value(staffKey).(Staff)
	return s, ok
}

// WithUser returns ctx carrying an authenticated user id.
func WithUser(ctx context.Context, userID int64) context.Context {
	return context.WithValue(ctx, userKey, userID)
}

// RequireUser lets a request through only with a valid user session token.
func RequireUser(tokens *Tokens) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, err := bearer(r)
			if err != nil {
				web.Error(w, r, err)
				return
			}
			id, err := tokens.VerifyUser(tok)
			if err != nil {
				web.Error(w, r, problem.Wrap(problem.Unauthorized, err, "the session token is invalid or expired: log in again"))
				return
			}
			if !web.SetPrincipal(r.Context(), user(id)) {
				r = r.WithContext(WithUser(r.Context(), id))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// RequireStaff lets a request through only with a valid staff token.
func RequireStaff(tokens *Tokens) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, err := bearer(r)
			if err != nil {
				web.Error(w, r, err)
				return
			}
			s, err := tokens.VerifyStaff(tok)
			if err != nil {
				web.Error(w, r, problem.Wrap(problem.Unauthorized, err, "the staff token is invalid or expired"))
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), staffKey, s)))
		})
	}
}

// RequireAdmin lets through only staff with the admin role; it runs after
// RequireStaff.
func RequireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := StaffFrom(r.Context())
		if !ok || !s.Role.Admin {
			web.Error(w, r, ErrAdminOnly)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ErrAdminOnly is returned to staff without the admin role on admin-only
// routes.
var ErrAdminOnly = problem.New(problem.Forbidden, "only admins may do this")

// ErrOtherMerchant is returned to merchant staff acting on another
// merchant's data.
var ErrOtherMerchant = problem.New(problem.Forbidden, "your role does not cover this merchant")

var errNoBearer = problem.New(problem.Unauthorized, "send an Authorization: Bearer <token> header")

func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", errNoBearer
	}
	return strings.TrimSpace(tok), nil
}

// StaffScope names the staff member of r for Idempotency-Key records:
// keys of different staff members (or roles) never meet.
func StaffScope(r *http.Request) string {
	s, _ := StaffFrom(r.Context())
	return "staff:" + s.Role.String() + ":" + s.Subject
}

// UserScope names the customer of r for the Idempotency-Key records of
// routes other than submit (whose records are the user's own, by id):
// "user:<id>".
func UserScope(r *http.Request) string {
	id, _ := UserID(r.Context())
	return "user:" + strconv.FormatInt(id, 10)
}
