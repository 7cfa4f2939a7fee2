package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/wxsim"
)

// browser starts a headless Chromium (Debian's chromium package) with a
// phone-sized window.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found: run `scripts/dev/services.sh browser-packages` (make test does) to install Debian's chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
		chromedp.WindowSize(390, 844),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser, for the context's whole life.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// runBrowser runs browser actions with a time limit.
func runBrowser(t *testing.T, ctx context.Context, d time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// into runs an action with a value and keeps it in v.
func into[T any](a chromedp.Action[T], v *T) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		got, err := a(ctx, t)
		if v != nil {
			*v = got
		}
		return err
	})
}

// boardLogin opens api's board and logs in until the stream is live.
func boardLogin(t *testing.T, ctx context.Context, api *instance, username, password string) {
	t.Helper()
	runBrowser(t, ctx, 15*time.Second, "log in on the board",
		chromedp.Navigate(api.url+"/board/"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), username),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#login-button")),
		chromedp.WaitVisible(chromedp.CSS("#live.on")),
	)
}

func card(column, id string) string {
	return fmt.Sprintf(`#col-%s article[data-order-id="%s"]`, column, id)
}

// payOrder places an order for a new customer and pays it through wxsim
// (its notification reaches the API), returning the order id.
func (ps *payShop) payOrder(t *testing.T, code string, qty int32) string {
	t.Helper()
	user := ps.login(t, code)
	o := ps.place(t, user, code, qty)
	ps.pay(t, user, o.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1)})
	return o.ID
}

// The board in a real browser: staff log in, a paid order appears within
// 2 seconds without a reload, one tap accepts it (ACCEPTED in the
// database), a second board on another instance sees the card move, and
// the API's refusals show on the card.
func TestBoardInABrowser(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 100, 100)
	ps.apis = append(ps.apis, ps.start(t, ps.payEnv))
	ps.createStaff(t, "counter", "correct horse battery")
	a, b := browser(t), browser(t)
	boardLogin(t, a, ps.apis[0], "counter", "correct horse battery")
	boardLogin(t, b, ps.apis[1], "counter", "correct horse battery")

	id := ps.payOrder(t, "board-1", 2)
	paidAt := time.Now()
	runBrowser(t, a, 2*time.Second, "the paid order's card on the board within 2s", chromedp.WaitVisible(chromedp.CSS(card("new", id))))
	t.Logf("card shown %s after the payment was applied", time.Since(paidAt).Round(time.Millisecond))
	runBrowser(t, b, 2*time.Second, "the card on the second board", chromedp.WaitVisible(chromedp.CSS(card("new", id))))

	runBrowser(t, a, 5*time.Second, "accept with one tap",
		chromedp.Click(chromedp.CSS(card("new", id)+` button[data-action="accept"]`)),
		chromedp.WaitVisible(chromedp.CSS(card("accepted", id))))
	waitUntil(t, "the order ACCEPTED in the database", func() bool {
		return ps.count(t, `SELECT count(*) FROM orders WHERE id = $1 AND status = 'ACCEPTED'`, id) == 1
	})
	runBrowser(t, b, 2*time.Second, "the card moved on the other instance's board", chromedp.WaitVisible(chromedp.CSS(card("accepted", id))))

	// What a colleague's tap a moment too late sees: the same call the
	// buttons make, on an order already accepted.
	var note string
	runBrowser(t, b, 5*time.Second, "a late accept",
		into(chromedp.Evaluate[bool](fmt.Sprintf(`act(%q, "accept", document.querySelector(%q)), true`, id, card("accepted", id))), nil),
		chromedp.WaitVisible(chromedp.CSS(card("accepted", id)+" .card-error")),
		into(chromedp.Text(chromedp.CSS(card("accepted", id)+" .card-error")), &note))
	if note != "Already accepted by a colleague." {
		t.Errorf("late accept says %q", note)
	}
	runBrowser(t, b, 5*time.Second, "a refused reject",
		into(chromedp.Evaluate[bool](fmt.Sprintf(`act(%q, "reject", document.querySelector(%q)), true`, id, card("accepted", id))), nil),
		into(chromedp.Poll[bool](fmt.Sprintf(`document.querySelector(%q)?.textContent.includes("cannot reject this order: it is ACCEPTED")`, card("accepted", id)+" .card-error")), nil))

	// A wrong password is said plainly on the login form.
	c := browser(t)
	var loginError string
	runBrowser(t, c, 10*time.Second, "a wrong password",
		chromedp.Navigate(ps.apis[1].url+"/board/"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "counter"),
		chromedp.SendKeys(chromedp.CSS("#password"), "not it"),
		chromedp.Click(chromedp.CSS("#login-button")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")),
		into(chromedp.Text(chromedp.CSS("#login-error")), &loginError))
	if loginError != "wrong username or password" {
		t.Errorf("login error %q", loginError)
	}

	screenshots(t, ps, a, b)
}

