// Package staff is merchant staff accounts: an admin creates a login for
// a merchant's staff member, who logs in with username and password
// (argon2id) and gets a staff token for that merchant (role merchant:ID),
// revocable like any token. Logins are rate limited per account and per
// address, and a wrong password, an unknown user and a disabled account
// get the same answer after the same work.
package staff

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/redisconn"
)

// Options configure a Service.
type Options struct {
	Pool        *pgxpool.Pool
	Redis       *redisconn.Conn
	Tokens      *auth.Tokens
	Revocations *auth.Revocations
	Logger      *slog.Logger
	// TokenTTL is how long a login's staff token lives.
	TokenTTL time.Duration
	// AccountLimit is how many logins an account may be tried per
	// AccountWindow without one succeeding; AddressLimit how many attempts one address makes a
	// minute. 0 turns a limit off.
	AccountLimit  int
	AccountWindow time.Duration
	AddressLimit  int
	// Hashing bounds the password hashes computed at once (each takes
	// 19 MiB for a few tens of milliseconds).
	Hashing int
	// RequestKey keys the HMAC that stands for a new account's password
	// in its create's idempotency records (see passwordIdentity): the
	// same on every instance, secret like the staff token key.
	RequestKey []byte
	Now        func() time.Time
}

// Service manages staff accounts and logs staff in.
type Service struct {
	opts     Options
	q        *dbsqlc.Queries
	attempts *attempts
	hashing  chan struct{}
	// decoy is checked for unknown users, so they cost what a real one
	// does and answer in the same time.
	decoy string
}

