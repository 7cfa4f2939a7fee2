package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTimes is CPU time (user and system) by process group: the server
// under test ("api" or "hello"), "postgres" (every process of the
// cluster, with the backends that exited), "redis" and "load" (this load
// generator).
type cpuTimes map[string]time.Duration

// sub is what was used from before to t.
func (t cpuTimes) sub(before cpuTimes) cpuTimes {
	out := cpuTimes{}
	for k, v := range t {
		out[k] = v - before[k]
	}
	return out
}

// add sums u into t.
func (t cpuTimes) add(u cpuTimes) cpuTimes {
	if t == nil {
		t = cpuTimes{}
	}
	for k, v := range u {
		t[k] += v
	}
	return t
}

// perRequest is t over n requests, in microseconds; nil when there is
// nothing to divide.
func (t cpuTimes) perRequest(n int) map[string]float64 {
	if t == nil || n == 0 {
		return nil
	}
	out := make(map[string]float64, len(t))
	for k, v := range t {
		out[k] = math.Round(float64(v.Microseconds())/float64(n)*10) / 10
	}
	return out
}

// cpuMeter reads the CPU times the processes of a run have used so far.
type cpuMeter func() cpuTimes

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on
// every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// processCPU meters the given processes by pid (named by their keys), the
// PostgreSQL and Redis servers found by name in /proc, and this process
// with its exited children (pgbench).
// A CPU-bound ratio to a floor says only that one side did more work per
// request; the split says whose work it was.
func processCPU(proc string, pids map[string]int) cpuMeter {
	return func() cpuTimes {
		t := cpuTimes{}
		for name, pid := range pids {
			if st, ok := readStat(filepath.Join(proc, strconv.Itoa(pid), "stat")); ok {
				t[name] = st.own
			}
		}
		dirs, _ := filepath.Glob(filepath.Join(proc, "[0-9]*", "stat"))
		for _, path := range dirs {
			st, ok := readStat(path)
			if !ok {
				continue
			}
			switch st.comm {
			case "postgres":
				// A backend that exits is reaped by the postmaster, whose
				// children's times then hold it.
				t["postgres"] += st.own + st.children
			case "redis-server":
				t["redis"] += st.own
			}
		}
		// The load is this process, or pgbench: a child, counted once it
		// has exited and been waited for.
		for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
			var ru syscall.Rusage
			if err := syscall.Getrusage(who, &ru); err == nil {
				t["load"] += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
		}
		return t
	}
}

// procStat is what processCPU reads of /proc/<pid>/stat.
type procStat struct {
	comm     string
	own      time.Duration // utime + stime
	children time.Duration // cutime + cstime: children waited for
}

// readStat reads /proc/<pid>/stat: "pid (comm) state ppid ...", where
// utime, stime, cutime and cstime are fields 14-17 and comm may hold
// spaces and parentheses (so it ends at the last ')').
func readStat(path string) (procStat, bool) {
	b, err := os.ReadFile(path) //nolint:gosec // G304: a /proc file
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	// After ") " come the fields from 3 (state) on.
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return procStat{}, false
	}
	var v [4]int64
	for i := range v {
		n, err := strconv.ParseInt(f[11+i], 10, 64)
		if err != nil {
			return procStat{}, false
		}
		v[i] = n
	}
	return procStat{comm: s[open+1 : end], own: time.Duration(v[0]+v[1]) * clockTick, children: time.Duration(v[2]+v[3]) * clockTick}, true
}
