package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/takeout/takeout/internal/printing"
	"github.com/takeout/takeout/internal/printsim"
)

// printersOf are the cloud printers of the soak's merchant i: the first
// prints its kitchen tickets at the provider with an idempotency id and
// its receipts at the one without, the second its kitchen tickets at the
// one without; the third has none (its accepts queue nothing).
func printersOf(i int) []map[string]any {
	printer := func(name, provider, device, role string) map[string]any {
		return map[string]any{"name": name, "provider": provider, "device": device, "role": role}
	}
	switch i {
	case 0:
		return []map[string]any{printer("Kitchen", "yilianyun", "SOAKY0K", "kitchen"), printer("Counter", "feie", "SOAKF0R", "receipt")}
	case 1:
		return []map[string]any{printer("Kitchen", "feie", "SOAKF1K", "kitchen")}
	}
	return nil
}

// printFaults are the printer providers' faults through the run: down,
// hanging after printing (the client times out not knowing), callbacks
// lost and repeated.
func printFaults(callbackURL string) printsim.Config {
	f := printsim.Faults{DownRate: 0.03, HangRate: 0.03, LoseCallbackRate: 0.1, RepeatCallbackRate: 0.1}
	return printsim.Config{Yilianyun: f, Feie: f, YilianyunCallbackURL: callbackURL}
}

// setPrintFaults sets the printer simulator's faults (none: the zero
// Config, which keeps the callback address).
func setPrintFaults(ctx context.Context, client *http.Client, wxsimURL string, cfg printsim.Config) error {
	body, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wxsimURL+"/printsim/config", bytes.NewReader(body)) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("printsim config: HTTP %d", resp.StatusCode)
	}
	return nil
}

// fetchPapers reads every ticket the simulated printers produced.
func fetchPapers(ctx context.Context, client *http.Client, wxsimURL string) ([]printsim.Paper, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, wxsimURL+"/printsim/tickets", nil) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req) //nolint:gosec // G704: the soak's own wxsim
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Tickets []printsim.Paper `json:"tickets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("printsim tickets: %w", err)
	}
	return out.Tickets, nil
}

// invPrintedOnce: every accepted order has, on each printer of its
// merchant, its ticket printed, and the printer produced at least one
// paper of it of which at most one is unmarked (every other says 重打 or
// 补打); no order that was never accepted printed anything.
const invPrintedOnce = "each_accepted_order_printed_once_per_printer"

// paperKey is one order on one printer.
type paperKey struct {
	device string
	order  int64
}

// paperTally counts papers and unmarked papers.
type paperTally struct{ papers, unmarked int }

// tallyPapers reads each paper's order (its "订单 N" line) and marks.
func tallyPapers(papers []printsim.Paper) map[paperKey]paperTally {
	out := map[paperKey]paperTally{}
	for _, p := range papers {
		var order int64
		for line := range strings.SplitSeq(p.Content, "\n") {
			if rest, ok := strings.CutPrefix(line, "订单 "); ok {
				order, _ = strconv.ParseInt(rest, 10, 64)
				break
			}
		}
		k := paperKey{device: p.Device, order: order}
		t := out[k]
		t.papers++
		if !strings.Contains(p.Content, printing.TicketMarkAttempt) && !strings.Contains(p.Content, printing.TicketMarkReprint) {
			t.unmarked++
		}
		out[k] = t
	}
	return out
}

// ticketNotOwedYet is true of a scheduled order's first ticket, not
// due before its slot (print_jobs j, orders o): the check owes none, and
// the settle does not wait for it.
const ticketNotOwedYet = `(j.status = 'queued' AND j.tries = 0 AND j.next_try_at > now() AND o.slot_start IS NOT NULL)`

// checkPrints holds the accepted orders, their tickets and the papers to
// invPrintedOnce.
func checkPrints(ctx context.Context, db querier, papers []printsim.Paper, f *findings) error {
	tally := tallyPapers(papers)
	rows, err := db.Query(ctx, `
		SELECT o.id, p.device, coalesce(j.status, '')
		FROM orders o
		JOIN printers p ON p.merchant_id = o.merchant_id AND p.enabled
		LEFT JOIN print_jobs j ON j.order_id = o.id AND j.printer_id = p.id AND j.seq = 1
		WHERE EXISTS (SELECT 1 FROM order_status_history h WHERE h.order_id = o.id AND h.to_status = 'ACCEPTED')
		  AND NOT `+ticketNotOwedYet)
	if err != nil {
		return err
	}
	defer rows.Close()
	accepted := map[paperKey]bool{}
	for rows.Next() {
		var k paperKey
		var status string
		if err := rows.Scan(&k.order, &k.device, &status); err != nil {
			return err
		}
		accepted[k] = true
		t := tally[k]
		switch {
		case status != printing.StatusPrinted:
			f.add(invPrintedOnce, 1, fmt.Sprintf("order %d on %s: ticket %q, not printed", k.order, k.device, status))
		case t.papers == 0:
			f.add(invPrintedOnce, 1, fmt.Sprintf("order %d on %s: printed, and no paper came out", k.order, k.device))
		case t.unmarked > 1:
			f.add(invPrintedOnce, 1, fmt.Sprintf("order %d on %s: %d papers without a reprint mark", k.order, k.device, t.unmarked))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for k, t := range tally {
		if !accepted[k] {
			f.add(invPrintedOnce, 1, fmt.Sprintf("order %d on %s: %d papers of an order never accepted", k.order, k.device, t.papers))
		}
	}
	return nil
}

// printCounts are, for the report, the tickets and papers of the run: a
// run whose faults never made a marked paper proves less.
func printCounts(ctx context.Context, db querier, papers []printsim.Paper) (map[string]int, error) {
	var tickets, printed, unknownAttempts int
	if err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'printed'), count(*) FILTER (WHERE attempt > 1) FROM print_jobs`).
		Scan(&tickets, &printed, &unknownAttempts); err != nil {
		return nil, err
	}
	marked := 0
	for _, t := range tallyPapers(papers) {
		marked += t.papers - t.unmarked
	}
	return map[string]int{"print_tickets": tickets, "print_tickets_printed": printed, "print_tickets_reattempted": unknownAttempts,
		"print_papers": len(papers), "print_papers_marked": marked}, nil
}

