// Package printsim plays the two cloud printer providers takeout prints
// through, for development, tests and the soak: a Yilianyun-like open
// platform (access token, md5-signed form posts, origin_id: a repeat
// within two hours returns the earlier ticket's id without printing,
// callbacks signed over their push time) under /yilianyun, and a
// Feie-like API (one form endpoint named by apiname, sha1 signature, no
// idempotency id: every print request prints, tickets queried by the id
// the answer carried, callbacks signed with the platform's RSA key to
// the backurl given) under /feie. Both take tickets for an offline
// printer and print them when it comes back.
//
// Its paper is the truth the tests check: GET /printsim/tickets lists every
// ticket each printer produced. Faults are set with POST /printsim/config.
package printsim

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/takeout/takeout/internal/printing"
)

// Options configure a Server.
type Options struct {
	YilianyunClientID, YilianyunSecret string
	// YilianyunCallbackURL is the app's push address (set in the
	// provider's console; /printsim/config may change it).
	YilianyunCallbackURL string
	FeieUser, FeieUKey   string
	// FeieKey signs Feie's callbacks.
	FeieKey *rsa.PrivateKey
	// PrintDelay is how long a paper takes to come out.
	PrintDelay time.Duration
	Client     *http.Client
	Now        func() time.Time
}

// Faults are one provider's failure knobs. The counts apply to the next
// requests (or callbacks) and go down as they are used; the rates apply
// to each independently, for long runs.
type Faults struct {
	// Down: requests answer HTTP 503 and do nothing.
	Down     int     `json:"down"`
	DownRate float64 `json:"down_rate"`
	// Refuse: print requests answer the provider's refusal (nothing
	// printed).
	Refuse int `json:"refuse"`
	// HangAfterPrint: print requests print, then never answer: the
	// client times out not knowing.
	HangAfterPrint int     `json:"hang_after_print"`
	HangRate       float64 `json:"hang_rate"`
	// LoseCallbacks: callbacks never sent.
	LoseCallbacks    int     `json:"lose_callbacks"`
	LoseCallbackRate float64 `json:"lose_callback_rate"`
	// RepeatCallbacks: callbacks sent twice.
	RepeatCallbacks    int     `json:"repeat_callbacks"`
	RepeatCallbackRate float64 `json:"repeat_callback_rate"`
	// SlowMS delays every request.
	SlowMS int `json:"slow_ms"`
}

// Config is the body of POST /printsim/config.
type Config struct {
	Yilianyun Faults `json:"yilianyun"`
	Feie      Faults `json:"feie"`
	// Offline printers take tickets and print them when back online.
	Offline []string `json:"offline"`
	// YilianyunCallbackURL, when set, replaces the push address.
	YilianyunCallbackURL string `json:"yilianyun_callback_url,omitempty"`
}

// Paper is one ticket a printer produced.
type Paper struct {
	Provider  string    `json:"provider"`
	Device    string    `json:"device"`
	Ref       string    `json:"ref"`
	OriginID  string    `json:"origin_id,omitempty"`
	Content   string    `json:"content"`
	PrintedAt time.Time `json:"printed_at"`
}

// ticket is a ticket the provider took.
type ticket struct {
	Paper
	backURL string
	printed bool
}

// Server is the simulator's HTTP handler.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu        sync.Mutex
	cfg       Config
	tokens    map[string]bool
	byRef     map[string]*ticket
	byOrigin  map[string]*ticket // Yilianyun's origin_id
	originAt  map[string]time.Time
	pending   []*ticket // taken for an offline printer
	papers    []Paper
	seq       int
	callbacks sync.WaitGroup
}

// New returns a simulator.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if opts.PrintDelay <= 0 {
		opts.PrintDelay = 20 * time.Millisecond
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), tokens: map[string]bool{}, byRef: map[string]*ticket{},
		byOrigin: map[string]*ticket{}, originAt: map[string]time.Time{}}
	s.cfg.YilianyunCallbackURL = opts.YilianyunCallbackURL
	s.mux.HandleFunc("POST /yilianyun/oauth/oauth", s.ylyToken)
	s.mux.HandleFunc("POST /yilianyun/print/index", s.ylyPrint)
	s.mux.HandleFunc("POST /yilianyun/printer/getorderstatus", s.ylyStatus)
	s.mux.HandleFunc("POST /feie/Api/Open/", s.feie)
	s.mux.HandleFunc("POST /printsim/config", s.setConfig)
	s.mux.HandleFunc("GET /printsim/config", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		writeJSON(w, s.cfg)
	})
	s.mux.HandleFunc("GET /printsim/tickets", s.listPapers)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Papers returns every ticket the printers produced, of device (all
// when empty).
func (s *Server) Papers(device string) []Paper {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Paper
	for _, p := range s.papers {
		if device == "" || p.Device == device {
			out = append(out, p)
		}
	}
	return out
}

// Wait waits for the callbacks under way.
func (s *Server) Wait() { s.callbacks.Wait() }

func (s *Server) listPapers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string][]Paper{"tickets": s.Papers(r.URL.Query().Get("device"))})
}

