package auth

import (
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// LoginRequest is the body of POST /v1/auth/wx-login.
type LoginRequest struct {
	Code string `json:"code"`
}

// Validate checks the login code's shape.
func (r *LoginRequest) Validate() error {
	if r.Code == "" {
		return problem.Field("code", "required: the code from wx.login()")
	}
	if utf8.RuneCountInString(r.Code) > 128 {
		return problem.Field("code", "at most 128 characters")
	}
	return nil
}

// LoginResponse is the answer to a successful login.
type LoginResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	UserID    string    `json:"user_id"`
}

// HandleLogin serves POST /v1/auth/wx-login: exchange the mini-program's
// login code for the openid, upsert the user and issue a session token.
func HandleLogin(pool *pgxpool.Pool, wx *WeChat, tokens *Tokens) http.Handler {
	q := dbsqlc.New()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[LoginRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		sess, err := wx.Code2Session(r.Context(), req.Code)
		switch {
		case errors.Is(err, ErrCodeRejected):
			web.Error(w, r, problem.Wrap(problem.LoginFailed, err, "WeChat rejected the login code: call wx.login() again"))
			return
		case err != nil:
			web.Error(w, r, problem.Wrap(problem.UpstreamUnavailable, err, "WeChat login is unavailable, try again shortly"))
			return
		}
		user, err := q.UserUpsertByOpenID(r.Context(), pool, sess.OpenID)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		tok, exp, err := tokens.IssueUser(user.ID)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, LoginResponse{Token: tok, ExpiresAt: exp, UserID: strconv.FormatInt(user.ID, 10)})
	})
}