// screenshots fills the board (a few orders in each column) and saves a
// phone and a desktop view, to TAKEOUT_BOARD_SCREENSHOTS when set (the
// README's come from there) or the test's temporary directory.
func screenshots(t *testing.T, ps *payShop, phone, desktop context.Context) {
	t.Helper()
	dir := os.Getenv("TAKEOUT_BOARD_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	var ids []string
	for i := range 5 {
		ids = append(ids, ps.payOrder(t, fmt.Sprint("shot-", i), int32(i%2+1)))
	}
	for i, step := range [][]string{{"accept"}, {"accept", "ready"}, {"accept", "dispatch"}} {
		for _, action := range step {
			if r := ps.do(t, ps.apis[0], "POST", "/admin/v1/orders/"+ids[i]+"/"+action, ps.admin, nil); r.status != 200 {
				t.Fatalf("%s: %d %s", action, r.status, r.body)
			}
		}
	}
	runBrowser(t, desktop, 5*time.Second, "the desktop board",
		chromedp.EmulateViewport(1400, 800),
		chromedp.WaitVisible(chromedp.CSS(card("delivering", ids[2]))))
	for name, ctx := range map[string]context.Context{"board-phone.png": phone, "board-desktop.png": desktop} {
		var png []byte
		runBrowser(t, ctx, 10*time.Second, "screenshot "+name,
			chromedp.WaitVisible(chromedp.CSS(card("new", ids[4]))),
			into(chromedp.FullScreenshot(100), &png))
		if !strings.HasPrefix(string(png), "\x89PNG") {
			t.Fatalf("%s is not a PNG", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The accept deadline on the board: a paid order's card counts down to
// its deadline and says what happens then; one in its last minute turns
// urgent and rings the louder ring; when the system applies the
// merchant's rule, the card moves without a reload and says why.
func TestBoardAcceptDeadlineCountdown(t *testing.T) {
	t.Parallel()
	ps := newPayShop(t, nil, 100)
	ps.createStaff(t, "deadline", "correct horse battery")
	b := browser(t)
	boardLogin(t, b, ps.apis[0], "deadline", "correct horse battery")

	ps.setAcceptRule(t, 600, "reject")
	calm := ps.payOrder(t, "countdown-calm", 1)
	var first, later string
	runBrowser(t, b, 5*time.Second, "the countdown on a paid card",
		chromedp.WaitVisible(chromedp.CSS(card("new", calm)+" .deadline")),
		into(chromedp.Text(chromedp.CSS(card("new", calm)+" .deadline")), &first))
	if !strings.HasPrefix(first, "Auto-reject in 9:5") && first != "Auto-reject in 10:00" {
		t.Errorf("the countdown says %q, want about ten minutes to an auto-reject", first)
	}
	// The card shows whole seconds rounded up, each second: two ticks
	// later it has moved on by at least one.
	time.Sleep(2100 * time.Millisecond)
	runBrowser(t, b, 5*time.Second, "the countdown two seconds later",
		into(chromedp.Text(chromedp.CSS(card("new", calm)+" .deadline")), &later))
	if later == first {
		t.Errorf("the countdown stood still at %q", first)
	}
	var urgent bool
	runBrowser(t, b, time.Second, "the calm card", into(chromedp.Evaluate[bool](
		fmt.Sprintf(`document.querySelector(%q).classList.contains("urgent")`, card("new", calm))), &urgent))
	if urgent {
		t.Error("a card ten minutes from its deadline is urgent")
	}

	ps.setAcceptRule(t, 10, "accept")
	hurry := ps.payOrder(t, "countdown-hurry", 1)
	var rings bool
	runBrowser(t, b, 5*time.Second, "the card in its last minute: urgent, with the louder ring",
		chromedp.WaitVisible(chromedp.CSS(card("new", hurry)+".urgent")),
		into(chromedp.Poll[bool](`Number(document.body.dataset.urgentRings || 0) >= 1`), &rings))
	var text string
	runBrowser(t, b, time.Second, "the urgent countdown", into(chromedp.Text(chromedp.CSS(card("new", hurry)+" .deadline")), &text))
	if !strings.HasPrefix(text, "Auto-accept in 0:0") && !strings.HasPrefix(text, "Auto-accept in 0:10") && text != "Auto-accepting now…" {
		t.Errorf("the urgent card says %q", text)
	}
	runBrowser(t, b, 20*time.Second, "the card accepted at its deadline, without a reload",
		chromedp.WaitVisible(chromedp.CSS(card("accepted", hurry)+" .deadline.applied")),
		into(chromedp.Text(chromedp.CSS(card("accepted", hurry)+" .deadline")), &text))
	if text != "Accepted automatically: not accepted in time." {
		t.Errorf("the accepted card says %q", text)
	}
	if n := ps.count(t, `SELECT count(*) FROM order_status_history WHERE order_id = $1 AND actor = 'system:accept-deadline'`, hurry); n != 1 {
		t.Errorf("%d history rows by the deadline", n)
	}
	// The calm order is still waiting, and still counting down.
	runBrowser(t, b, time.Second, "the calm card still new", chromedp.WaitVisible(chromedp.CSS(card("new", calm)+" .deadline")))
}