func (s *Server) setConfig(w http.ResponseWriter, r *http.Request) {
	var c Config
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if c.YilianyunCallbackURL == "" {
		c.YilianyunCallbackURL = s.cfg.YilianyunCallbackURL
	}
	s.cfg = c
	var back []*ticket
	s.pending = slices.DeleteFunc(s.pending, func(t *ticket) bool {
		if !slices.Contains(c.Offline, t.Device) {
			back = append(back, t)
			return true
		}
		return false
	})
	s.mu.Unlock()
	for _, t := range back {
		s.schedulePrint(t)
	}
	writeJSON(w, c)
}

// faults returns the provider's knobs and takes one from a count that
// applies: what happens to this request.
type fate struct{ down, refuse, hang bool }

func (s *Server) fateOf(provider string, printing bool) (fate, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faultsOf(provider)
	var out fate
	switch {
	case f.Down > 0:
		f.Down--
		out.down = true
	case f.DownRate > 0 && mrand.Float64() < f.DownRate: //nolint:gosec // G404: fault injection
		out.down = true
	case printing && f.Refuse > 0:
		f.Refuse--
		out.refuse = true
	case printing && f.HangAfterPrint > 0:
		f.HangAfterPrint--
		out.hang = true
	case printing && f.HangRate > 0 && mrand.Float64() < f.HangRate: //nolint:gosec // G404: fault injection
		out.hang = true
	}
	return out, time.Duration(f.SlowMS) * time.Millisecond
}

func (s *Server) faultsOf(provider string) *Faults {
	if provider == "feie" {
		return &s.cfg.Feie
	}
	return &s.cfg.Yilianyun
}

// arrive applies the request's slowness and outage; false: answered.
func (s *Server) arrive(w http.ResponseWriter, r *http.Request, provider string, printing bool) (fate, bool) {
	f, slow := s.fateOf(provider, printing)
	if slow > 0 {
		select {
		case <-time.After(slow):
		case <-r.Context().Done():
			return f, false
		}
	}
	if f.down {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return f, false
	}
	return f, true
}

// hang keeps a request unanswered until its client gives up.
func hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(time.Minute):
	}
}

// take records a ticket the provider took and schedules its paper.
func (s *Server) take(t *ticket) {
	s.mu.Lock()
	s.byRef[t.Ref] = t
	offline := slices.Contains(s.cfg.Offline, t.Device)
	if offline {
		s.pending = append(s.pending, t)
	}
	s.mu.Unlock()
	if !offline {
		s.schedulePrint(t)
	}
}

func (s *Server) schedulePrint(t *ticket) {
	s.callbacks.Add(1)
	time.AfterFunc(s.opts.PrintDelay, func() {
		defer s.callbacks.Done()
		s.mu.Lock()
		t.printed = true
		t.PrintedAt = s.opts.Now()
		s.papers = append(s.papers, t.Paper)
		s.mu.Unlock()
		s.callback(t)
	})
}

// callback tells takeout the ticket came out, as the provider does,
// trying again a few times when not acknowledged.
func (s *Server) callback(t *ticket) {
	s.mu.Lock()
	f := s.faultsOf(t.Provider)
	times := 1
	switch {
	case f.LoseCallbacks > 0:
		f.LoseCallbacks--
		times = 0
	case f.LoseCallbackRate > 0 && mrand.Float64() < f.LoseCallbackRate: //nolint:gosec // G404: fault injection
		times = 0
	case f.RepeatCallbacks > 0:
		f.RepeatCallbacks--
		times = 2
	case f.RepeatCallbackRate > 0 && mrand.Float64() < f.RepeatCallbackRate: //nolint:gosec // G404: fault injection
		times = 2
	}
	target := t.backURL
	if t.Provider == "yilianyun" {
		target = s.cfg.YilianyunCallbackURL
	}
	s.mu.Unlock()
	if target == "" {
		return
	}
	for range times {
		for try := range 6 {
			if s.push(t, target) {
				break
			}
			time.Sleep(time.Duration(try+1) * 200 * time.Millisecond)
		}
	}
}

// push sends one callback; true when acknowledged.
func (s *Server) push(t *ticket, target string) bool {
	now := strconv.FormatInt(s.opts.Now().Unix(), 10)
	var form url.Values
	if t.Provider == "yilianyun" {
		form = url.Values{"machine_code": {t.Device}, "order_id": {t.Ref}, "origin_id": {t.OriginID}, "state": {"1"},
			"print_time": {now}, "push_time": {now}, "sign": {printing.YilianyunSign(s.opts.YilianyunClientID, now, s.opts.YilianyunSecret)}}
	} else {
		digest := sha256.Sum256([]byte(printing.FeieCallbackMessage(t.Ref, "1", now)))
		sig, err := rsa.SignPKCS1v15(rand.Reader, s.opts.FeieKey, crypto.SHA256, digest[:])
		if err != nil {
			return false
		}
		form = url.Values{"orderId": {t.Ref}, "status": {"1"}, "stime": {now}, "sign": {base64.StdEncoding.EncodeToString(sig)}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if t.Provider == "yilianyun" {
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"OK"`)
	}
	return resp.StatusCode == http.StatusOK && string(body) == "SUCCESS"
}

func (s *Server) nextRef(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s_%s_%d", prefix, s.opts.Now().Format("20060102150405"), s.seq)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