// NewService returns a Service.
func NewService(o Options) (*Service, error) {
	if o.Hashing <= 0 {
		o.Hashing = 4
	}
	if o.AccountWindow <= 0 {
		o.AccountWindow = 15 * time.Minute
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	decoy, err := hashPassword(hex.EncodeToString(b[:]))
	if err != nil {
		return nil, err
	}
	return &Service{opts: o, q: dbsqlc.New(), attempts: newAttempts(o.Redis, o.Now), hashing: make(chan struct{}, o.Hashing), decoy: decoy}, nil
}

// Account is a staff login, without its password.
type Account struct {
	ID         string     `json:"id"`
	MerchantID string     `json:"merchant_id"`
	Username   string     `json:"username"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	DisabledAt *time.Time `json:"disabled_at"`
}

func account(id, merchantID int64, username, by string, created time.Time, disabled *time.Time) Account {
	a := Account{ID: strconv.FormatInt(id, 10), MerchantID: strconv.FormatInt(merchantID, 10), Username: username, CreatedBy: by, CreatedAt: created.UTC()}
	if disabled != nil {
		d := disabled.UTC()
		a.DisabledAt = &d
	}
	return a
}

// ErrUsernameTaken is a create with a username some account has.
var ErrUsernameTaken = problem.New(problem.AlreadyExists, "that username is taken")

// Create makes a login for merchantID's staff on q (the pool, or the
// transaction that records its answer).
func (s *Service) Create(ctx context.Context, q dbsqlc.DBTX, merchantID int64, username, password, by string) (Account, error) {
	hash, err := s.hash(ctx, password)
	if err != nil {
		return Account{}, err
	}
	row, err := s.q.StaffAccountCreate(ctx, q, dbsqlc.StaffAccountCreateParams{
		MerchantID: merchantID, Username: username, PasswordHash: hash, CreatedBy: by,
	})
	if c, ok := db.UniqueViolation(err); ok && c == "staff_accounts_username_key" {
		return Account{}, ErrUsernameTaken
	}
	if _, ok := db.ForeignKeyViolation(err); ok {
		return Account{}, problem.New(problem.NotFound, "no merchant %d", merchantID)
	}
	if err != nil {
		return Account{}, fmt.Errorf("create staff account: %w", err)
	}
	return account(row.ID, row.MerchantID, row.Username, row.CreatedBy, row.CreatedAt, row.DisabledAt), nil
}

// Begin starts a transaction on the accounts' pool: a create recorded
// under an Idempotency-Key runs in it with its record.
func (s *Service) Begin(ctx context.Context) (pgx.Tx, error) { return s.opts.Pool.Begin(ctx) }

// List returns merchantID's staff accounts.
func (s *Service) List(ctx context.Context, merchantID int64) ([]Account, error) {
	rows, err := s.q.StaffAccountsOfMerchant(ctx, s.opts.Pool, merchantID)
	if err != nil {
		return nil, fmt.Errorf("list staff accounts: %w", err)
	}
	out := make([]Account, 0, len(rows))
	for _, r := range rows {
		out = append(out, account(r.ID, r.MerchantID, r.Username, r.CreatedBy, r.CreatedAt, r.DisabledAt))
	}
	return out, nil
}

// Disable stops an account's logins and revokes the tokens its logins
// got, on every instance. Disabling twice changes nothing more.
func (s *Service) Disable(ctx context.Context, id int64, by string) (Account, error) {
	row, err := s.q.StaffAccountDisable(ctx, s.opts.Pool, id)
	if errors.Is(err, db.ErrNotFound) {
		return Account{}, problem.New(problem.NotFound, "no staff account %d", id)
	}
	if err != nil {
		return Account{}, fmt.Errorf("disable staff account: %w", err)
	}
	live, err := s.q.StaffSessionsLive(ctx, s.opts.Pool, id)
	if err != nil {
		return Account{}, fmt.Errorf("staff sessions: %w", err)
	}
	for _, t := range live {
		if err := s.opts.Revocations.Revoke(ctx, auth.Revocation{
			TokenID: t.TokenID, Kind: "staff", Subject: row.Username, ExpiresAt: t.ExpiresAt, By: by,
		}); err != nil {
			return Account{}, err
		}
	}
	return account(row.ID, row.MerchantID, row.Username, row.CreatedBy, row.CreatedAt, row.DisabledAt), nil
}

// Session is a successful login.
type Session struct {
	Token      string    `json:"token"`
	ExpiresAt  time.Time `json:"expires_at"`
	Role       string    `json:"role"`
	MerchantID string    `json:"merchant_id"`
	Username   string    `json:"username"`
}

// ErrLoginFailed is every failed login: unknown user, wrong password and
// disabled account alike.
var ErrLoginFailed = problem.New(problem.StaffLoginFailed, "wrong username or password")

// Login checks a username and password from address and issues a staff
// token for the account's merchant.
func (s *Service) Login(ctx context.Context, username, password, address string) (Session, error) {
	username = strings.ToLower(username)
	if err := s.limit(ctx, username, address); err != nil {
		return Session{}, err
	}
	acct, err := s.q.StaffAccountByUsername(ctx, s.opts.Pool, username)
	found := err == nil
	if err != nil && !errors.Is(err, db.ErrNotFound) {
		return Session{}, fmt.Errorf("find staff account: %w", err)
	}
	hash := s.decoy
	if found {
		hash = acct.PasswordHash
	}
	ok, err := s.check(ctx, hash, password)
	if err != nil {
		return Session{}, err
	}
	if !ok || !found || acct.DisabledAt != nil {
		return Session{}, ErrLoginFailed
	}
	role := auth.Role{MerchantID: acct.MerchantID}
	tok, tokenID, exp, err := s.opts.Tokens.IssueStaffWithID(acct.Username, role, s.opts.TokenTTL)
	if err != nil {
		return Session{}, err
	}
	// The account was read before the password was checked: a disable
	// may have come in between. The session is recorded only if it is
	// still enabled (see StaffSessionInsert), else the token is dropped.
	n, err := s.q.StaffSessionInsert(ctx, s.opts.Pool, dbsqlc.StaffSessionInsertParams{TokenID: tokenID, AccountID: acct.ID, ExpiresAt: exp})
	if err != nil {
		return Session{}, fmt.Errorf("record staff session: %w", err)
	}
	if n == 0 {
		return Session{}, ErrLoginFailed
	}
	// The attempts of an account count until one succeeds.
	s.attempts.reset(ctx, "login:account:"+username)
	return Session{Token: tok, ExpiresAt: exp.UTC(), Role: role.String(), MerchantID: strconv.FormatInt(acct.MerchantID, 10), Username: acct.Username}, nil
}

// limit refuses a login from an address that tried too often this minute,
// or for an account tried too often this window without success.
func (s *Service) limit(ctx context.Context, username, address string) error {
	if s.opts.AddressLimit > 0 {
		if n, left := s.attempts.count(ctx, "login:address:"+address, time.Minute, true); n > int64(s.opts.AddressLimit) {
			return tooMany(left, "too many login attempts from your address")
		}
	}
	// Counted before the password is checked, so concurrent guesses
	// cannot all pass the limit.
	if s.opts.AccountLimit > 0 {
		if n, left := s.attempts.count(ctx, "login:account:"+username, s.opts.AccountWindow, true); n > int64(s.opts.AccountLimit) {
			return tooMany(left, "too many failed logins for this account")
		}
	}
	return nil
}

func tooMany(left time.Duration, detail string) error {
	secs := max(int64((left+time.Second-1)/time.Second), 1)
	return problem.New(problem.RateLimited, "%s; retry after %d seconds", detail, secs).With("retry_after", secs)
}

// hash and check run argon2id under the concurrency bound.
func (s *Service) hash(ctx context.Context, password string) (string, error) {
	if err := s.acquire(ctx); err != nil {
		return "", err
	}
	defer func() { <-s.hashing }()
	return hashPassword(password)
}

func (s *Service) check(ctx context.Context, hash, password string) (bool, error) {
	if err := s.acquire(ctx); err != nil {
		return false, err
	}
	defer func() { <-s.hashing }()
	ok, err := checkPassword(hash, password)
	if err != nil {
		return false, fmt.Errorf("check password: %w", err)
	}
	return ok, nil
}

func (s *Service) acquire(ctx context.Context) error {
	select {
	case s.hashing <- struct{}{}:
		return nil
	case <-ctx.Done():
		// More logins at once than password checks can serve within the
		// request's deadline: a retry, not a failure.
		return problem.Wrap(problem.Unavailable, ctx.Err(), "too many password checks at once; retry shortly")
	}
}

// PruneArgs is the periodic job that drops session records of long
// expired staff tokens.
type PruneArgs struct{}

// Kind names the job.
func (PruneArgs) Kind() string { return "staff.prune_sessions" }

// PruneWorker runs PruneArgs.
type PruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	S *Service
}

// Work prunes.
func (w *PruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error {
	_, err := w.S.q.StaffSessionsPrune(ctx, w.S.opts.Pool)
	return err
}
