package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/takeout/takeout/internal/fulfilment"
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

// clickCard clicks the element sel finds once, in one step of the page's
// own: a card the board renders again on an event replaces its buttons,
// and a click on a node found a moment before fails ("Could not find node
// with given id"); this waits for one to be there and clicks it at once.
func clickCard(sel string) chromedp.Action[chromedp.Void] {
	return into(chromedp.Poll[bool](fmt.Sprintf(`(() => { const b = document.querySelector(%q); if (!b) return false; b.click(); return true })()`, sel)), nil)
}

// boardLanguages are the board's languages, its default first.
var boardLanguages = []string{"zh-CN", "en"}

// boardWords are the board's words in one language, read from the one
// place the board keeps them (internal/board/static/strings.json).
type boardWords map[string]string

func wordsOf(t *testing.T, lang string) boardWords {
	t.Helper()
	b, err := os.ReadFile("../../internal/board/static/strings.json")
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]boardWords
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	w, ok := all[lang]
	if !ok {
		t.Fatalf("the board has no %s", lang)
	}
	return w
}

// say is what the board shows for key with its {names} filled in
// (name, value pairs).
func (w boardWords) say(key string, vars ...string) string {
	text := w[key]
	for i := 0; i+1 < len(vars); i += 2 {
		text = strings.ReplaceAll(text, "{"+vars[i]+"}", vars[i+1])
	}
	return text
}

// countdown reads the minutes and seconds of a countdown the board shows
// for key ({t}); false when text is not that line.
func (w boardWords) countdown(key, text string) (time.Duration, bool) {
	pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(w[key]), `\{t\}`, `(\d+):(\d\d)`) + "$"
	m := regexp.MustCompile(pattern).FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	min, _ := strconv.Atoi(m[1])
	sec, _ := strconv.Atoi(m[2])
	return time.Duration(min)*time.Minute + time.Duration(sec)*time.Second, true
}

// boardLogin opens api's board in lang (the default, zh-CN, without
// asking for it) and logs in until the stream is live.
func boardLogin(t *testing.T, ctx context.Context, api *instance, lang, username, password string) {
	t.Helper()
	page := api.url + "/board/"
	if lang != boardLanguages[0] {
		page += "?lang=" + lang
	}
	var htmlLang, button string
	runBrowser(t, ctx, 15*time.Second, "log in on the board",
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		into(chromedp.Evaluate[string](`document.documentElement.lang`), &htmlLang),
		into(chromedp.Text(chromedp.CSS("#login-button")), &button),
		chromedp.SendKeys(chromedp.CSS("#username"), username),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#login-button")),
		chromedp.WaitVisible(chromedp.CSS("#live.on")),
	)
	if w := wordsOf(t, lang); htmlLang != lang || button != w["login.submit"] {
		t.Errorf("the board speaks %q (its button says %q), want %s (%q)", htmlLang, button, lang, w["login.submit"])
	}
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

// The board in a real browser, in each of its languages: staff log in, a
// paid order appears within 2 seconds without a reload, one tap accepts
// it (ACCEPTED in the database), a second board on another instance sees
// the card move, and the API's refusals show on the card in the board's
// words.
func TestBoardInABrowser(t *testing.T) {
	t.Parallel()
	for _, lang := range boardLanguages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			boardInABrowser(t, lang)
		})
	}
}

