package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/takeout/takeout/internal/payment"
)

// namedQueries reads db/queries/*.sql into name -> SQL (comments dropped).
func namedQueries(dir string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no queries in %s: %w", dir, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // G304: the repository's query files
		if err != nil {
			return nil, err
		}
		name := ""
		var body []string
		flush := func() {
			if name != "" {
				out[name] = strings.TrimSpace(strings.Join(body, "\n"))
			}
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "-- name: "); ok {
				flush()
				name, body = strings.Fields(rest)[0], nil
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue
			}
			body = append(body, line)
		}
		flush()
	}
	return out, nil
}

var paramRE = regexp.MustCompile(`sqlc\.n?arg\('?(\w+)'?\)|@(\w+)`)

// bind replaces a query's named parameters with pgbench expressions and
// fails when one has no value: the script runs the service's own SQL.
func bind(queries map[string]string, name string, values map[string]string) (string, error) {
	q, ok := queries[name]
	if !ok {
		return "", fmt.Errorf("query %s not found in db/queries", name)
	}
	var missing []string
	out := paramRE.ReplaceAllStringFunc(q, func(m string) string {
		sub := paramRE.FindStringSubmatch(m)
		p := sub[1] + sub[2]
		v, ok := values[p]
		if !ok {
			missing = append(missing, p)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("query %s: no value for %v", name, missing)
	}
	// pgbench takes one command per line, without its semicolon before \gset.
	return strings.TrimSuffix(strings.Join(strings.Fields(out), " "), ";"), nil
}

// submitScript is the placement transaction as submit runs it: the order,
// its reservation, item, first history row and idempotency record, and
// the stock last (the first try of
// inventory.Take: one free shard, in a savepoint). The
// service sends the statements from the reservation on in one round trip;
// pgbench sends one at a time.
func submitScript(queries map[string]string, merchantID int64, dishes []int64) (string, error) {
	digest := func(salt string) string {
		return fmt.Sprintf("decode(md5(CAST(:oid AS text) || '%s') || md5(CAST(:uid AS text) || '%s'), 'hex')", salt, salt)
	}
	steps := []struct {
		name string
		vals map[string]string
	}{
		{"OrderInsert", map[string]string{
			"id": ":oid", "user_id": ":uid", "merchant_id": strconv.FormatInt(merchantID, 10),
			"intent_digest": digest("i"), "content_digest": digest("c"), "intent_seq": "1", "digest_alg": "'SM3'",
			"items_total_fen": "1000", "packaging_fee_fen": "0", "delivery_fee_fen": "300", "total_fen": "1300",
			"address": `'{"name":"Bench","phone":"13800138000","detail":"1 Bench Road"}'`, "remark": "''",
			"pay_deadline": "now() + interval '15 minutes'", "created_at": "now()",
			"voucher_id": "NULL", "discount_fen": "0", "platform_discount_fen": "0", "merchant_discount_fen": "0", "promotions": "NULL",
			"fulfilment": "'delivery'", "pickup_day": "NULL", "pickup_no": "NULL", "slot_start": "NULL", "slot_end": "NULL",
		}},
		{"ReservationInsert", map[string]string{"order_id": ":oid", "dish_id": ":dish", "qty": "1"}},
		{"OrderItemInsert", map[string]string{"order_id": ":oid", "line": "0", "dish_id": ":dish", "name": "'Dish'", "qty": "1",
			"unit_price_fen": "1000", "line_total_fen": "1000", "options": "'[]'", "packaging_fee_fen": "0", "discount_fen": "0"}},
		{"OrderHistoryInsert", map[string]string{"order_id": ":oid", "from_status": "NULL", "to_status": "'PENDING_PAYMENT'",
			"version": "1", "actor": "'user:' || CAST(:uid AS text)", "reason": "'placed'"}},
		{"IdempotencyRecordInsert", map[string]string{"user_id": ":uid", "key": "'k' || CAST(:oid AS text)", "fingerprint": digest("f"),
			"digest_alg": "'SM3'", "order_id": ":oid", "status_code": "201",
			"headers": `'{"Content-Type":"application/json"}'`, "body": "convert_to(repeat('x', 520), 'UTF8')",
			"expires_at": "now() + interval '72 hours'"}},
		{"StockSavepoint", nil},
		{"StockTakeFree", map[string]string{"qty": "1", "dish_id": ":dish", "merchant_id": strconv.FormatInt(merchantID, 10), "quote_version": "1", "price_fen": "1000",
			"packaging_fee_fen": "0", "options_version": "1", "start": ":shard"}},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\\set oid random(1, 9000000000000000000)\n\\set uid random(1, 64)\n\\set dish random(%d, %d)\n\\set shard random(0, 31)\n", slices.Min(dishes), slices.Max(dishes))
	b.WriteString("BEGIN;\n")
	for _, s := range steps {
		q, err := bind(queries, s.name, s.vals)
		if err != nil {
			return "", err
		}
		b.WriteString(q + ";\n")
	}
	b.WriteString("COMMIT;\n")
	return b.String(), nil
}

// callbackScript is the transaction a payment callback runs: lock the
// payment, record the notification and mark the payment paid (one
// statement), read the order, move it to PAID with its history row and
// read its items. Payments come from a sequence, one per transaction (a
// callback pays a new order).
func callbackScript(queries map[string]string, mchid string) (string, error) {
	steps := []struct {
		name, gset string
		vals       map[string]string
	}{
		{"PaymentGetByOutTradeNoForUpdate", "p_", map[string]string{"channel": "'" + payment.Channel + "'", "mchid": "'" + mchid + "'", "out_trade_no": "'PB' || CAST(:n AS text)"}},
		{"PaymentRecordSuccess", "", map[string]string{"channel": "'" + payment.Channel + "'", "notification_id": "'EV-PB' || CAST(:n AS text)",
			"transaction_id": "'42' || CAST(:n AS text)", "order_id": ":p_order_id", "paid_at": "now()", "payment_id": ":p_id"}},
		{"OrderGetByID", "o_", map[string]string{"id": ":p_order_id"}},
		{"OrderTransition", "", map[string]string{"to_status": "'PAID'", "id": ":p_order_id", "from_status": "'PENDING_PAYMENT'", "version": ":o_version",
			"start_accept_deadline": "true", "accept_deadline_applied": "false"}},
		{"OrderHistoryInsert", "", map[string]string{"order_id": ":p_order_id", "from_status": "'PENDING_PAYMENT'", "to_status": "'PAID'",
			"version": "CAST(:o_version AS bigint) + 1", "actor": "'payment' || chr(58) || 'v3'", "reason": "'paid'"}},
		{"OrderItemsByOrder", "", map[string]string{"order_id": ":p_order_id"}},
	}
	var b strings.Builder
	b.WriteString("SELECT nextval('bench_callback_seq') AS n \\gset\nBEGIN;\n")
	for _, s := range steps {
		q, err := bind(queries, s.name, s.vals)
		if err != nil {
			return "", err
		}
		if s.gset != "" {
			b.WriteString(q + " \\gset " + s.gset + "\n")
		} else {
			b.WriteString(q + ";\n")
		}
	}
	b.WriteString("COMMIT;\n")
	return b.String(), nil
}

// pgbenchScenario is pgbench running script from conc clients, for
// interleaved: in a closed loop, or at rate per second when rate > 0.
// With a meter, each window holds the CPU time of the whole pgbench run
// (connections and warmup included) in the share of its transactions
// that were measured.
func pgbenchScenario(bin, dbURL, name, script string, conc int, rate float64, work string, before func() error, meter cpuMeter) scenario {
	return scenario{name: name, before: before, measure: func(ctx context.Context, warmup, d time.Duration) (window, error) {
		var cpu cpuTimes
		if meter != nil {
			cpu = meter()
		}
		w, all, err := pgbenchWindow(ctx, bin, dbURL, name, script, conc, rate, warmup, d, work)
		if meter != nil && err == nil && all > 0 {
			share := float64(len(w.lat)+w.errors) / float64(all)
			w.cpu = cpuTimes{}
			for k, v := range meter().sub(cpu) {
				w.cpu[k] = time.Duration(float64(v) * share)
			}
		}
		return w, err
	}}
}

// pgbenchWindow runs pgbench with script from conc clients (at rate per
// second in an open loop when rate > 0; closed otherwise) and measures the
// transactions that started from warmup after its first one to warmup+d
// after it, read from its per-transaction log. Warmup and measurement are
// one process, as the API's are one pool: a pgbench started afresh for the
// measured part would spend its first moments connecting and preparing
// its statements on cold backends, a cost the API, whose connections
// outlive a window, does not pay inside one. It also returns how many
// transactions the whole run logged.
func pgbenchWindow(ctx context.Context, bin, dbURL, name, script string, conc int, rate float64, warmup, d time.Duration, work string) (w window, transactions int, err error) {
	dir := filepath.Join(work, fmt.Sprintf("pgbench-%s-%d", name, conc))
	// Logs of an earlier run must not mix into this one's latencies.
	if err := os.RemoveAll(dir); err != nil {
		return window{}, 0, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return window{}, 0, err
	}
	scriptPath := filepath.Join(dir, name+".sql")
	if err := os.WriteFile(scriptPath, []byte(script), 0o600); err != nil {
		return window{}, 0, err
	}
	// -T takes whole seconds; the second over covers the end of the window.
	secs := int(math.Ceil((warmup + d).Seconds())) + 1
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(conc), "-j", "2", "-T", strconv.Itoa(secs), "-f", scriptPath,
		"-l", "--log-prefix", filepath.Join(dir, "log")}
	if rate > 0 {
		args = append(args, "-R", strconv.FormatFloat(rate, 'f', 0, 64))
	}
	args = append(args, dbURL)
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "pgbench"), args...).CombinedOutput() //nolint:gosec // G204: pgbench
	if err != nil {
		return window{}, 0, fmt.Errorf("pgbench %s: %w: %s", name, err, out)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "log.*"))
	if err != nil {
		return window{}, 0, err
	}
	var txs []pgbenchTx
	for _, l := range logs {
		t, err := readPgbenchLog(l)
		if err != nil {
			return window{}, 0, err
		}
		txs = append(txs, t...)
	}
	w = window{elapsed: d}
	w.lat, w.errors = measuredPart(txs, warmup, d)
	w.note = fmt.Sprintf("pgbench -M prepared -c %d -j 2, the service's SQL (db/queries) in one transaction per request", conc)
	if rate > 0 {
		w.note += fmt.Sprintf("; open loop at %.0f/s (-R)", rate)
	}
	return w, len(txs), nil
}

