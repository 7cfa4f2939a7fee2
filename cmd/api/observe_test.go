package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/takeout/takeout/internal/payment"
	"github.com/takeout/takeout/internal/wxsim"
)

// ruleFile is the part of a Prometheus rule file the test reads.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Record, Alert, Expr string
		}
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
}

var (
	quoted     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricNames returns the metric and recording-rule names expr reads.
func metricNames(expr string) []string {
	var out []string
	for _, id := range identifier.FindAllString(quoted.ReplaceAllString(expr, `""`), -1) {
		if strings.HasPrefix(id, "takeout_") || strings.Contains(id, ":") {
			out = append(out, id)
		}
	}
	return out
}

// scrape returns the names of the samples an instance exports, and its
// exposition's lines.
func scrape(t *testing.T, inst *instance) (map[string]bool, []string) {
	t.Helper()
	resp, err := http.Get(inst.ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		names[identifier.FindString(line)] = true
		lines = append(lines, line)
	}
	return names, lines
}

// The dashboard and the rules read only metrics a running instance (of
// the service-provider mode) exports (after a submit and a paid
// callback), or rules that record them,
// and every query of the dashboard parses (promtool checks it as a rule).
// The counters the alerts watch are there at 0 before their first event.
func TestDashboardAndRulesNameOnlyExportedMetrics(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: run `make test` (it installs Debian's prometheus package) or apt-get install prometheus")
	}
	// The service-provider mode exports what the merchant mode does and
	// profit sharing's metrics too.
	ps := newPartnerShop(t, nil, 10)
	ps.onboard(t, ps.staffToken(t, "admin"))
	user := ps.login(t, "observed")
	o := ps.place(t, user, "observed", 1)
	ps.pay(t, user, o.ID)
	ps.simPay(t, wxsim.PayRequest{OutTradeNo: payment.OutTradeNo(mustID(t, o.ID), 1), Retries: 5, RetryMS: 20})
	exported, lines := scrape(t, ps.apis[0])
	// The counters alerts take increase() of exist at 0 before their
	// first event (a series born at 1 shows no increase).
	for _, series := range []string{
		`takeout_payment_anomalies_total{kind="refund_amount"} 0`,
		`takeout_payment_anomalies_total{kind="second_transaction"} 0`,
		`takeout_jobs_dead_total{kind="payment.refund"} 0`,
		`takeout_payment_reconcile_checks_total{kind="payment",outcome="failed"} 0`,
		`takeout_payment_callbacks_total{outcome="rejected",source="v3"} 0`,
		`takeout_profit_sharing_total{kind="return",outcome="failed"} 0`,
		`takeout_profit_sharing_failed{kind="return"} 0`,
	} {
		if !slices.Contains(lines, series) {
			t.Errorf("no %s before any such event", series)
		}
	}

	var rules ruleFile
	raw, err := os.ReadFile("../../deploy/prometheus/takeout.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
			exprs = append(exprs, r.Expr)
		}
	}
	var dash dashboard
	raw, err = os.ReadFile("../../deploy/grafana/takeout.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	var panelExprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			panelExprs = append(panelExprs, q.Expr)
		}
	}
	if len(panelExprs) < 10 {
		t.Fatalf("%d dashboard queries, want the main panels", len(panelExprs))
	}

	for _, expr := range slices.Concat(exprs, panelExprs) {
		for _, name := range metricNames(expr) {
			if strings.Contains(name, ":") && !recorded[name] || !strings.Contains(name, ":") && !exported[name] {
				t.Errorf("%q reads %s, which the service does not export and no rule records", expr, name)
			}
		}
	}

	// promtool parses each dashboard query as a recording rule.
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, expr := range panelExprs {
		q, _ := json.Marshal(expr) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	file := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("a dashboard query does not parse: %v\n%s", err, out)
	}
}