func boardInABrowser(t *testing.T, lang string) {
	w := wordsOf(t, lang)
	ps := newPayShop(t, nil, 100, 100)
	ps.apis = append(ps.apis, ps.start(t, ps.payEnv))
	ps.createStaff(t, "counter", "correct horse battery")
	a, b := browser(t), browser(t)
	boardLogin(t, a, ps.apis[0], lang, "counter", "correct horse battery")
	boardLogin(t, b, ps.apis[1], lang, "counter", "correct horse battery")

	id := ps.payOrder(t, "board-1", 2)
	paidAt := time.Now()
	runBrowser(t, a, 2*time.Second, "the paid order's card on the board within 2s", chromedp.WaitVisible(chromedp.CSS(card("new", id))))
	t.Logf("card shown %s after the payment was applied", time.Since(paidAt).Round(time.Millisecond))
	runBrowser(t, b, 2*time.Second, "the card on the second board", chromedp.WaitVisible(chromedp.CSS(card("new", id))))

	runBrowser(t, a, 5*time.Second, "accept with one tap",
		clickCard(card("new", id)+` button[data-action="accept"]`),
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
	if want := w.say("already", "action", w["action.accept"]); note != want {
		t.Errorf("late accept says %q, want %q", note, want)
	}
	refused := w.say("problem.order-status-conflict", "action", w["action.reject"], "status", w["status.ACCEPTED"])
	runBrowser(t, b, 5*time.Second, "a refused reject",
		into(chromedp.Evaluate[bool](fmt.Sprintf(`act(%q, "reject", document.querySelector(%q)), true`, id, card("accepted", id))), nil),
		into(chromedp.Poll[bool](fmt.Sprintf(`document.querySelector(%q)?.textContent === %q`, card("accepted", id)+" .card-error", refused)), nil))
	// The card's words: its status, its total as the kitchen reads it.
	var status, total string
	runBrowser(t, b, time.Second, "the card's words",
		into(chromedp.Text(chromedp.CSS(card("accepted", id)+" .status")), &status),
		into(chromedp.Text(chromedp.CSS(card("accepted", id)+" .total")), &total))
	if status != w["status.ACCEPTED"] || total != "¥25.00" {
		t.Errorf("the card says %q, %q; want %q, ¥25.00 (two dishes of ¥10.00 and ¥5.00 delivery)", status, total, w["status.ACCEPTED"])
	}

	// A wrong password is said plainly on the login form.
	c := browser(t)
	var loginError string
	runBrowser(t, c, 10*time.Second, "a wrong password",
		chromedp.Navigate(ps.apis[1].url+"/board/?lang="+lang),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "counter"),
		chromedp.SendKeys(chromedp.CSS("#password"), "not it"),
		chromedp.Click(chromedp.CSS("#login-button")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")),
		into(chromedp.Text(chromedp.CSS("#login-error")), &loginError))
	if loginError != w["problem.staff-login-failed"] {
		t.Errorf("login error %q, want %q", loginError, w["problem.staff-login-failed"])
	}

	screenshots(t, ps, lang, a, b)
}

// screenshots fills the board (a few orders in each column) and saves a
// phone and a desktop view, to TAKEOUT_BOARD_SCREENSHOTS when set (the
// README's come from there) or the test's temporary directory.
func screenshots(t *testing.T, ps *payShop, lang string, phone, desktop context.Context) {
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
	suffix := ""
	if lang != boardLanguages[0] {
		suffix = "-" + lang
	}
	for name, ctx := range map[string]context.Context{"board-phone" + suffix + ".png": phone, "board-desktop" + suffix + ".png": desktop} {
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

// The accept deadline on the board, in each of its languages: a paid
// order's card counts down to its deadline and says what happens then;
// one in its last minute turns urgent and rings the louder ring; when the
// system applies the merchant's rule, the card moves without a reload and
// says why.
func TestBoardAcceptDeadlineCountdown(t *testing.T) {
	t.Parallel()
	for _, lang := range boardLanguages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			boardAcceptDeadlineCountdown(t, lang)
		})
	}
}

func boardAcceptDeadlineCountdown(t *testing.T, lang string) {
	w := wordsOf(t, lang)
	ps := newPayShop(t, nil, 100)
	ps.createStaff(t, "deadline", "correct horse battery")
	b := browser(t)
	boardLogin(t, b, ps.apis[0], lang, "deadline", "correct horse battery")

	ps.setAcceptRule(t, 600, "reject")
	calm := ps.payOrder(t, "countdown-calm", 1)
	var first, later string
	runBrowser(t, b, 5*time.Second, "the countdown on a paid card",
		chromedp.WaitVisible(chromedp.CSS(card("new", calm)+" .deadline")),
		into(chromedp.Text(chromedp.CSS(card("new", calm)+" .deadline")), &first))
	if left, ok := w.countdown("deadline.in.reject", first); !ok || left < 9*time.Minute+50*time.Second || left > 10*time.Minute {
		t.Errorf("the countdown says %q, want about ten minutes to an auto-reject (%q)", first, w["deadline.in.reject"])
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
	if left, ok := w.countdown("deadline.in.accept", text); (!ok || left > 10*time.Second) && text != w["deadline.now.accept"] {
		t.Errorf("the urgent card says %q, want at most ten seconds to an auto-accept (%q)", text, w["deadline.in.accept"])
	}
	runBrowser(t, b, 20*time.Second, "the card accepted at its deadline, without a reload",
		chromedp.WaitVisible(chromedp.CSS(card("accepted", hurry)+" .deadline.applied")),
		into(chromedp.Text(chromedp.CSS(card("accepted", hurry)+" .deadline")), &text))
	if text != w["deadline.applied.accept"] {
		t.Errorf("the accepted card says %q, want %q", text, w["deadline.applied.accept"])
	}
	if n := ps.count(t, `SELECT count(*) FROM order_status_history WHERE order_id = $1 AND actor = 'system:accept-deadline'`, hurry); n != 1 {
		t.Errorf("%d history rows by the deadline", n)
	}
	// The calm order is still waiting, and still counting down.
	runBrowser(t, b, time.Second, "the calm card still new", chromedp.WaitVisible(chromedp.CSS(card("new", calm)+" .deadline")))
}

// Pickup and scheduled orders on the board, in each of its languages: a
// pickup order's card shows its number and offers no dispatch; marked
// ready it moves to the pickup column, and one tap when the customer
// collects it completes it. An accepted scheduled order waits in the
// scheduled column with its slot in the merchant's time (Shanghai's,
// whatever the browser's clock).
func TestBoardPickupAndScheduled(t *testing.T) {
	t.Parallel()
	for _, lang := range boardLanguages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			boardPickupAndScheduled(t, lang)
		})
	}
}

