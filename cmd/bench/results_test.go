package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The floor targets compare each side at its best concurrency, the others
// the two sides at 64 clients; the context ratios give the floor at 16 and
// 64 and the api at 64 against pgbench running takeout's own SQL at its
// best. The half-rate tail is the median of the rounds' pairs; submit at
// 128 clients is held against submit at its best.
func TestFinishRatios(t *testing.T) {
	r := results{Results: []result{
		{Scenario: "pgbench_submit", Concurrency: 16, Throughput: 1000},
		{Scenario: "pgbench_submit", Concurrency: 64, Throughput: 250},
		{Scenario: "submit", Concurrency: 16, Throughput: 900},
		{Scenario: "submit", Concurrency: 64, Throughput: 700, CPUUsPerRequest: map[string]float64{"api": 480, "postgres": 800}},
		{Scenario: "hot_dish", Concurrency: 64, Throughput: 500},
		{Scenario: "pgbench_callback", Concurrency: 16, Throughput: 2000},
		{Scenario: "pgbench_callback", Concurrency: 64, Throughput: 2500},
		{Scenario: "callback", Concurrency: 64, Throughput: 1000},
		{Scenario: "floor_place", Concurrency: 16, Throughput: 1500},
		{Scenario: "floor_place", Concurrency: 64, Throughput: 1000},
		{Scenario: "floor_pay", Concurrency: 16, Throughput: 2000},
		{Scenario: "floor_pay", Concurrency: 64, Throughput: 4000},
		{Scenario: "floor_hot", Concurrency: 64, Throughput: 300},
		{Scenario: "submit_half_rate", Concurrency: 64, P50Ms: 2, P99Ms: 8, RoundTails: []float64{3, 6, 4}},
		{Scenario: "floor_place_half_rate", Concurrency: 64, P50Ms: 1, P99Ms: 4, RoundTails: []float64{2, 3, 4}},
		{Scenario: "pgbench_submit_half_rate", Concurrency: 64, P50Ms: 2, P99Ms: 5},
		{Scenario: "submit_128", Concurrency: 128, Throughput: 810},
		{Scenario: "submit_128_instances", Concurrency: 128, Throughput: 630},
	}}
	r.finish()
	want := map[string]float64{
		"submit_vs_floor":                          0.6,   // 900 / 1500
		"callback_vs_floor":                        0.25,  // 1000 / 4000
		"hot_dish_vs_submit":                       0.714, // 500 / 700
		"submit_vs_floor_16":                       0.6,
		"submit_vs_floor_64":                       0.7,
		"callback_vs_floor_64":                     0.25,
		"submit_vs_pgbench_16":                     0.9,
		"submit_vs_pgbench_64":                     2.8,
		"floor_hot_vs_floor_place_best":            0.2,
		"submit_vs_pgbench_best":                   0.7,
		"callback_vs_pgbench_best":                 0.4,
		"submit_p99_over_p50_at_half_rate":         4,
		"pgbench_submit_p99_over_p50_at_half_rate": 2.5,
		"floor_place_p99_over_p50_at_half_rate":    4,
		"half_rate_tail_vs_floor":                  1.5, // the pairs 1.5, 2, 1: their median
		"submit_128_vs_best":                       0.9, // 810 / 900
		"submit_128_instances_vs_best":             0.7, // context, not a target
		"api_cpu_us_per_submit":                    480,
	}
	if diff := cmp.Diff(want, r.Ratios); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	met := map[string]bool{}
	for _, x := range r.Targets {
		met[x.Name] = x.Met
	}
	wantMet := map[string]bool{
		"submit_vs_floor >= 0.6":          true,
		"callback_vs_floor >= 0.6":        false,
		"hot_dish_vs_submit >= 0.8":       false,
		"half_rate_tail_vs_floor <= 1.25": false,
		"submit_128_vs_best >= 0.9":       true,
		"api_cpu_us_per_submit <= 350":    false,
	}
	if diff := cmp.Diff(wantMet, met); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	md := r.markdown()
	for _, s := range []string{"submit_vs_floor_64 0.700", "submit_vs_pgbench_best 0.700", "callback_vs_pgbench_best 0.400", "pgbench_submit_p99_over_p50_at_half_rate 2.500"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
}

// Submit at 128 clients is held against submit at its best as of the
// moments it ran: submit at 64 taking turns with it, scaled by the main
// run's best over its 64; without that turn, against the main run's best.
func TestSubmit128AgainstSubmitInItsMoments(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		beside float64 // submit_beside_128's throughput; 0 for none
		want   float64
	}{
		{"no turns", 0, 0.9},            // 810 / 900
		{"a slower moment", 560, 1.125}, // 810 / (560 x 900 / 700)
		{"a faster moment", 1050, 0.6},  // 810 / (1050 x 900 / 700)
	} {
		r := results{Results: []result{
			{Scenario: "submit", Concurrency: 16, Throughput: 900},
			{Scenario: "submit", Concurrency: 64, Throughput: 700},
			{Scenario: "submit_128", Concurrency: 128, Throughput: 810},
		}}
		if c.beside > 0 {
			r.Results = append(r.Results, result{Scenario: "submit_beside_128", Concurrency: 64, Throughput: c.beside})
		}
		r.finish()
		if got := r.Ratios["submit_128_vs_best"]; got != c.want {
			t.Errorf("%s: submit_128_vs_best %v, want %v", c.name, got, c.want)
		}
	}
}
