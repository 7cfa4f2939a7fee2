package subscribemsg

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/testenv"
	"github.com/takeout/takeout/internal/wxsim"
)

// clock is a settable clock shared by the instances of a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func simLog(t *testing.T, base string) wxsim.MessageLog {
	t.Helper()
	resp, err := http.Get(base + "/sim/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l wxsim.MessageLog
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l
}

// all runs f on every instance at once and returns what each got.
func all(t *testing.T, toks []*AccessTokens, f func(*AccessTokens) (string, error)) []string {
	t.Helper()
	got := make([]string, len(toks))
	var wg sync.WaitGroup
	for i, tk := range toks {
		wg.Go(func() {
			v, err := f(tk)
			if err != nil {
				t.Errorf("instance %d: %v", i, err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	return got
}

func same(vals []string) bool {
	for _, v := range vals {
		if v != vals[0] || v == "" {
			return false
		}
	}
	return true
}

// Six instances share one access token: fetched once at start, replaced
// once when WeChat refuses it, and once (forced) before it expires.
func TestAccessTokenIsSharedAndRefreshedOnce(t *testing.T) {
	t.Parallel()
	wx := httptest.NewServer(wxsim.New("wxapp", "secret"))
	t.Cleanup(wx.Close)
	r := testenv.NewRedis(t)
	clk := &clock{now: time.Now()}
	toks := make([]*AccessTokens, 6)
	for i := range toks {
		toks[i] = NewAccessTokens(wx.URL, "wxapp", "secret", &http.Client{Timeout: 5 * time.Second}, r.Conn(t), slog.New(slog.DiscardHandler), clk.Now)
	}
	ctx := t.Context()
	token := func(tk *AccessTokens) (string, error) { return tk.Token(ctx) }

	first := all(t, toks, token)
	if !same(first) {
		t.Fatalf("instances got %v", first)
	}
	if l := simLog(t, wx.URL); l.PlainCalls != 1 || l.ForcedCalls != 0 {
		t.Fatalf("cold start: %d plain and %d forced calls, want 1 and 0", l.PlainCalls, l.ForcedCalls)
	}

	// WeChat stops taking it (40001 on a send): every instance asks for
	// another at once; one fetch replaces it for all.
	resp, err := http.Post(wx.URL+"/sim/messages/config", "application/json", strings.NewReader(`{"expire_token":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	second := all(t, toks, func(tk *AccessTokens) (string, error) { return tk.Refresh(ctx, first[0]) })
	if !same(second) || second[0] == first[0] {
		t.Fatalf("after the refusal instances got %v (the refused one was %s)", second, first[0])
	}
	if l := simLog(t, wx.URL); l.PlainCalls != 2 || l.ForcedCalls != 0 || l.CurrentToken != second[0] {
		t.Fatalf("after the refusal: %d plain and %d forced calls (token %s), want 2 and 0", l.PlainCalls, l.ForcedCalls, l.CurrentToken)
	}

	// Nearly two hours later: one forced refresh, before it expires.
	clk.advance(7200*time.Second - 4*time.Minute)
	all(t, toks, token)
	l := simLog(t, wx.URL)
	if l.ForcedCalls != 1 || l.PlainCalls != 2 {
		t.Fatalf("near expiry: %d plain and %d forced calls, want 2 and 1", l.PlainCalls, l.ForcedCalls)
	}
	if third := all(t, toks, token); !same(third) || third[0] != l.CurrentToken {
		t.Errorf("after the refresh instances use %v, WeChat's is %s", third, l.CurrentToken)
	}
}
