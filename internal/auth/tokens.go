// Package auth authenticates takeout's callers: customers log in through
// WeChat (jscode2session) and get a signed session token; operators and
// merchant staff carry staff tokens with a role (admin or merchant:ID).
// User and staff tokens are signed with different keys and audiences, so
// one can never pass for the other.
package auth

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/maypok86/otter/v2"
)

const (
	issuer        = "takeout"
	audienceUser  = "takeout-user"
	audienceStaff = "takeout-staff"
)

// ErrInvalidToken is any token that does not verify: forged, tampered,
// expired, of the wrong kind or malformed.
var ErrInvalidToken = errors.New("invalid token")

// Tokens issues and verifies user session tokens and staff tokens.
type Tokens struct {
	userKey    []byte
	staffKey   []byte
	sessionTTL time.Duration
	now        func() time.Time
	// sessions remembers session tokens already verified (the exact
	// string) with their user and expiry: a client sends the same token
	// with every request, and decoding and checking it again cost a fifth
	// of a cheap request's CPU.
	sessions *otter.Cache[string, verifiedSession]
	// revoked, when set (CheckRevocations), reports a revoked token id.
	revoked func(id string) bool
}

type verifiedSession struct {
	userID  int64
	id      string
	expires time.Time
}

// CheckRevocations makes verification refuse the tokens r holds revoked
// (wired once, before serving).
func (t *Tokens) CheckRevocations(r *Revocations) { t.revoked = r.Revoked }

func (t *Tokens) isRevoked(id string) bool { return t.revoked != nil && t.revoked(id) }

// errRevoked is a token that verifies but was revoked.
var errRevoked = fmt.Errorf("%w: revoked", ErrInvalidToken)

// TokenInfo is what a token says of itself, for revoking it.
type TokenInfo struct {
	ID        string
	Kind      string // user or staff
	Subject   string
	ExpiresAt time.Time
}

// Inspect verifies a user or staff token (revoked or not) and returns
// what a revocation needs of it.
func (t *Tokens) Inspect(token string) (TokenInfo, error) {
	for _, k := range []struct {
		key            []byte
		audience, kind string
	}{{t.userKey, audienceUser, "user"}, {t.staffKey, audienceStaff, "staff"}} {
		if c, err := t.verify(k.key, k.audience, token); err == nil {
			return TokenInfo{ID: tokenID(c, token), Kind: k.kind, Subject: c.Subject, ExpiresAt: c.ExpiresAt.Time}, nil
		}
	}
	return TokenInfo{}, ErrInvalidToken
}

// tokenID is a token's id: its jti, or for a token issued before tokens
// had one, a digest of it.
func tokenID(c claims, raw string) string {
	if c.ID != "" {
		return c.ID
	}
	return legacyTokenID(raw)
}

// sessionMemory is how long, at most, a verified session token is
// remembered; its own expiry is checked on every use.
const sessionMemory = 10 * time.Minute

// NewTokens returns a Tokens signing user sessions with userKey and staff
// tokens with staffKey. now is the clock (time.Now outside tests).
func NewTokens(userKey, staffKey []byte, sessionTTL time.Duration, now func() time.Time) *Tokens {
	sessions, err := otter.New(&otter.Options[string, verifiedSession]{
		MaximumSize:      100_000,
		ExpiryCalculator: otter.ExpiryWriting[string, verifiedSession](sessionMemory),
	})
	if err != nil {
		panic(fmt.Sprintf("auth: session cache: %v", err)) // constant options: cannot happen
	}
	return &Tokens{userKey: userKey, staffKey: staffKey, sessionTTL: sessionTTL, now: now, sessions: sessions}
}

// IssueUser returns a session token for userID and when it expires.
func (t *Tokens) IssueUser(userID int64) (string, time.Time, error) {
	tok, _, exp, err := t.sign(t.userKey, audienceUser, strconv.FormatInt(userID, 10), "", t.sessionTTL)
	return tok, exp, err
}

