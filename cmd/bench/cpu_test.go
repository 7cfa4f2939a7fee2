package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// writeStat writes a /proc/<pid>/stat line with the given name and times
// (in clock ticks) under dir.
func writeStat(t *testing.T, dir string, pid, comm string, utime, stime, cutime, cstime string) {
	t.Helper()
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime priority ...
	line := pid + " (" + comm + ") S 1 1 1 0 -1 4194560 100 0 0 0 " + strings.Join([]string{utime, stime, cutime, cstime}, " ") + " 20 0 1 0 5 0\n"
	if err := os.MkdirAll(filepath.Join(dir, pid), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pid, "stat"), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReadStat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeStat(t, dir, "7", "odd (name) x", "150", "50", "30", "20")
	got, ok := readStat(filepath.Join(dir, "7", "stat"))
	want := procStat{comm: "odd (name) x", own: 2 * time.Second, children: 500 * time.Millisecond}
	if !ok || got != want {
		t.Errorf("readStat = %+v, %t; want %+v", got, ok, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "7", "stat"), []byte("7 (short) S 1 2 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, ok := readStat(filepath.Join(dir, "7", "stat")); ok {
		t.Errorf("readStat of a short line = %+v, want nothing", got)
	}
	if _, ok := readStat(filepath.Join(dir, "8", "stat")); ok {
		t.Error("readStat of a process that is gone read something")
	}
}

func TestProcessCPUGroupsTheServers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeStat(t, dir, "100", "api", "300", "100", "0", "0")
	writeStat(t, dir, "200", "postgres", "10", "10", "500", "100") // the postmaster: exited backends in its children's times
	writeStat(t, dir, "201", "postgres", "40", "60", "0", "0")
	writeStat(t, dir, "300", "redis-server", "7", "3", "0", "0")
	writeStat(t, dir, "400", "bash", "999", "999", "0", "0")
	got := processCPU(dir, map[string]int{"api": 100, "hello": 101})()
	if got["load"] <= 0 {
		t.Errorf("load = %v, want this process's CPU time", got["load"])
	}
	delete(got, "load")
	want := cpuTimes{"api": 4 * time.Second, "postgres": 7200 * time.Millisecond, "redis": 100 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("processCPU (-want +got):\n%s", diff)
	}
}

func TestCPUTimesArithmetic(t *testing.T) {
	t.Parallel()
	before := cpuTimes{"api": time.Second, "postgres": 2 * time.Second}
	after := cpuTimes{"api": 3 * time.Second, "postgres": 5 * time.Second, "redis": time.Second}
	d := after.sub(before)
	if diff := cmp.Diff(cpuTimes{"api": 2 * time.Second, "postgres": 3 * time.Second, "redis": time.Second}, d); diff != "" {
		t.Errorf("sub (-want +got):\n%s", diff)
	}
	var sum cpuTimes
	sum = sum.add(d).add(d)
	if diff := cmp.Diff(map[string]float64{"api": 1000, "postgres": 1500, "redis": 500}, sum.perRequest(4000)); diff != "" {
		t.Errorf("perRequest (-want +got):\n%s", diff)
	}
	if got := sum.perRequest(0); got != nil {
		t.Errorf("perRequest(0) = %v, want nil", got)
	}
	if got := cpuTimes(nil).perRequest(10); got != nil {
		t.Errorf("nil.perRequest = %v, want nil", got)
	}
}

func TestClosedLoopMetersItsMeasuredPartOnly(t *testing.T) {
	t.Parallel()
	calls := 0
	// Each reading is a second of api CPU later than the one before.
	meter := func() cpuTimes { calls++; return cpuTimes{"api": time.Duration(calls) * time.Second} }
	op := func(context.Context, int, int64) error { return nil }
	s := closedScenario("t", 2, nil, meter, op)
	rs, err := interleaved(context.Background(), 2, 30*time.Millisecond, 60*time.Millisecond, 3, []scenario{s}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 6 {
		t.Errorf("meter read %d times, want twice a round (after the warmup, after the window)", calls)
	}
	n := float64(rs[0].Requests + rs[0].Errors)
	if want := 3 * 1e6 / n; rs[0].CPUUsPerRequest["api"] < want-0.1 || rs[0].CPUUsPerRequest["api"] > want+0.1 {
		t.Errorf("api CPU per request = %v µs, want 3 s over %v requests: %v", rs[0].CPUUsPerRequest["api"], n, want)
	}
}
