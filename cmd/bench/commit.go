package main

import (
	"context"
	"fmt"
	"time"
)

// commitProbe is the disk's commit latency as PostgreSQL sees it: one
// client inserting one row per transaction (synchronous commit, as every
// scenario runs), so each transaction's latency is a WAL flush and little
// else. A ratio in time is read beside it: a run in an hour when a commit
// takes 4 ms is not one in an hour when it takes 0.4.
type commitProbe struct {
	At      time.Time `json:"at"`
	Commits int       `json:"commits"`
	MeanMs  float64   `json:"mean_ms"`
	P50Ms   float64   `json:"p50_ms"`
	P99Ms   float64   `json:"p99_ms"`
}

// commitLatency is the probe before and after the run's scenarios.
type commitLatency struct {
	Before *commitProbe `json:"before,omitempty"`
	After  *commitProbe `json:"after,omitempty"`
}

// probeScript is the one-row transaction the probe commits.
const probeScript = "INSERT INTO commit_probe (at) VALUES (clock_timestamp());\n"

// probeCommits measures the commit latency for d on the floor's database.
func (e *env) probeCommits(ctx context.Context, name string, d time.Duration) (*commitProbe, error) {
	if _, err := e.floorDB.Exec(ctx, "CREATE TABLE IF NOT EXISTS commit_probe (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL)"); err != nil {
		return nil, fmt.Errorf("commit probe: %w", err)
	}
	w, _, err := pgbenchWindow(ctx, e.pgBin, e.floorURL, name, probeScript, 1, 0, 500*time.Millisecond, d, e.work)
	if err != nil {
		return nil, err
	}
	if len(w.lat) == 0 {
		return nil, fmt.Errorf("commit probe %s: no commit in %s", name, d)
	}
	var r result
	r.summarize(w.lat, w.elapsed)
	var sum time.Duration
	for _, l := range w.lat {
		sum += l
	}
	return &commitProbe{At: time.Now().UTC(), Commits: len(w.lat), MeanMs: ms(sum / time.Duration(len(w.lat))), P50Ms: r.P50Ms, P99Ms: r.P99Ms}, nil
}
