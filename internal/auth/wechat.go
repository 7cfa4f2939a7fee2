package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/takeout/takeout/internal/web"
)

// WeChat calls the mini-program login endpoint jscode2session.
type WeChat struct {
	base      string
	appID     string
	appSecret string
	client    *http.Client
}

// NewWeChat returns a client for the WeChat API at base (wxsim in dev).
func NewWeChat(base, appID, appSecret string, client *http.Client) *WeChat {
	return &WeChat{base: strings.TrimRight(base, "/"), appID: appID, appSecret: appSecret, client: client}
}

// ErrCodeRejected means WeChat refused the login code: invalid, used or
// expired. The user has to log in again in the mini-program.
var ErrCodeRejected = errors.New("login code rejected")

// Session is what jscode2session tells about a login code. The session_key
// is deliberately not kept: takeout decrypts no user data with it.
type Session struct {
	OpenID  string
	UnionID string
}

// Code2Session exchanges a login code for the user's openid.
func (w *WeChat) Code2Session(ctx context.Context, code string) (Session, error) {
	q := url.Values{
		"appid":      {w.appID},
		"secret":     {w.appSecret},
		"js_code":    {code},
		"grant_type": {"authorization_code"},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.base+"/sns/jscode2session?"+q.Encode(), nil)
	if err != nil {
		return Session{}, fmt.Errorf("jscode2session: %w", err)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		// The URL holds the app secret: never let it reach a log.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return Session{}, fmt.Errorf("jscode2session: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Session{}, fmt.Errorf("jscode2session: HTTP %d", resp.StatusCode)
	}
	var body struct {
		OpenID  string `json:"openid"`
		UnionID string `json:"unionid"`
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body); err != nil {
		return Session{}, fmt.Errorf("jscode2session: decode: %w", err)
	}
	switch body.ErrCode {
	case 0:
	case 40029, 40163, 40226: // invalid code, code used, high-risk user
		return Session{}, fmt.Errorf("%w: errcode %d: %s", ErrCodeRejected, body.ErrCode, body.ErrMsg)
	default:
		return Session{}, fmt.Errorf("jscode2session: errcode %d: %s", body.ErrCode, body.ErrMsg)
	}
	if body.OpenID == "" || len(body.OpenID) > 128 || web.CheckText("openid", body.OpenID, false) != nil {
		return Session{}, errors.New("jscode2session: answer without a valid openid")
	}
	return Session{OpenID: body.OpenID, UnionID: body.UnionID}, nil
}