// pgbenchTx is one line of pgbench's per-transaction log: when the
// transaction started (when it was due, with -R) and its latency, or that
// it failed.
type pgbenchTx struct {
	start  time.Time
	lat    time.Duration
	failed bool
}

// readPgbenchLog reads a pgbench -l log, whose lines are
// "client_id transaction_no time script_no time_epoch time_us
// [schedule_lag]": time is the latency in microseconds (with -R it runs
// from the scheduled start, so it includes schedule_lag, as the API's open
// loop measures it) or a word saying why the transaction failed, and
// time_epoch.time_us is when the transaction ended.
func readPgbenchLog(path string) ([]pgbenchTx, error) {
	f, err := os.Open(path) //nolint:gosec // G304: pgbench's log in our work directory
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var txs []pgbenchTx
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		sec, err1 := strconv.ParseInt(fields[4], 10, 64)
		usec, err2 := strconv.ParseInt(fields[5], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		end := time.Unix(sec, usec*1000)
		us, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil { // "failed", "serialization", "deadlock"
			txs = append(txs, pgbenchTx{start: end, failed: true})
			continue
		}
		lat := time.Duration(us) * time.Microsecond
		txs = append(txs, pgbenchTx{start: end.Add(-lat), lat: lat})
	}
	return txs, sc.Err()
}

