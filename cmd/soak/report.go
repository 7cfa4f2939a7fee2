package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// report is what a soak run found. The first members are the ones the
// issue names; the rest give the detail.
type report struct {
	ViolationsTotal int            `json:"violations_total"`
	Violations      map[string]int `json:"violations"`
	SubmitAttempts  int            `json:"submit_attempts"`
	OrdersCreated   int            `json:"orders_created"`
	CallbacksSent   int64          `json:"callbacks_sent"`
	Instances       int            `json:"instances"`
	DurationS       float64        `json:"duration_s"`
	Faults          map[string]int `json:"faults"`
	Command         string         `json:"command"`
	// RedisMode is standalone (one server behind toxiproxy) or cluster;
	// PGMode is single or patroni.
	RedisMode string `json:"redis_mode"`
	PGMode    string `json:"pg_mode"`
	// Recovery per fault kind: seconds from a fault's start until orders
	// were placed again after the longest pause in placement it caused.
	Recovery map[string]recoveryStat `json:"recovery_s"`
	// Outage per fault kind: seconds its engine had no one serving
	// (slots without a master, no writable primary), where it says.
	Outage map[string]recoveryStat `json:"outage_s,omitempty"`
	// Boards: the merchants' order boards, one per merchant on every
	// instance, following the live order stream.
	Boards boardStats `json:"boards"`

	Started        time.Time                 `json:"started"`
	SettleS        float64                   `json:"settle_s"`
	Users          int                       `json:"users"`
	DupFactor      int                       `json:"dup_factor"`
	HotStock       int                       `json:"hot_stock"`
	Workload       map[string]int            `json:"workload"`
	Requests       map[string]map[string]int `json:"requests"`
	OrdersByStatus map[string]int            `json:"orders_by_status"`
	Examples       map[string][]string       `json:"examples,omitempty"`
	DeadJobs       []deadJob                 `json:"dead_jobs"`
	JobsRetrying   []deadJob                 `json:"jobs_retrying,omitempty"`
	FaultTimeline  []faultEvent              `json:"fault_timeline"`
	Backlog        []backlogSample           `json:"backlog"`
	Machine        map[string]string         `json:"machine"`
	ClientLog      string                    `json:"client_log"`
}

