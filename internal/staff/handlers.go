package staff

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/idempotency"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// LoginRequest is the body of POST /admin/v1/auth/login.
type LoginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Validate checks the shape only: anything well formed is checked
// against the accounts, so a malformed name says nothing about them.
func (r *LoginRequest) Validate() error {
	if r.Username == "" || utf8.RuneCountInString(r.Username) > 64 {
		return problem.Field("username", "required, at most 64 characters")
	}
	if r.Password == "" || len(r.Password) > maxPassword {
		return problem.Field("password", "required, at most %d bytes", maxPassword)
	}
	return nil
}

// HandleLogin serves POST /admin/v1/auth/login. clientIPHeader names the
// header a trusted load balancer puts the client's address in ("" for the
// connection's peer).
func HandleLogin(s *Service, clientIPHeader string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[LoginRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		sess, err := s.Login(r.Context(), req.Username, req.Password, web.ClientIP(r, clientIPHeader))
		if err != nil {
			var p *problem.Error
			if errors.As(err, &p) && p.Type == problem.RateLimited {
				if secs, ok := p.Extra["retry_after"].(int64); ok {
					w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
				}
			}
			web.Error(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		web.JSON(w, http.StatusOK, sess)
	})
}

// CreateRequest is the body of POST /admin/v1/merchants/{id}/staff.
type CreateRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

const (
	minPassword = 10
	maxPassword = 128
)

var usernamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{2,63}$`)

// Validate checks the username and the password's length.
func (r *CreateRequest) Validate() error {
	if !usernamePattern.MatchString(r.Username) {
		return problem.Field("username", "3 to 64 characters: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit")
	}
	if n := utf8.RuneCountInString(r.Password); n < minPassword || len(r.Password) > maxPassword {
		return problem.Field("password", "at least %d characters and at most %d bytes", minPassword, maxPassword)
	}
	return nil
}

func pathID(r *http.Request, what string) (int64, error) {
	return web.PathID(r, problem.New(problem.NotFound, "no %s %q", what, r.PathValue("id")))
}

// HandleCreate serves POST /admin/v1/merchants/{id}/staff (admins),
// once per Idempotency-Key: a retry gets the account it created. The
// key's records keep the password only as a keyed hash (passwordIdentity).
func HandleCreate(s *Service, idem *idempotency.Store) http.Handler {
	return idempotency.CreatingWith(idem, s, idempotency.CreateOptions{Scope: auth.StaffScope, Identity: s.passwordIdentity},
		func(ctx context.Context, tx pgx.Tx, r *http.Request) (idempotency.Created, error) {
			merchantID, err := pathID(r, "merchant")
			if err != nil {
				return idempotency.Created{}, err
			}
			req, err := web.Decode[CreateRequest](r)
			if err != nil {
				return idempotency.Created{}, err
			}
			st, _ := auth.StaffFrom(ctx)
			a, err := s.Create(ctx, tx, merchantID, req.Username, req.Password, "admin:"+st.Subject)
			if err != nil {
				return idempotency.Created{}, err
			}
			return idempotency.JSONCreated(http.StatusCreated, a)
		})
}

// passwordIdentity is what a staff create's idempotency records keep of
// its body: an HMAC of it, never the password or a hash of it that could
// be tried against a dictionary. The same bytes are the same request, as
// for any other create.
func (s *Service) passwordIdentity(body []byte) ([]byte, error) {
	mac := hmac.New(sha256.New, s.opts.RequestKey)
	mac.Write(body)
	return []byte(hex.EncodeToString(mac.Sum(nil))), nil
}

// HandleList serves GET /admin/v1/merchants/{id}/staff (admins and the
// merchant's staff).
func HandleList(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		merchantID, err := pathID(r, "merchant")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		if st, _ := auth.StaffFrom(r.Context()); !st.CanManage(merchantID) {
			web.Error(w, r, auth.ErrOtherMerchant)
			return
		}
		list, err := s.List(r.Context(), merchantID)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, map[string]any{"staff": list})
	})
}

// HandleDisable serves DELETE /admin/v1/staff/{id} (admins): the account
// can no longer log in and its tokens stop working.
func HandleDisable(s *Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "staff account")
		if err != nil {
			web.Error(w, r, err)
			return
		}
		st, _ := auth.StaffFrom(r.Context())
		a, err := s.Disable(r.Context(), id, "admin:"+st.Subject)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, a)
	})
}

// RequestKeyFrom derives Options.RequestKey from the staff token secret,
// so that no key of its own needs configuring and the two never coincide.
func RequestKeyFrom(staffSecret []byte) []byte {
	mac := hmac.New(sha256.New, staffSecret)
	mac.Write([]byte("takeout staff create request identity"))
	return mac.Sum(nil)
}