// VerifyUser returns the user id a session token was issued to.
func (t *Tokens) VerifyUser(token string) (int64, error) {
	if v, ok := t.sessions.GetIfPresent(token); ok {
		if t.isRevoked(v.id) {
			return 0, errRevoked
		}
		if t.now().Before(v.expires) {
			return v.userID, nil
		}
		t.sessions.Invalidate(token)
	}
	c, err := t.verify(t.userKey, audienceUser, token)
	if err != nil {
		return 0, err
	}
	jti := tokenID(c, token)
	if t.isRevoked(jti) {
		return 0, errRevoked
	}
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 {
		return 0, ErrInvalidToken
	}
	if c.ExpiresAt != nil {
		t.sessions.Set(token, verifiedSession{userID: id, id: jti, expires: c.ExpiresAt.Time})
	}
	return id, nil
}

// MaxStaffTTL is the longest a staff token may live.
const MaxStaffTTL = 90 * 24 * time.Hour

// IssueStaff returns a staff token for subject (a person's name, for logs)
// with role, valid for ttl.
func (t *Tokens) IssueStaff(subject string, role Role, ttl time.Duration) (string, time.Time, error) {
	tok, _, exp, err := t.IssueStaffWithID(subject, role, ttl)
	return tok, exp, err
}

// IssueStaffWithID is IssueStaff that also returns the token's id (what
// a revocation names).
func (t *Tokens) IssueStaffWithID(subject string, role Role, ttl time.Duration) (token, id string, expires time.Time, err error) {
	if subject == "" {
		return "", "", time.Time{}, errors.New("staff token: subject required")
	}
	return t.sign(t.staffKey, audienceStaff, subject, role.String(), ttl)
}

// VerifyStaff returns the staff member a staff token was issued to.
func (t *Tokens) VerifyStaff(token string) (Staff, error) {
	c, err := t.verify(t.staffKey, audienceStaff, token)
	if err != nil {
		return Staff{}, err
	}
	id := tokenID(c, token)
	if t.isRevoked(id) {
		return Staff{}, errRevoked
	}
	role, err := ParseRole(c.Role)
	if err != nil {
		return Staff{}, ErrInvalidToken
	}
	st := Staff{Subject: c.Subject, Role: role, TokenID: id}
	if c.ExpiresAt != nil {
		st.ExpiresAt = c.ExpiresAt.Time
	}
	return st, nil
}

type claims struct {
	Role string `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// sign returns a signed token, its id and when it expires.
func (t *Tokens) sign(key []byte, audience, subject, role string, ttl time.Duration) (string, string, time.Time, error) {
	now := t.now().UTC().Truncate(time.Second)
	exp := now.Add(ttl)
	id := newTokenID()
	c := claims{
		Role: role,
		RegisteredClaims: jwt.RegisteredClaims{
			ID:        id,
			Issuer:    issuer,
			Subject:   subject,
			Audience:  jwt.ClaimStrings{audience},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	return s, id, exp, nil
}

func (t *Tokens) verify(key []byte, audience, token string) (claims, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c,
		func(*jwt.Token) (any, error) { return key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithAudience(audience),
		jwt.WithIssuer(issuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(t.now),
	)
	if err != nil {
		return claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return c, nil
}

// Role is what a staff member may do: everything (admin) or act for one
// merchant.
type Role struct {
	Admin      bool
	MerchantID int64
}

// ParseRole parses "admin" or "merchant:ID".
func ParseRole(s string) (Role, error) {
	if s == "admin" {
		return Role{Admin: true}, nil
	}
	if rest, ok := strings.CutPrefix(s, "merchant:"); ok {
		id, err := strconv.ParseInt(rest, 10, 64)
		if err == nil && id > 0 {
			return Role{MerchantID: id}, nil
		}
	}
	return Role{}, fmt.Errorf("role: want admin or merchant:ID, got %q", s)
}

// String renders the role as ParseRole reads it.
func (r Role) String() string {
	if r.Admin {
		return "admin"
	}
	return "merchant:" + strconv.FormatInt(r.MerchantID, 10)
}

// Staff is an authenticated operator or merchant staff member.
type Staff struct {
	Subject string
	Role    Role
	// TokenID and ExpiresAt are the token's id (what a revocation names)
	// and end: what ends a long request made with it, such as an order
	// stream, when the token stops being valid.
	TokenID   string
	ExpiresAt time.Time
}

// CanManage reports whether the staff member may act on merchantID.
func (s Staff) CanManage(merchantID int64) bool {
	return s.Role.Admin || s.Role.MerchantID == merchantID
}
