package wxsim

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// The mini-program's server-side messaging: stable_token (the access
// token, plain and forced refresh as WeChat documents them) and
// subscribeMessage.send with one-time subscriptions: each template a user
// accepted (POST /sim/subscribe, the device's wx.requestSubscribeMessage)
// allows one message; without one WeChat answers 43101. Knobs (POST
// /sim/messages/config): down (503), slow (answer after a delay, the
// message already delivered), token_ttl_s, and expire_token (the current
// token becomes invalid at once: the next send gets 40001).
type messages struct {
	appID, secret string
	now           func() time.Time

	mu       sync.Mutex
	token    string
	expires  time.Time
	tokenTTL time.Duration
	plain    int
	forced   int
	quota    map[[2]string]int // (openid, template) → messages left
	sent     []SentMessage
	cfg      MessageConfig
}

// SentMessage is a message WeChat delivered.
type SentMessage struct {
	ToUser     string                       `json:"touser"`
	TemplateID string                       `json:"template_id"`
	Page       string                       `json:"page"`
	State      string                       `json:"miniprogram_state"`
	Data       map[string]map[string]string `json:"data"`
	At         time.Time                    `json:"at"`
}

// MessageConfig are the messaging knobs.
type MessageConfig struct {
	Down        bool `json:"down"`
	SlowMS      int  `json:"slow_ms"`
	TokenTTLS   int  `json:"token_ttl_s"`
	ExpireToken bool `json:"expire_token"`
}

// MessageLog is GET /sim/messages: what was delivered and how often the
// token endpoint was called.
type MessageLog struct {
	Messages     []SentMessage `json:"messages"`
	PlainCalls   int           `json:"stable_token_plain_calls"`
	ForcedCalls  int           `json:"stable_token_forced_calls"`
	CurrentToken string        `json:"current_token"`
}

func (s *Server) withMessages() {
	m := &messages{appID: s.appID, secret: s.appSecret, now: time.Now, tokenTTL: 7200 * time.Second, quota: map[[2]string]int{}}
	s.msgs = m
	s.mux.HandleFunc("POST /cgi-bin/stable_token", m.stableToken)
	s.mux.HandleFunc("POST /cgi-bin/message/subscribe/send", m.send)
	s.mux.HandleFunc("POST /sim/subscribe", m.subscribe)
	s.mux.HandleFunc("POST /sim/messages/config", m.config)
	s.mux.HandleFunc("GET /sim/messages", m.log)
}

func (m *messages) stableToken(w http.ResponseWriter, r *http.Request) {
	var req struct {
		GrantType    string `json:"grant_type"`
		AppID        string `json:"appid"`
		Secret       string `json:"secret"`
		ForceRefresh bool   `json:"force_refresh"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, map[string]any{"errcode": 47001, "errmsg": "data format error"})
		return
	}
	m.mu.Lock()
	cfg := m.cfg
	m.mu.Unlock()
	if cfg.Down {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	m.wait(r, cfg)
	switch {
	case req.GrantType != "client_credential":
		writeJSON(w, map[string]any{"errcode": 40002, "errmsg": "invalid grant_type"})
		return
	case req.AppID != m.appID:
		writeJSON(w, map[string]any{"errcode": errInvalidAppID, "errmsg": "invalid appid"})
		return
	case subtle.ConstantTimeCompare([]byte(req.Secret), []byte(m.secret)) != 1:
		writeJSON(w, map[string]any{"errcode": errInvalidSecret, "errmsg": "invalid appsecret"})
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if req.ForceRefresh {
		m.forced++
	} else {
		m.plain++
	}
	// Plain mode hands out the current token while it is valid; a forced
	// refresh replaces it (the old one stops working).
	if req.ForceRefresh || m.token == "" || !now.Before(m.expires) {
		m.token = "simtoken-" + randHex(8)
		m.expires = now.Add(m.tokenTTL)
	}
	writeJSON(w, map[string]any{"access_token": m.token, "expires_in": int(m.expires.Sub(now).Seconds())})
}

func (m *messages) send(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	cfg := m.cfg
	m.mu.Unlock()
	if cfg.Down {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	var msg SentMessage
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		writeJSON(w, map[string]any{"errcode": 47001, "errmsg": "data format error"})
		return
	}
	code, text := m.deliver(r.URL.Query().Get("access_token"), msg)
	// Slow: WeChat delivered, the answer is late.
	m.wait(r, cfg)
	writeJSON(w, map[string]any{"errcode": code, "errmsg": text})
}

// validToken reports whether token is the current access token.
func (m *messages) validToken(token string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return token != "" && token == m.token && m.now().Before(m.expires)
}

func (m *messages) deliver(token string, msg SentMessage) (int, string) {
	if !m.validToken(token) {
		return 40001, "invalid credential, access_token is invalid or not latest"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case msg.TemplateID == "":
		return 40037, "invalid template_id"
	case msg.ToUser == "":
		return 40003, "invalid openid"
	case len(msg.Data) == 0:
		return 47003, "argument invalid! data is empty"
	}
	k := [2]string{msg.ToUser, msg.TemplateID}
	if m.quota[k] <= 0 {
		return 43101, "user refuse to accept the msg"
	}
	m.quota[k]--
	msg.At = m.now().UTC()
	m.sent = append(m.sent, msg)
	return 0, "ok"
}

func (m *messages) wait(r *http.Request, cfg MessageConfig) {
	if cfg.SlowMS <= 0 {
		return
	}
	select {
	case <-r.Context().Done():
	case <-time.After(time.Duration(cfg.SlowMS) * time.Millisecond):
	}
}

// subscribe plays the user accepting templates on the device: one
// message each.
func (m *messages) subscribe(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OpenID      string   `json:"openid"`
		TemplateIDs []string `json:"template_ids"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.OpenID == "" {
		http.Error(w, "want {openid, template_ids}", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	for _, t := range req.TemplateIDs {
		m.quota[[2]string{req.OpenID, t}]++
	}
	m.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (m *messages) config(w http.ResponseWriter, r *http.Request) {
	var c MessageConfig
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	if c.TokenTTLS > 0 {
		m.tokenTTL = time.Duration(c.TokenTTLS) * time.Second
	}
	if c.ExpireToken {
		m.expires = m.now() // the current token stops working
		c.ExpireToken = false
	}
	m.cfg = c
	m.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (m *messages) log(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	writeJSON(w, MessageLog{Messages: append([]SentMessage{}, m.sent...), PlainCalls: m.plain, ForcedCalls: m.forced, CurrentToken: m.token})
}
