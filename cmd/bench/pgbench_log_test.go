package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadPgbenchLog(t *testing.T) {
	t.Parallel()
	// client_id transaction_no time script_no time_epoch time_us [schedule_lag]
	log := "0 0 1500 0 1796097000 2000\n" +
		"1 0 250 0 1796097000 900000 40\n" +
		"0 1 failed 0 1796097001 5\n"
	path := filepath.Join(t.TempDir(), "log.1")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readPgbenchLog(path)
	if err != nil {
		t.Fatal(err)
	}
	end := func(sec, usec int64) time.Time { return time.Unix(sec, usec*1000) }
	want := []pgbenchTx{
		{start: end(1796097000, 500), lat: 1500 * time.Microsecond},
		{start: end(1796097000, 899750), lat: 250 * time.Microsecond},
		{start: end(1796097001, 5), failed: true},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(pgbenchTx{})); diff != "" {
		t.Errorf("readPgbenchLog (-want +got):\n%s", diff)
	}

	if err := os.WriteFile(path, []byte("0 0 12 0 soon 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readPgbenchLog(path); err == nil {
		t.Error("readPgbenchLog read a line with no end time")
	}
}

func TestMeasuredPartIsTheWindowAfterWarmup(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1796097000, 0)
	tx := func(at time.Duration, lat time.Duration) pgbenchTx { return pgbenchTx{start: t0.Add(at), lat: lat} }
	txs := []pgbenchTx{
		tx(300*time.Millisecond, 7*time.Millisecond), // warmup
		tx(0, 100*time.Millisecond),                  // the first start: a cold connection, warmup
		tx(time.Second, 2*time.Millisecond),          // the window's first moment
		{start: t0.Add(1500 * time.Millisecond), failed: true},
		tx(2999*time.Millisecond, 3*time.Millisecond), // its last
		tx(3*time.Second, 4*time.Millisecond),         // after it
	}
	lat, failed := measuredPart(txs, time.Second, 2*time.Second)
	if diff := cmp.Diff([]time.Duration{2 * time.Millisecond, 3 * time.Millisecond}, lat); diff != "" {
		t.Errorf("latencies (-want +got):\n%s", diff)
	}
	if failed != 1 {
		t.Errorf("failed = %d, want 1", failed)
	}
	if lat, failed := measuredPart(nil, time.Second, time.Second); lat != nil || failed != 0 {
		t.Errorf("measuredPart(nothing) = %v, %d", lat, failed)
	}
}