// recoveryStat summarizes one fault kind's figures.
type recoveryStat struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// faultStats gathers the figures pick reads off each event, by kind.
func faultStats(timeline []faultEvent, pick func(faultEvent) *float64) map[string]recoveryStat {
	by := map[string][]float64{}
	for _, ev := range timeline {
		if v := pick(ev); v != nil {
			by[ev.Kind] = append(by[ev.Kind], *v)
		}
	}
	out := map[string]recoveryStat{}
	for k, vs := range by {
		sort.Float64s(vs)
		out[k] = recoveryStat{N: len(vs), Median: round2(vs[len(vs)/2]), Max: round2(vs[len(vs)-1])}
	}
	return out
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

func (r *report) write(dir, name string) (string, string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", "", err
	}
	jsonPath := filepath.Join(dir, name+".json")
	mdPath := filepath.Join(dir, name+".md")
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o600); err != nil { //nolint:gosec // G703: the report directory the operator chose
		return "", "", err
	}
	return jsonPath, mdPath, os.WriteFile(mdPath, []byte(r.markdown()), 0o600) //nolint:gosec // G703: as above
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *report) markdown() string {
	var b strings.Builder
	verdict := "PASS: every invariant holds"
	if r.ViolationsTotal > 0 {
		verdict = fmt.Sprintf("FAIL: %d violations", r.ViolationsTotal)
	}
	fmt.Fprintf(&b, "# Soak run %s\n\n**%s.**\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"), verdict)
	fmt.Fprintf(&b, "Command: `%s`\n\n", r.Command)
	fmt.Fprintf(&b, "%d api instances, %d users, duplicate factor %d, hot dish stock %d; workload %.0f s, then settled %.0f s. Machine: %s, %s CPUs, %s.\n\n",
		r.Instances, r.Users, r.DupFactor, r.HotStock, r.DurationS, r.SettleS, r.Machine["cpu"], r.Machine["nproc"], r.Machine["go"])
	b.WriteString("## Workload\n\n| what | count |\n|---|---:|\n")
	fmt.Fprintf(&b, "| submit attempts | %d |\n| orders created | %d |\n| callbacks sent (HTTP deliveries) | %d |\n",
		r.SubmitAttempts, r.OrdersCreated, r.CallbacksSent)
	for _, k := range sortedKeys(r.Workload) {
		fmt.Fprintf(&b, "| %s | %d |\n", strings.ReplaceAll(k, "_", " "), r.Workload[k])
	}
	b.WriteString("\nOrders by final status: ")
	var parts []string
	for _, k := range sortedKeys(r.OrdersByStatus) {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.OrdersByStatus[k]))
	}
	b.WriteString(strings.Join(parts, ", ") + ".\n\n")
	b.WriteString("Answers by operation (status: count):\n\n| operation | answers |\n|---|---|\n")
	for _, op := range sortedKeys(r.Requests) {
		var s []string
		for _, st := range sortedKeys(r.Requests[op]) {
			s = append(s, fmt.Sprintf("%s: %d", st, r.Requests[op][st]))
		}
		fmt.Fprintf(&b, "| %s | %s |\n", op, strings.Join(s, ", "))
	}
	fmt.Fprintf(&b, "\nOrder boards: %d (one per merchant on every instance), %d events received over %d connections; paid orders missed on a board %d, events repeated %d.\n",
		r.Boards.Boards, r.Boards.Events, r.Boards.Connects, r.Boards.Missed, r.Boards.Repeats)
	r.faultsMarkdown(&b)
	backlogMarkdown(&b, r.Backlog)
	b.WriteString("\n## Invariants\n\n| invariant | violations |\n|---|---:|\n")
	for _, inv := range invariantOrder {
		fmt.Fprintf(&b, "| %s | %d |\n", strings.ReplaceAll(inv, "_", " "), r.Violations[inv])
	}
	if len(r.Examples) > 0 {
		b.WriteString("\n## Examples of violations\n\n")
		for _, inv := range sortedKeys(r.Examples) {
			for _, e := range r.Examples[inv] {
				fmt.Fprintf(&b, "- %s: %s\n", inv, e)
			}
		}
	}
	if len(r.DeadJobs) > 0 {
		b.WriteString("\n## Dead jobs\n\n| id | kind | last error |\n|---:|---|---|\n")
		for _, j := range r.DeadJobs {
			fmt.Fprintf(&b, "| %d | %s | %s |\n", j.ID, j.Kind, j.Errors)
		}
	} else {
		b.WriteString("\nDead jobs: none.\n")
	}
	if len(r.JobsRetrying) > 0 {
		b.WriteString("\n## Jobs still retrying at the end\n\n| id | job | last error |\n|---:|---|---|\n")
		for _, j := range r.JobsRetrying {
			fmt.Fprintf(&b, "| %d | %s | %s |\n", j.ID, j.Kind, j.Errors)
		}
	}
	return b.String()
}

// faultsMarkdown writes the faults section: each kind's count, recovery,
// outage and failures to heal, then each failure.
func (r *report) faultsMarkdown(b *strings.Builder) {
	fmt.Fprintf(b, "\n## Faults injected\n\nRedis %s, PostgreSQL %s. Recovery: seconds from a fault's start until orders were placed again after the longest pause in placement that followed it (orders' created_at), 0 when placement never stopped for a second; outage: seconds the engine had no master for some slots or no writable primary (median / max).\n\n", r.RedisMode, r.PGMode)
	failed := map[string]int{}
	for _, ev := range r.FaultTimeline {
		if ev.Error != "" {
			failed[ev.Kind]++
		}
	}
	b.WriteString("| fault | times | recovery | outage | did not heal in time |\n|---|---:|---:|---:|---:|\n")
	for _, k := range sortedKeys(r.Faults) {
		rec, out := "-", "-"
		if s, ok := r.Recovery[k]; ok {
			rec = fmt.Sprintf("%.2f / %.2f", s.Median, s.Max)
		}
		if s, ok := r.Outage[k]; ok {
			out = fmt.Sprintf("%.2f / %.2f", s.Median, s.Max)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %d |\n", k, r.Faults[k], rec, out, failed[k])
	}
	for _, ev := range r.FaultTimeline {
		if ev.Error != "" {
			fmt.Fprintf(b, "\n- %s at %.0f s: %s", ev.Kind, ev.AtS, ev.Error)
		}
	}
	if len(failed) > 0 {
		b.WriteString("\n")
	}
}
