// Package wxsim plays the WeChat side of takeout for development and
// tests: the mini-program login, jscode2session (any code X logs in as
// openid "sim-X", so tests name their users), the access token
// (stable_token) and subscribe messages (messages.go), and, with WithPayments,
// WeChat Pay v3's JSAPI prepay, query, close and refunds, with payment and
// refund notifications signed and encrypted as the platform does, and
// knobs for duplicates, delays, reordering and failures (/sim/config).
package wxsim

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// Server is the simulator's HTTP handler.
type Server struct {
	appID     string
	appSecret string
	mux       *http.ServeMux
	msgs      *messages
}

// New returns a simulator that accepts the given app id and secret.
func New(appID, appSecret string) *Server {
	s := &Server{appID: appID, appSecret: appSecret, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /sns/jscode2session", s.jscode2session)
	s.withMessages()
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]string{"status": "ok"})
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Error codes as the real API documents them.
const (
	errInvalidAppID  = 40013
	errInvalidCode   = 40029
	errInvalidSecret = 40125
)

// RejectedCode is the one code the simulator refuses (errcode 40029), so
// that clients can exercise the failed-login path.
const RejectedCode = "invalid"

// jscode2session answers like WeChat: HTTP 200 with either the session or
// an errcode.
func (s *Server) jscode2session(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case q.Get("appid") != s.appID:
		writeJSON(w, map[string]any{"errcode": errInvalidAppID, "errmsg": "invalid appid"})
	case subtle.ConstantTimeCompare([]byte(q.Get("secret")), []byte(s.appSecret)) != 1:
		writeJSON(w, map[string]any{"errcode": errInvalidSecret, "errmsg": "invalid appsecret"})
	case q.Get("grant_type") != "authorization_code":
		writeJSON(w, map[string]any{"errcode": 40002, "errmsg": "invalid grant_type"})
	case q.Get("js_code") == "" || q.Get("js_code") == RejectedCode:
		writeJSON(w, map[string]any{"errcode": errInvalidCode, "errmsg": "invalid code"})
	default:
		code := q.Get("js_code")
		key := sha256.Sum256([]byte(s.appSecret + code))
		writeJSON(w, map[string]any{
			"openid":      "sim-" + code,
			"session_key": hex.EncodeToString(key[:16]),
		})
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
