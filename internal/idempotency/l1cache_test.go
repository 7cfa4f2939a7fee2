package idempotency

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"pgregory.net/rapid"
)

// testClock is a clock tests move by hand.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// get is the record c holds under key, copied out of the ring.
func get(c *l1Cache, key string) (Record, bool) {
	var rec Record
	ok := c.view(key, func(e l1Entry) { rec = e.clone().record() })
	return rec, ok
}

// answer is a record that says which key and which write it answers.
func answer(key string, version, bodyBytes int) Record {
	body := []byte(fmt.Sprintf("%s#%d|", key, version))
	body = append(body, strings.Repeat("b", max(0, bodyBytes-len(body)))...)
	return Record{Fingerprint: []byte("fp-" + key), Request: "token-" + key, OrderID: int64(version),
		Response: Response{Status: 201, Body: body, Headers: map[string]string{"Location": "/v1/orders/" + key}}}
}

func TestL1CacheKeepsWhatItIsGiven(t *testing.T) {
	t.Parallel()
	cases := map[string]Record{
		"a submit's answer": answer("k", 1, 500),
		"empty":             {},
		"no headers":        {Fingerprint: []byte{0, 1}, Response: Response{Status: 422, Body: []byte(`{"type":"x"}`)}},
		"binary body":       {Response: Response{Status: 200, Body: []byte{0, 0xff, 0, 0xfe}}},
		"negative order":    {OrderID: -5, Response: Response{Status: 599}},
	}
	c := newL1Cache(4<<20, time.Hour, time.Now)
	for name, rec := range cases {
		if !c.set(name, rec) {
			t.Fatalf("%s: not kept", name)
		}
	}
	for name, rec := range cases {
		got, ok := get(c, name)
		if !ok {
			t.Errorf("%s: missing", name)
			continue
		}
		if diff := cmp.Diff(rec, plainRecord(got), cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(Response{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if _, ok := get(c, "absent"); ok {
		t.Error("a key never set was found")
	}
}

// What a reader copies out of the ring stays as it was when the ring's
// memory is written over.
func TestL1CacheCopiesOutlastTheRing(t *testing.T) {
	t.Parallel()
	c := newL1Cache(1<<20, time.Hour, time.Now)
	c.set("first", answer("first", 1, 200))
	var resp Response
	var rec Record
	c.view("first", func(e l1Entry) { resp, rec = e.cloneResponse(), e.clone().record() })
	for i := range 20_000 { // many times round every ring
		c.set(strconv.Itoa(i), answer(strconv.Itoa(i), i, 200))
	}
	if _, ok := get(c, "first"); ok {
		t.Fatal("the first entry outlived twenty rings of writes")
	}
	want := answer("first", 1, 200)
	if diff := cmp.Diff(want.Response, plain(resp), cmpopts.IgnoreUnexported(Response{})); diff != "" {
		t.Errorf("cloned response (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, plainRecord(rec), cmpopts.IgnoreUnexported(Response{})); diff != "" {
		t.Errorf("cloned record (-want +got):\n%s", diff)
	}
}

// Any sequence of writes, of any sizes, round the rings any number of
// times: a key read back is its latest write or nothing, never an
// older write or another key's; the latest writes are all there; and
// the entries stay within the budget.
func TestL1CacheAnswersOnlyTheLatestWrite(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		const budget = 1 << 20
		c := newL1Cache(budget, time.Hour, time.Now)
		keys := rapid.IntRange(1, 3000).Draw(rt, "keys")
		writes := rapid.IntRange(1, 20_000).Draw(rt, "writes")
		latest := map[string]int{}
		var order []string
		for i := range writes {
			key := "k" + strconv.Itoa(rapid.IntRange(0, keys-1).Draw(rt, "key"))
			size := rapid.IntRange(0, 3000).Draw(rt, "size")
			if !c.set(key, answer(key, i, size)) {
				rt.Fatalf("write %d (%d bytes) not kept", i, size)
			}
			latest[key] = i
			order = append(order, key)
		}
		for key, v := range latest {
			got, ok := get(c, key)
			if ok && got.OrderID != int64(v) {
				rt.Fatalf("%s: read write %d, want its latest, %d", key, got.OrderID, v)
			}
			if ok && !strings.HasPrefix(string(got.Response.Body), fmt.Sprintf("%s#%d|", key, v)) {
				rt.Fatalf("%s: body %.20q is not its own", key, got.Response.Body)
			}
		}
		// The last few writes (far less than one shard's ring) are all there.
		for _, key := range order[max(0, len(order)-4):] {
			if _, ok := get(c, key); !ok {
				rt.Fatalf("%s, among the latest writes, is missing", key)
			}
		}
		if n, bytes := c.size(); bytes > budget || n > len(latest) {
			rt.Fatalf("%d entries in %d bytes; want at most %d in at most %d", n, bytes, len(latest), budget)
		}
	})
}

// However many answers pass through, L1 holds what its budget allows,
// the newest of them, and its index does not keep the rest.
func TestL1CacheStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	const budget = 4 << 20
	c := newL1Cache(budget, time.Hour, time.Now)
	const writes = 50_000
	for i := range writes {
		c.set(strconv.Itoa(i), answer(strconv.Itoa(i), i, 1000))
	}
	n, bytes := c.size()
	if bytes > budget-budget/l1IndexShare || bytes < budget/2 {
		t.Errorf("entries take %d bytes, want between %d and %d", bytes, budget/2, budget-budget/l1IndexShare)
	}
	indexed := 0
	for i := range c.shards {
		indexed += len(c.shards[i].index)
	}
	if indexed > 2*n+l1Shards {
		t.Errorf("the index holds %d entries for %d current ones, want at most two generations", indexed, n)
	}
	// Oldest out first (each shard's ring in turn, so the shards' edges
	// differ a little): the newest half of what it holds is all there,
	// and nothing from before twice as many writes.
	for i := writes - n/2; i < writes; i++ {
		if _, ok := get(c, strconv.Itoa(i)); !ok {
			t.Fatalf("write %d of the last %d is missing", i, n/2)
		}
	}
	for i := range writes - 2*n {
		if _, ok := get(c, strconv.Itoa(i)); ok {
			t.Fatalf("write %d is still held, %d writes later", i, writes-i)
		}
	}
}

// L1 holds no pointer per entry: a garbage collection marks a few
// objects for all of it, not one or more for each answer.
func TestL1CacheIsFewObjects(t *testing.T) { //nolint:paralleltest // counts the heap's objects
	c := newL1Cache(64<<20, time.Hour, time.Now)
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapObjects
	}
	before := live()
	const entries = 40_000
	for i := range entries {
		c.set(strconv.Itoa(i), answer(strconv.Itoa(i), i, 1000))
	}
	after := live()
	if n, _ := c.size(); n != entries {
		t.Fatalf("holds %d entries, want all %d", n, entries)
	}
	if grew := int64(after) - int64(before); grew > entries/20 { //nolint:gosec // G115: object counts
		t.Errorf("the heap holds %d more objects for %d entries, want a few per chunk", grew, entries)
	}
	runtime.KeepAlive(c)
}

func TestL1CacheExpires(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	c := newL1Cache(1<<20, time.Minute, clock.now)
	c.set("k", answer("k", 1, 10))
	clock.advance(time.Minute - time.Nanosecond)
	if _, ok := get(c, "k"); !ok {
		t.Fatal("gone before its time")
	}
	clock.advance(time.Nanosecond)
	if _, ok := get(c, "k"); ok {
		t.Error("found after its time")
	}
	if c.invalidate("k") {
		t.Error("invalidate found an expired entry")
	}
	if n, _ := c.size(); n != 0 {
		t.Errorf("size counts %d entries, want the expired one left out", n)
	}
}

func TestL1CacheForgets(t *testing.T) {
	t.Parallel()
	c := newL1Cache(1<<20, time.Hour, time.Now)
	for _, k := range []string{"a", "b", "c"} {
		c.set(k, answer(k, 1, 10))
	}
	if !c.invalidate("a") || c.invalidate("a") {
		t.Error("invalidate: want true once, then false")
	}
	if _, ok := get(c, "a"); ok {
		t.Error("a found after invalidate")
	}
	if _, ok := get(c, "b"); !ok {
		t.Error("b lost with a")
	}
	c.clear()
	if n, _ := c.size(); n != 0 {
		t.Errorf("%d entries after clear", n)
	}
	c.set("d", answer("d", 2, 10))
	if got, ok := get(c, "d"); !ok || got.OrderID != 2 {
		t.Errorf("after clear, d = %v, %v", got.OrderID, ok)
	}
	c.release()
	if _, ok := get(c, "d"); ok {
		t.Error("d found after release")
	}
	c.set("e", answer("e", 3, 10)) // a released cache still works, from empty
	if got, ok := get(c, "e"); !ok || got.OrderID != 3 {
		t.Errorf("after release, e = %v, %v", got.OrderID, ok)
	}
}

// A key whose hash lands on another key's entry reads nothing: the key
// is compared, not only its hash.
func TestL1CacheComparesTheKey(t *testing.T) {
	t.Parallel()
	c := newL1Cache(1<<20, time.Hour, time.Now)
	c.set("a", answer("a", 1, 10))
	ha := c.hash("a")
	// A key of the same shard, its hash made to point where "a" lies, as
	// a collision would.
	other := ""
	for i := 0; other == ""; i++ {
		if k := "b" + strconv.Itoa(i); c.shard(c.hash(k)) == c.shard(ha) {
			other = k
		}
	}
	sh := c.shard(ha)
	sh.index[c.hash(other)] = sh.index[ha]
	if _, ok := get(c, other); ok {
		t.Errorf("%q read the entry of %q", other, "a")
	}
	if _, ok := get(c, "a"); !ok {
		t.Error(`"a" lost`)
	}
}

// An entry larger than a chunk is not kept, and the write changes
// nothing else.
func TestL1CacheRefusesWhatAChunkCannotHold(t *testing.T) {
	t.Parallel()
	c := newL1Cache(64<<20, time.Hour, time.Now)
	c.set("big", answer("big", 1, 10))
	if c.set("big", answer("big", 2, l1MaxChunk)) {
		t.Fatal("kept an entry larger than a chunk")
	}
	if got, ok := get(c, "big"); !ok || got.OrderID != 1 {
		t.Errorf("after a refused write, big = %v, %v; want the first write", got.OrderID, ok)
	}
	if !c.set("fits", answer("fits", 1, l1MaxChunk-200)) {
		t.Error("refused an entry that fits a chunk")
	}
}

// Readers and writers at once, round the rings: every read is whole and
// its key's own (run with -race).
func TestL1CacheConcurrentReadersAndWriters(t *testing.T) {
	t.Parallel()
	c := newL1Cache(1<<20, time.Hour, time.Now)
	var wg sync.WaitGroup
	var bad atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				key := strconv.Itoa(i % 500)
				c.set(key, answer(key, w*10_000+i, 100+i%900))
			}
		})
		wg.Go(func() {
			for i := range 5000 {
				key := strconv.Itoa(i % 500)
				if got, ok := get(c, key); ok && !strings.HasPrefix(string(got.Response.Body), key+"#") {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d reads returned another key's answer", n)
	}
}

// The gauges follow sets, replacements, invalidations and the ring's
// wrap without walking the cache, and a scrape never waits on a shard's
// lock (a request holding one does not hold up /metrics, nor the other
// way round).
func TestL1GaugesAreKeptNotWalked(t *testing.T) {
	t.Parallel()
	s := &Store{l1: newL1Cache(1<<20, time.Hour, time.Now)}
	c := s.l1
	reg := prometheus.NewRegistry()
	reg.MustRegister(newL1Collector(s))
	gauge := func() (entries, bytes float64) {
		t.Helper()
		done := make(chan []*dto.MetricFamily, 1)
		go func() {
			mfs, err := reg.Gather()
			if err != nil {
				t.Error(err)
			}
			done <- mfs
		}()
		select {
		case mfs := <-done:
			for _, mf := range mfs {
				switch mf.GetName() {
				case "takeout_idempotency_l1_entries":
					entries = mf.GetMetric()[0].GetGauge().GetValue()
				case "takeout_idempotency_l1_bytes":
					bytes = mf.GetMetric()[0].GetGauge().GetValue()
				}
			}
			return entries, bytes
		case <-time.After(5 * time.Second):
			t.Fatal("a scrape waited on a shard's lock")
		}
		return 0, 0
	}
	for i := range 100 {
		c.set(fmt.Sprint("k", i), answer(fmt.Sprint("k", i), i, 201))
	}
	c.set("k7", answer("k7", 7, 201)) // a replacement is not a new entry
	if n, b := gauge(); n != 100 || b <= 0 {
		t.Errorf("after 100 keys: entries %v, bytes %v", n, b)
	}
	c.invalidate("k1")
	if n, _ := gauge(); n != 99 {
		t.Errorf("after an invalidation: entries %v, want 99", n)
	}
	// With every shard locked, as by writers, a scrape still answers.
	for i := range c.shards {
		c.shards[i].mu.Lock()
	}
	n, _ := gauge()
	for i := range c.shards {
		c.shards[i].mu.Unlock()
	}
	if n != 99 {
		t.Errorf("under locks: entries %v, want 99", n)
	}
	// Filling the rings many times over: the gauge tracks what the index
	// holds, which the exact walk agrees with when nothing has expired.
	for i := range 20_000 {
		c.set(fmt.Sprint("w", i), answer(fmt.Sprint("w", i), i, 201))
	}
	indexed := 0
	for i := range c.shards {
		indexed += len(c.shards[i].index)
	}
	if n, b := gauge(); int(n) != indexed || b > 1<<20 {
		t.Errorf("after wrapping: entries %v, index holds %d; bytes %v within 1 MiB", n, indexed, b)
	}
	c.clear()
	if n, _ := gauge(); n != 0 {
		t.Errorf("after clear: entries %v", n)
	}
}
