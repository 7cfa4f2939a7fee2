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