// measuredPart is the latencies of the transactions that started in
// [first+warmup, first+warmup+d), where first is the earliest start, and
// how many in it failed.
func measuredPart(txs []pgbenchTx, warmup, d time.Duration) (lat []time.Duration, failed int) {
	if len(txs) == 0 {
		return nil, 0
	}
	first := txs[0].start
	for _, t := range txs {
		if t.start.Before(first) {
			first = t.start
		}
	}
	from, to := first.Add(warmup), first.Add(warmup+d)
	for _, t := range txs {
		switch {
		case t.start.Before(from) || !t.start.Before(to):
		case t.failed:
			failed++
		default:
			lat = append(lat, t.lat)
		}
	}
	return lat, failed
}

// perTransaction counts each transaction of a pgbench scenario whose
// script does per requests' work (a grouped floor) as per requests, each
// of which waited the transaction's latency: its throughput and CPU per
// request are then per order, as the api's are.
func perTransaction(s scenario, per int) scenario {
	measure := s.measure
	s.measure = func(ctx context.Context, warmup, d time.Duration) (window, error) {
		w, err := measure(ctx, warmup, d)
		if err != nil || per <= 1 {
			return w, err
		}
		lat := make([]time.Duration, 0, len(w.lat)*per)
		for _, l := range w.lat {
			for range per {
				lat = append(lat, l)
			}
		}
		w.lat, w.errors = lat, w.errors*per
		w.note += fmt.Sprintf("; %d orders per transaction, each counted as a request", per)
		return w, nil
	}
	return s
}