func boardPickupAndScheduled(t *testing.T, lang string) {
	w := wordsOf(t, lang)
	sh := newShop(t, 1, nil, 100)
	sh.setFulfilment(t, fulfilment.Rules{Delivery: true, Pickup: true, Scheduled: &fulfilment.Scheduling{
		SlotMinutes: 30, LeadMinutes: 0, DaysAhead: 1, Capacity: 5, PrintBeforeMinutes: 15}})
	user := sh.login(t, "board-pickup")
	c := sh.confirm(t, sh.apis[0], user, sh.pickupCart(1))
	r := sh.submit(t, sh.apis[0], user, "board-pickup", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("pickup order: %d %s", r.status, r.body)
	}
	p := placedOrder(t, r)
	slot := sh.slots(t).Slots[len(sh.slots(t).Slots)-1] // tomorrow's last
	cart := sh.cart(1)
	cart["slot_start"] = slot.Start.Format(time.RFC3339)
	c = sh.confirm(t, sh.apis[0], user, cart)
	r = sh.submit(t, sh.apis[0], user, "board-scheduled", c.ConfirmToken)
	if r.status != 201 {
		t.Fatalf("scheduled order: %d %s", r.status, r.body)
	}
	s := placedOrder(t, r)
	for _, id := range []string{p.ID, s.ID} {
		sh.markPaid(t, id)
		if r := sh.staffAction(t, id, "accept"); r.status != 200 {
			t.Fatalf("accept: %d %s", r.status, r.body)
		}
	}
	sh.createStaff(t, "pickup-board", "correct horse battery")
	b := browser(t)
	boardLogin(t, b, sh.apis[0], lang, "pickup-board", "correct horse battery")

	var number, slotText string
	var buttons []string
	runBrowser(t, b, 5*time.Second, "the pickup and the scheduled cards",
		chromedp.WaitVisible(chromedp.CSS(card("accepted", p.ID)+" .pickup")),
		into(chromedp.Text(chromedp.CSS(card("accepted", p.ID)+" .pickup")), &number),
		into(chromedp.Evaluate[[]string](fmt.Sprintf(`[...document.querySelectorAll(%q)].map((b) => b.dataset.action)`, card("accepted", p.ID)+" .actions button")), &buttons),
		chromedp.WaitVisible(chromedp.CSS(card("scheduled", s.ID)+" .slot")),
		into(chromedp.Text(chromedp.CSS(card("scheduled", s.ID)+" .slot")), &slotText))
	if want := w.say("pickup", "n", strconv.Itoa(int(p.Pickup.Number))); number != want {
		t.Errorf("the pickup card says %q, want %q", number, want)
	}
	if strings.Join(buttons, ",") != "ready" {
		t.Errorf("an accepted pickup order offers %v, want ready alone", buttons)
	}
	local := shanghai(t)
	from, to := slot.Start.In(local).Format("15:04"), slot.End.In(local).Format("15:04")
	if !strings.Contains(slotText, from) || !strings.HasSuffix(slotText, to) || !strings.HasPrefix(slotText, strings.Split(w["slot"], "{")[0]) {
		t.Errorf("the scheduled card says %q, want the slot %s–%s in Shanghai's time (%q)", slotText, from, to, w["slot"])
	}

	runBrowser(t, b, 5*time.Second, "ready: into the pickup column",
		clickCard(card("accepted", p.ID)+` button[data-action="ready"]`),
		chromedp.WaitVisible(chromedp.CSS(card("pickup", p.ID)+` button[data-action="pick-up"]`)))
	runBrowser(t, b, 5*time.Second, "collected: done",
		clickCard(card("pickup", p.ID)+` button[data-action="pick-up"]`),
		chromedp.WaitVisible(chromedp.CSS(card("done", p.ID))))
	if n := sh.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'COMPLETED'", p.ID); n != 1 {
		t.Errorf("the collected order is not COMPLETED")
	}
}
