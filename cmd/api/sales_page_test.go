package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The sales page in a real browser, in each language: from the board's
// session, today's row and bar show what the statement (the ledger) says
// the merchant is owed, its totals and headings are in the page's words,
// and the 30-day range draws 30 days.
func TestSalesPageInABrowser(t *testing.T) {
	t.Parallel()
	for _, lang := range boardLanguages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			salesPageInABrowser(t, lang)
		})
	}
}

func salesPageInABrowser(t *testing.T, lang string) {
	w := wordsOf(t, lang)
	ps := newPayShop(t, nil, 100, 100)
	ps.createStaff(t, "books", "correct horse battery")
	id := ps.payOrder(t, "sales-1", 2) // two dishes of ¥10.00 and ¥5.00 delivery
	waitUntil(t, "the order to be paid", func() bool {
		return ps.count(t, "SELECT count(*) FROM orders WHERE id = $1 AND status = 'PAID'", id) == 1
	})
	today := time.Now().In(shanghai(t)).Format(time.DateOnly)

	b := browser(t)
	boardLogin(t, b, ps.apis[0], lang, "books", "correct horse battery")
	row := fmt.Sprintf(`#days tr[data-date="%s"]`, today)
	var net, orders, heading, fen, total string
	var rows, bars int
	runBrowser(t, b, 15*time.Second, "the sales page",
		chromedp.Navigate(ps.apis[0].url+"/board/sales.html?lang="+lang),
		chromedp.WaitVisible(chromedp.CSS(row)),
		into(chromedp.Text(chromedp.CSS(row+` td[data-figure="net_fen"]`)), &net),
		into(chromedp.Text(chromedp.CSS(row+` td[data-figure="orders"]`)), &orders),
		into(chromedp.Text(chromedp.CSS(`#days th`)), &heading),
		into(chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('#chart rect[data-date="%s"]').dataset.fen`, today)), &fen),
		into(chromedp.Text(chromedp.CSS(`#totals dd[data-figure="net_fen"]`)), &total),
		into(chromedp.Evaluate[int](`document.querySelectorAll('#days tbody tr').length`), &rows),
	)
	if net != "¥25.00" || orders != "1" || fen != "2500" || total != "¥25.00" || rows != 7 || heading != w["sales.date"] {
		t.Errorf("the page says net %q, orders %q, bar %q fen, total %q, %d rows, heading %q; want ¥25.00, 1, 2500, ¥25.00, 7, %q",
			net, orders, fen, total, rows, heading, w["sales.date"])
	}
	runBrowser(t, b, 10*time.Second, "thirty days",
		chromedp.Click(chromedp.CSS(`button[data-days="30"]`)),
		into(chromedp.Poll[bool](`document.querySelectorAll('#chart rect').length === 30`), nil),
		into(chromedp.Evaluate[int](`document.querySelectorAll('#days tbody tr').length`), &bars),
	)
	if bars != 30 {
		t.Errorf("thirty days: %d rows", bars)
	}
}

// After-sales requests on the board, in each language: a customer's
// request shows with its deadline and photo; one tap agrees it (the
// refund written); another is rejected with the note typed; a request
// escalated to the platform shows with the customer's words.
func TestBoardAfterSales(t *testing.T) {
	t.Parallel()
	for _, lang := range boardLanguages {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			boardAfterSales(t, lang)
		})
	}
}

func boardAfterSales(t *testing.T, lang string) {
	w := wordsOf(t, lang)
	ps := newPayShop(t, map[string]string{"TAKEOUT_AFTER_SALES_RESPOND_WITHIN": "1h"}, 100, 100)
	ps.createStaff(t, "desk", "correct horse battery")
	staff := ps.staffToken(t, "merchant:"+ps.merchantID)
	user := ps.login(t, "after-board")
	id := ps.paidAccepted(t, user, "after-board", staff)
	first := decodeAfterSale(t, ps.afterSale(t, user, id, "soup", `{"amount_fen":500,"reason":"cold soup","photos":["https://cdn.example.com/soup.jpg"]}`), 201)

	b := browser(t)
	boardLogin(t, b, ps.apis[0], lang, "desk", "correct horse battery")
	item := fmt.Sprintf(`#after-sales-list li[data-after-sale="%s"]`, first.ID)
	var what, photo string
	runBrowser(t, b, 10*time.Second, "the request on the board",
		chromedp.WaitVisible(chromedp.CSS(item)),
		into(chromedp.Text(chromedp.CSS(item+" .what")), &what),
		into(chromedp.Text(chromedp.CSS(item+" a")), &photo))
	if want := w.say("aftersales.line", "order", id[len(id)-6:], "what", w.say("aftersales.amount", "amount", "¥5.00"), "reason", "cold soup"); what != want || photo != w.say("aftersales.photo", "n", "1") {
		t.Errorf("the request says %q, %q; want %q", what, photo, want)
	}
	runBrowser(t, b, 10*time.Second, "agree with one tap",
		chromedp.Click(chromedp.CSS(item+" button.agree")),
		chromedp.WaitNotPresent(chromedp.CSS(item)))
	if n := ps.count(t, "SELECT count(*) FROM after_sales WHERE id = $1 AND status = 'agreed' AND refund_id IS NOT NULL", first.ID); n != 1 {
		t.Error("the tap did not agree the request with its refund")
	}

	second := decodeAfterSale(t, ps.afterSale(t, user, id, "late", `{"amount_fen":300,"reason":"late"}`), 201)
	item = fmt.Sprintf(`#after-sales-list li[data-after-sale="%s"]`, second.ID)
	runBrowser(t, b, 25*time.Second, "the second request, then rejected with a note",
		chromedp.WaitVisible(chromedp.CSS(item)),
		chromedp.SendKeys(chromedp.CSS(item+" input.note"), "on time by our clock"),
		chromedp.Click(chromedp.CSS(item+" button.reject")),
		chromedp.WaitNotPresent(chromedp.CSS(item)))
	if n := ps.count(t, "SELECT count(*) FROM after_sales WHERE id = $1 AND status = 'rejected' AND decision_note = 'on time by our clock'", second.ID); n != 1 {
		t.Error("the rejection with its note is not in the database")
	}
	decodeAfterSale(t, ps.do(t, ps.apis[0], "POST", "/v1/after-sales/"+second.ID+"/escalate", user, map[string]any{"note": "it was late"}), 200)
	var by string
	runBrowser(t, b, 25*time.Second, "the escalated request",
		chromedp.WaitVisible(chromedp.CSS(item+`[data-status="escalated"]`)),
		into(chromedp.Text(chromedp.CSS(item+" .by")), &by))
	if want := w.say("aftersales.escalated", "why", "it was late"); by != want {
		t.Errorf("the escalated request says %q, want %q", by, want)
	}
}
