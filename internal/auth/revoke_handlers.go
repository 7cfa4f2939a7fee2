package auth

import (
	"net/http"
	"time"

	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/web"
)

// HandleLogout serves POST /v1/auth/logout and POST /admin/v1/auth/logout:
// the caller's own token (a user session or a staff token) is revoked on
// every instance (204). It runs after RequireUser or RequireStaff.
func HandleLogout(tokens *Tokens, rev *Revocations) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := bearer(r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		info, err := tokens.Inspect(tok)
		if err != nil {
			web.Error(w, r, problem.Wrap(problem.Unauthorized, err, "the session token is invalid or expired"))
			return
		}
		if err := rev.Revoke(r.Context(), Revocation{TokenID: info.ID, Kind: info.Kind, Subject: info.Subject, ExpiresAt: info.ExpiresAt, By: info.Kind + ":" + info.Subject}); err != nil {
			web.Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// RevokeRequest is the body of POST /admin/v1/tokens/revoke: the token
// itself, or its id (as `api token` printed it).
type RevokeRequest struct {
	Token   *string `json:"token"`
	TokenID *string `json:"token_id"`
}

// Validate checks that exactly one of the two is given, and not empty.
func (r *RevokeRequest) Validate() error {
	if (r.Token == nil) == (r.TokenID == nil) {
		return problem.New(problem.InvalidRequest, "send token or token_id, not both")
	}
	if r.Token != nil && *r.Token == "" {
		return problem.Field("token", "must not be empty")
	}
	if r.TokenID != nil && (*r.TokenID == "" || len(*r.TokenID) > 128) {
		return problem.Field("token_id", "1 to 128 characters")
	}
	return nil
}

// Revoked is the answer of a revocation.
type Revoked struct {
	TokenID   string    `json:"token_id"`
	Kind      string    `json:"kind"`
	Subject   string    `json:"subject"`
	ExpiresAt time.Time `json:"expires_at"`
}

// HandleRevoke serves POST /admin/v1/tokens/revoke (admins): a user
// session or a staff token stops working on every instance at once
// (within the reload interval where Redis is down). Revoking twice is
// harmless.
func HandleRevoke(tokens *Tokens, rev *Revocations) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[RevokeRequest](r)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		staff, _ := StaffFrom(r.Context())
		var token, tokenID string
		if req.Token != nil {
			token = *req.Token
		}
		if req.TokenID != nil {
			tokenID = *req.TokenID
		}
		rv, err := tokens.RevocationOf(token, tokenID)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		rv.By = "admin:" + staff.Subject
		if err := rev.Revoke(r.Context(), rv); err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, Revoked{TokenID: rv.TokenID, Kind: rv.Kind, Subject: rv.Subject, ExpiresAt: rv.ExpiresAt.UTC()})
	})
}

// RevocationOf is the revocation of a token given as itself (verified:
// a forged one is refused) or by id (kept as long as the longest-lived
// token could live).
func (t *Tokens) RevocationOf(token, id string) (Revocation, error) {
	if token != "" {
		info, err := t.Inspect(token)
		if err != nil {
			return Revocation{}, problem.Field("token", "not a token this service issued, or already expired")
		}
		return Revocation{TokenID: info.ID, Kind: info.Kind, Subject: info.Subject, ExpiresAt: info.ExpiresAt}, nil
	}
	return Revocation{TokenID: id, Kind: "unknown", ExpiresAt: t.now().Add(MaxStaffTTL)}, nil
}
