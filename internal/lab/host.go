// Package lab is what the bench and the soak share to run takeout on this
// machine and measure it: free ports, child processes with their logs,
// waiting for a server to answer, JSON requests, the PostgreSQL server
// programs, and the facts of the machine for their reports. It is for
// those tools only, never for the service.
package lab

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// HostFacts returns nproc, the CPU model, the Go version and the OS/arch.
func HostFacts() map[string]string {
	m := map[string]string{"nproc": strconv.Itoa(runtime.NumCPU()), "go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if line, _, ok := strings.Cut(string(b), "\n"); ok {
			m["memory"] = strings.Join(strings.Fields(strings.TrimPrefix(line, "MemTotal:")), " ")
		}
	}
	return m
}
