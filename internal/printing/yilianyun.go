package printing

import (
	"context"
	"crypto/md5" //nolint:gosec // G501: the provider's documented signature
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Yilianyun is the client of a Yilianyun-like open platform (易联云):
// form posts signed with md5(client_id + timestamp + client_secret), an
// access token from the client credentials, and an idempotency id: a
// ticket's origin_id repeated within two hours gets the earlier ticket's
// id back instead of a second paper. Its print callback is signed the
// same way over its push time.
type Yilianyun struct {
	Base         string
	ClientID     string
	ClientSecret string
	HTTP         *http.Client
	Now          func() time.Time

	mu    sync.Mutex
	token string
}

// YilianyunWindow is how long a repeated origin_id returns the earlier
// result.
const YilianyunWindow = 2 * time.Hour

// Name implements Provider.
func (*Yilianyun) Name() string { return "yilianyun" }

// IdempotencyWindow implements Provider.
func (*Yilianyun) IdempotencyWindow() time.Duration { return YilianyunWindow }

// YilianyunSign is the platform's signature of a request or a callback.
func YilianyunSign(clientID, timestamp, secret string) string {
	sum := md5.Sum([]byte(clientID + timestamp + secret)) //nolint:gosec // G401: the provider's documented signature
	return hex.EncodeToString(sum[:])
}

// ylyAnswer is every answer's envelope: error "0" is success.
type ylyAnswer struct {
	Error       string          `json:"error"`
	Description string          `json:"error_description"`
	Body        json.RawMessage `json:"body"`
}

// Yilianyun's error codes the client acts on.
const (
	ylyOK           = "0"
	ylyTokenInvalid = "18"
)

func (y *Yilianyun) post(ctx context.Context, path string, form url.Values) (ylyAnswer, error) {
	ts := strconv.FormatInt(y.Now().Unix(), 10)
	form.Set("client_id", y.ClientID)
	form.Set("timestamp", ts)
	form.Set("sign", YilianyunSign(y.ClientID, ts, y.ClientSecret))
	form.Set("id", rand.Text())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, y.Base+path, strings.NewReader(form.Encode()))
	if err != nil {
		return ylyAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := y.HTTP.Do(req)
	if err != nil {
		return ylyAnswer{}, classify(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return ylyAnswer{}, err
	}
	if unavailable(resp.StatusCode) {
		return ylyAnswer{}, &RefusedError{Code: "HTTP " + strconv.Itoa(resp.StatusCode), Message: "unavailable"}
	}
	if resp.StatusCode != http.StatusOK {
		return ylyAnswer{}, fmt.Errorf("yilianyun %s: HTTP %d", path, resp.StatusCode)
	}
	var a ylyAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return ylyAnswer{}, fmt.Errorf("yilianyun %s: %w", path, err)
	}
	return a, nil
}

// accessToken returns the cached token, fetching one when there is none.
func (y *Yilianyun) accessToken(ctx context.Context, renew bool) (string, error) {
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.token != "" && !renew {
		return y.token, nil
	}
	a, err := y.post(ctx, "/oauth/oauth", url.Values{"grant_type": {"client_credentials"}, "scope": {"all"}})
	if err != nil {
		return "", fmt.Errorf("access token: %w", err)
	}
	if a.Error != ylyOK {
		return "", &RefusedError{Code: a.Error, Message: a.Description}
	}
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(a.Body, &body); err != nil || body.AccessToken == "" {
		return "", fmt.Errorf("access token: malformed answer")
	}
	y.token = body.AccessToken
	return y.token, nil
}

// call posts an authorized request, renewing the token once when the
// platform says it is no longer valid (a refusal: nothing happened).
func (y *Yilianyun) call(ctx context.Context, path string, form url.Values) (json.RawMessage, error) {
	for renew := false; ; renew = true {
		token, err := y.accessToken(ctx, renew)
		if err != nil {
			return nil, err
		}
		form.Set("access_token", token)
		a, err := y.post(ctx, path, form)
		if err != nil {
			return nil, err
		}
		switch {
		case a.Error == ylyOK:
			return a.Body, nil
		case a.Error == ylyTokenInvalid && !renew:
			continue
		default:
			return nil, &RefusedError{Code: a.Error, Message: a.Description}
		}
	}
}

// Print implements Provider: origin_id is the ticket id.
func (y *Yilianyun) Print(ctx context.Context, device, ticketID, content string) (string, error) {
	body, err := y.call(ctx, "/print/index", url.Values{"machine_code": {device}, "content": {content}, "origin_id": {ticketID}})
	if err != nil {
		return "", err
	}
	var b struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.ID == "" {
		return "", fmt.Errorf("yilianyun print: malformed answer")
	}
	return b.ID, nil
}

// Query implements Provider.
func (y *Yilianyun) Query(ctx context.Context, device, ref string) (bool, error) {
	body, err := y.call(ctx, "/printer/getorderstatus", url.Values{"machine_code": {device}, "order_id": {ref}})
	if err != nil {
		return false, err
	}
	var b struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return false, fmt.Errorf("yilianyun order status: %w", err)
	}
	return b.Status == "1", nil
}

// yilianyunCallbackAge bounds how old a callback's push time may be: a
// replay of a captured callback is refused after it.
const yilianyunCallbackAge = 10 * time.Minute

// Callback implements Provider: a form with machine_code, order_id,
// origin_id, state (1: printed), push_time and sign.
func (y *Yilianyun) Callback(r *http.Request) (Callback, error) {
	if err := r.ParseForm(); err != nil {
		return Callback{}, fmt.Errorf("%w: %w", ErrBadCallback, err)
	}
	f := r.PostForm
	push := f.Get("push_time")
	want := YilianyunSign(y.ClientID, push, y.ClientSecret)
	if subtle.ConstantTimeCompare([]byte(want), []byte(strings.ToLower(f.Get("sign")))) != 1 {
		return Callback{}, fmt.Errorf("%w: signature", ErrBadCallback)
	}
	sec, err := strconv.ParseInt(push, 10, 64)
	at := time.Unix(sec, 0)
	if err != nil || y.Now().Sub(at).Abs() > yilianyunCallbackAge {
		return Callback{}, fmt.Errorf("%w: push_time %q", ErrBadCallback, push)
	}
	if f.Get("machine_code") == "" || f.Get("order_id") == "" {
		return Callback{}, fmt.Errorf("%w: fields", ErrBadCallback)
	}
	return Callback{Device: f.Get("machine_code"), Ref: f.Get("order_id"), TicketID: f.Get("origin_id"), Printed: f.Get("state") == "1", At: at}, nil
}

// Acknowledge implements Provider.
func (*Yilianyun) Acknowledge(w http.ResponseWriter, ok bool) {
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"data":"FAIL"}`)
		return
	}
	_, _ = io.WriteString(w, `{"data":"OK"}`)
}
