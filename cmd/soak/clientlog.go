package main

import (
	"bufio"
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

// entry is one client-side request and its answer, a line of the client
// log. The invariant checker reads acknowledgements back from it.
type entry struct {
	T        time.Time `json:"t"`
	Op       string    `json:"op"`
	User     int       `json:"user,omitempty"`
	Purchase int64     `json:"purchase,omitempty"`
	Inst     int       `json:"inst"`
	Method   string    `json:"method"`
	Path     string    `json:"path"`
	Key      string    `json:"key,omitempty"`
	Status   int       `json:"status"`
	Ms       float64   `json:"ms"`
	Err      string    `json:"err,omitempty"`
	Order    string    `json:"order,omitempty"`
	Digest   string    `json:"digest,omitempty"`
	Replayed bool      `json:"replayed,omitempty"`
	Problem  string    `json:"problem,omitempty"`
	// Answer is the start of the response body.
	Answer string `json:"answer,omitempty"`
}

// clientLog appends entries as JSON lines and keeps a count per operation
// and status for the report.
type clientLog struct {
	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	counts map[string]map[string]int
}

func openClientLog(path string) (*clientLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600) //nolint:gosec // G304: our work directory
	if err != nil {
		return nil, err
	}
	return &clientLog{f: f, w: bufio.NewWriterSize(f, 1<<20), counts: map[string]map[string]int{}}, nil
}

func (l *clientLog) add(e entry) {
	b, _ := json.Marshal(e)
	status := strconv.Itoa(e.Status)
	if e.Err != "" {
		status = "error"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(b)
	_ = l.w.WriteByte('\n')
	byStatus := l.counts[e.Op]
	if byStatus == nil {
		byStatus = map[string]int{}
		l.counts[e.Op] = byStatus
	}
	byStatus[status]++
}

// snapshot copies the counts.
func (l *clientLog) snapshot() map[string]map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]map[string]int, len(l.counts))
	for op, m := range l.counts {
		c := make(map[string]int, len(m))
		for k, v := range m {
			c[k] = v
		}
		out[op] = c
	}
	return out
}

func (l *clientLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil {
		return err
	}
	return l.f.Close()
}

// total sums an operation's counts; statuses filters them (none: all).
func total(counts map[string]map[string]int, op string, keep func(status string) bool) int {
	n := 0
	for status, c := range counts[op] {
		if keep == nil || keep(status) {
			n += c
		}
	}
	return n
}

func is2xx(status string) bool { return len(status) == 3 && status[0] == '2' }

// ack is a 2xx answer naming an order, read back from the client log.
type ack struct {
	purchase int64
	digest   string
	order    string
	at       time.Time
}

// readAcks reads every acknowledged order of the client log.
func readAcks(path string) ([]ack, error) {
	f, err := os.Open(path) //nolint:gosec // G304: our client log
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ack
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, err
		}
		if e.Op == "submit" && e.Status >= 200 && e.Status < 300 && e.Order != "" {
			out = append(out, ack{purchase: e.Purchase, digest: e.Digest, order: e.Order, at: e.T})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out, sc.Err()
}
