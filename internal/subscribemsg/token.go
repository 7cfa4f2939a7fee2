package subscribemsg

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/takeout/takeout/internal/redisconn"
)

// AccessTokens hands out the mini-program's access token from WeChat's
// stable_token endpoint, cached in Redis for every instance. One instance
// at a time (a Redis lock) fetches a new one: before the cached one
// expires, and when WeChat called it invalid (40001), in which case the
// plain mode is asked first (another instance may have replaced it) and
// a forced refresh only when WeChat still hands out the refused token.
// Without Redis each instance fetches and keeps its own.
type AccessTokens struct {
	base, appID, secret string
	http                *http.Client
	rds                 *redisconn.Conn
	logger              *slog.Logger
	now                 func() time.Time
	// margin before expiry at which the token is replaced.
	margin time.Duration

	memo  atomic.Pointer[accessToken]
	local sync.Mutex // serializes fetches without Redis
}

type accessToken struct {
	value   string
	expires time.Time
	read    time.Time // when this instance read it
}

// memoFor is how long an instance uses a token it read without looking
// at the shared one again (a refresh elsewhere shows up within it).
const memoFor = 30 * time.Second

// NewAccessTokens returns the token source of appID at base.
func NewAccessTokens(base, appID, secret string, hc *http.Client, rds *redisconn.Conn, logger *slog.Logger, now func() time.Time) *AccessTokens {
	return &AccessTokens{base: strings.TrimRight(base, "/"), appID: appID, secret: secret, http: hc, rds: rds, logger: logger, now: now, margin: 5 * time.Minute}
}

// Token returns a valid access token.
func (t *AccessTokens) Token(ctx context.Context) (string, error) {
	now := t.now()
	if m := t.memo.Load(); m != nil && now.Sub(m.read) < memoFor && now.Before(m.expires.Add(-t.margin)) {
		return m.value, nil
	}
	return t.get(ctx, "")
}

// Refresh returns a token other than bad, which WeChat refused.
func (t *AccessTokens) Refresh(ctx context.Context, bad string) (string, error) {
	return t.get(ctx, bad)
}

func (t *AccessTokens) key() string { return t.rds.Key("wechat:access-token") }

// get returns the shared token unless it is bad or near expiry, else
// replaces it (one instance) or waits for it to be replaced (the others).
func (t *AccessTokens) get(ctx context.Context, bad string) (string, error) {
	if t.rds.Client == nil {
		return t.fetchLocally(ctx, bad)
	}
	deadline := t.now().Add(10 * time.Second)
	for {
		cur, err := t.shared(ctx)
		if err != nil {
			t.logger.WarnContext(ctx, "shared access token unavailable; fetching one for this instance", "err", err)
			return t.fetchLocally(ctx, bad)
		}
		now := t.now()
		if cur != nil && cur.value != bad && now.Before(cur.expires.Add(-t.margin)) {
			t.memo.Store(cur)
			return cur.value, nil
		}
		unlock, ok, err := t.lock(ctx)
		if err != nil {
			return t.fetchLocally(ctx, bad)
		}
		if ok {
			tok, err := t.replace(ctx, bad)
			unlock()
			return tok, err
		}
		// Someone else is replacing it: a token still valid serves
		// meanwhile, else wait for theirs.
		if cur != nil && cur.value != bad && now.Before(cur.expires) {
			return cur.value, nil
		}
		if now.After(deadline) {
			return "", errors.New("access token: timed out waiting for another instance's refresh")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// replace runs under the lock: look again (the holder before us may have
// replaced it), else fetch and share a new token.
func (t *AccessTokens) replace(ctx context.Context, bad string) (string, error) {
	cur, err := t.shared(ctx)
	if err != nil {
		return "", err
	}
	now := t.now()
	if cur != nil && cur.value != bad && now.Before(cur.expires.Add(-t.margin)) {
		t.memo.Store(cur)
		return cur.value, nil
	}
	// Near expiry only a forced refresh gives a new token; refused, the
	// plain mode is tried first.
	force := cur != nil && cur.value != bad
	tok, err := t.fetch(ctx, force)
	if err == nil && tok.value == bad {
		tok, err = t.fetch(ctx, true)
	}
	if err != nil {
		return "", err
	}
	ttl := tok.expires.Sub(now)
	val := strconv.FormatInt(tok.expires.UnixMilli(), 10) + ":" + tok.value
	if err := t.rds.Client.Set(ctx, t.key(), val, ttl).Err(); err != nil {
		t.logger.WarnContext(ctx, "share access token", "err", err)
	}
	t.memo.Store(tok)
	return tok.value, nil
}

func (t *AccessTokens) shared(ctx context.Context) (*accessToken, error) {
	v, err := t.rds.Client.Get(ctx, t.key()).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ms, tok, ok := strings.Cut(v, ":")
	exp, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || tok == "" {
		//nolint:nilerr // an unreadable entry is as good as none: it is replaced
		return nil, nil
	}
	return &accessToken{value: tok, expires: time.UnixMilli(exp), read: t.now()}, nil
}

// unlockScript deletes the lock only if it is still ours.
var unlockScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func (t *AccessTokens) lock(ctx context.Context) (func(), bool, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	owner := hex.EncodeToString(b[:])
	key := t.key() + ":lock"
	ok, err := t.rds.Client.SetNX(ctx, key, owner, 15*time.Second).Result()
	if err != nil || !ok {
		return nil, false, err
	}
	return func() { _ = unlockScript.Run(context.WithoutCancel(ctx), t.rds.Client, []string{key}, owner).Err() }, true, nil
}

func (t *AccessTokens) fetchLocally(ctx context.Context, bad string) (string, error) {
	t.local.Lock()
	defer t.local.Unlock()
	if m := t.memo.Load(); m != nil && m.value != bad && t.now().Before(m.expires.Add(-t.margin)) {
		return m.value, nil
	}
	tok, err := t.fetch(ctx, false)
	if err == nil && (tok.value == bad || !t.now().Before(tok.expires.Add(-t.margin))) {
		tok, err = t.fetch(ctx, true)
	}
	if err != nil {
		return "", err
	}
	t.memo.Store(tok)
	return tok.value, nil
}

// fetch calls stable_token.
func (t *AccessTokens) fetch(ctx context.Context, force bool) (*accessToken, error) {
	body, _ := json.Marshal(map[string]any{"grant_type": "client_credential", "appid": t.appID, "secret": t.secret, "force_refresh": force})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/cgi-bin/stable_token", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("stable_token: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("stable_token: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("stable_token: HTTP %d", resp.StatusCode)
	}
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		ErrCode     int    `json:"errcode"`
		ErrMsg      string `json:"errmsg"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("stable_token: %w", err)
	}
	if out.ErrCode != 0 || out.AccessToken == "" || out.ExpiresIn <= 0 {
		return nil, fmt.Errorf("stable_token: errcode %d: %s", out.ErrCode, out.ErrMsg)
	}
	now := t.now()
	t.logger.InfoContext(ctx, "fetched WeChat access token", "force_refresh", force, "expires_in", out.ExpiresIn)
	return &accessToken{value: out.AccessToken, expires: now.Add(time.Duration(out.ExpiresIn) * time.Second), read: now}, nil
}