// checkKitchen reads the paper printsim kept, holds the run to
// invPrintedOnce, and returns the kitchen's counts for the report: the
// accept deadlines applied, the tickets and papers.
func (st *stack) checkKitchen(ctx context.Context, d *driver, f *findings) (map[string]int, error) {
	// The simulators' books of an hour are tens of megabytes: the check
	// waits for them longer than the workload waits for an answer, and
	// an hour's run is not lost to a slow read at its end.
	client := &http.Client{Timeout: 5 * time.Minute, Transport: d.client.Transport}
	papers, err := fetchPapers(ctx, client, st.wxsimURL)
	if err != nil {
		return nil, err
	}
	if err := checkPrints(ctx, st.direct, papers, f); err != nil {
		return nil, fmt.Errorf("check prints: %w", err)
	}
	counts, err := printCounts(ctx, st.direct, papers)
	if err != nil {
		return nil, fmt.Errorf("print counts: %w", err)
	}
	deadlines, err := acceptDeadlineCounts(ctx, st.direct)
	if err != nil {
		return nil, fmt.Errorf("accept deadline counts: %w", err)
	}
	maps.Copy(counts, deadlines)
	ways, err := fulfilmentCounts(ctx, st.direct)
	if err != nil {
		return nil, fmt.Errorf("fulfilment counts: %w", err)
	}
	maps.Copy(counts, ways)
	shipped, err := checkShipping(ctx, client, st.wxsimURL, st.direct, f)
	if err != nil {
		return nil, fmt.Errorf("check shipping: %w", err)
	}
	maps.Copy(counts, shipped)
	money, err := ledgerCounts(ctx, st.direct)
	if err != nil {
		return nil, err
	}
	maps.Copy(counts, money)
	shared, err := sharingCounts(ctx, st.direct)
	if err != nil {
		return nil, err
	}
	maps.Copy(counts, shared)
	atWeChat, err := checkSharingAtWeChat(ctx, client, st.wxsimURL, st.direct, f)
	if err != nil {
		return nil, fmt.Errorf("check sharing at WeChat: %w", err)
	}
	maps.Copy(counts, atWeChat)
	asked, err := afterSaleCounts(ctx, st.direct)
	if err != nil {
		return nil, err
	}
	maps.Copy(counts, asked)
	couriers, err := checkCouriers(ctx, client, st.wxsimURL, st.direct, f)
	if err != nil {
		return nil, fmt.Errorf("check couriers: %w", err)
	}
	maps.Copy(counts, couriers)
	return counts, nil
}
