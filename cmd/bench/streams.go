package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/takeout/takeout/internal/auth"
)

// The boards of a platform: many kitchens' order streams held open on one
// instance, nearly all idle, and every new order reaching its kitchen's
// boards within a second.
const (
	boardStreams     = 10_000
	boardMerchants   = 200 // 50 streams each, TAKEOUT_STREAM_MAX_PER_MERCHANT's default
	boardEventsPerS  = 200
	boardEventsFor   = 10 * time.Second
	boardIdleFor     = 16 * time.Second // past one heartbeat (TAKEOUT_STREAM_HEARTBEAT, 15 s)
	boardOpenAtOnce  = 200
	boardEventBudget = time.Second
)

// streamReport is what the boards scenario measured.
type streamReport struct {
	Streams   int `json:"streams"`
	Merchants int `json:"merchants"`
	// The api's heap in use (after a GC), its goroutines' stacks and its
	// resident memory before the streams opened and with all of them
	// open and idle.
	HeapBeforeMB   float64 `json:"heap_inuse_before_mb"`
	HeapAfterMB    float64 `json:"heap_inuse_after_mb"`
	StacksBeforeMB float64 `json:"stacks_inuse_before_mb"`
	StacksAfterMB  float64 `json:"stacks_inuse_after_mb"`
	RSSBeforeMB    float64 `json:"rss_before_mb"`
	RSSAfterMB     float64 `json:"rss_after_mb"`
	// KBEach is what a stream holds: the growth of the heap in use and of
	// the stacks, per stream. RSSKBEach is the resident memory's growth
	// per stream, context only: a process that held more before (the
	// runs before this one) reuses pages it had, and reads low.
	KBEach    float64 `json:"kb_each"`
	RSSKBEach float64 `json:"rss_kb_each"`
	// IdleCPUPercent is the api's CPU (of one core) while every stream
	// was idle for IdleS seconds, heartbeats included.
	IdleS          float64 `json:"idle_s"`
	IdleCPUPercent float64 `json:"idle_cpu_percent"`
	// Events were written to the outbox at EventsPerS for EventsS
	// seconds, each for one merchant's 50 boards; Deliveries reached a
	// board, Missing did not by the end; the latency is from the commit
	// to the board's read of it.
	EventsPerS float64 `json:"events_per_s"`
	EventsS    float64 `json:"events_s"`
	Events     int     `json:"events"`
	Deliveries int     `json:"deliveries"`
	Missing    int     `json:"missing"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
}

// boards opens boardStreams streams over boardMerchants merchants, measures
// the api's memory with them idle and its CPU over a heartbeat, then writes
// events at boardEventsPerS and measures how soon each board reads them.
func (r *runner) boards(ctx context.Context) (*streamReport, error) {
	e := r.e
	rep := &streamReport{Streams: boardStreams, Merchants: boardMerchants}
	merchants, tokens, err := e.boardKitchens(ctx)
	if err != nil {
		return nil, err
	}
	if rep.HeapBeforeMB, rep.StacksBeforeMB, err = heapAndStacksMB(ctx, e.client, e.debug); err != nil {
		return nil, err
	}
	rep.RSSBeforeMB = rssMB(e.apiPID)
	var bc boardClients
	defer bc.close()
	if err := bc.open(ctx, e.api, merchants, tokens); err != nil {
		return nil, err
	}
	r.logf("boards: %d streams open over %d merchants", boardStreams, boardMerchants)

	// Idle: the heartbeat's CPU, then the memory of idle streams.
	before := r.meter()
	profiled := r.cpuProfile(ctx, "boards-idle", boardStreams, int(boardIdleFor.Seconds()))
	time.Sleep(boardIdleFor)
	idle := r.meter().sub(before)
	profiled()
	rep.IdleS = boardIdleFor.Seconds()
	rep.IdleCPUPercent = round3(100 * idle["api"].Seconds() / boardIdleFor.Seconds())
	if rep.HeapAfterMB, rep.StacksAfterMB, err = heapAndStacksMB(ctx, e.client, e.debug); err != nil {
		return nil, err
	}
	rep.RSSAfterMB = rssMB(e.apiPID)
	r.heapProfile(ctx, "boards-idle")
	rep.KBEach = round3((rep.HeapAfterMB - rep.HeapBeforeMB + rep.StacksAfterMB - rep.StacksBeforeMB) * 1024 / boardStreams)
	rep.RSSKBEach = round3((rep.RSSAfterMB - rep.RSSBeforeMB) * 1024 / boardStreams)

	if err := e.boardEvents(ctx, rep, merchants); err != nil {
		return nil, err
	}
	want := int64(rep.Events * boardStreams / boardMerchants)
	for deadline := time.Now().Add(5 * time.Second); bc.seen.Load() < want && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	got := bc.latencies()
	var res result
	res.summarize(got, time.Second)
	rep.Deliveries, rep.Missing = len(got), int(want)-len(got)
	rep.P50Ms, rep.P99Ms, rep.MaxMs = res.P50Ms, res.P99Ms, res.MaxMs
	r.logf("boards: %.1f KB each (resident %.1f KB), idle api CPU %.2f%%; %d events at %.0f/s: %d deliveries, %d missing, p50 %.1f ms, p99 %.1f ms",
		rep.KBEach, rep.RSSKBEach, rep.IdleCPUPercent, rep.Events, rep.EventsPerS, rep.Deliveries, rep.Missing, rep.P50Ms, rep.P99Ms)
	return rep, nil
}

// boardKitchens creates the boards' merchants, each with its staff's
// token: a kitchen's boards share it, as one kitchen's screens do.
func (e *env) boardKitchens(ctx context.Context) (merchants []int64, tokens []string, err error) {
	merchants, tokens = make([]int64, boardMerchants), make([]string, boardMerchants)
	for i := range merchants {
		st, b, err := e.do(ctx, "POST", "/admin/v1/merchants", e.admin, map[string]any{"name": fmt.Sprintf("Board Kitchen %03d", i)}, nil)
		if err != nil || st != http.StatusCreated {
			return nil, nil, fmt.Errorf("board merchant: %d %s: %w", st, b, err)
		}
		var m struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, nil, err
		}
		merchants[i], _ = strconv.ParseInt(m.ID, 10, 64)
		if tokens[i], _, err = e.tokens.IssueStaff(fmt.Sprintf("board-%d", i), auth.Role{MerchantID: merchants[i]}, time.Hour); err != nil {
			return nil, nil, err
		}
	}
	return merchants, tokens, nil
}

// boardClients are the bench's side of the streams: each reads with a
// small buffer on its own connection (HTTP/1.1: one stream per
// connection, as browsers' EventSource over HTTP/1.1), and records the
// latency of every bench event it reads.
type boardClients struct {
	mu      sync.Mutex
	lat     []time.Duration
	seen    atomic.Int64
	wg      sync.WaitGroup
	cancels []context.CancelFunc
}

// open opens boardStreams streams, spread over the merchants, and returns
// once every one answered and sent its first line.
func (bc *boardClients) open(ctx context.Context, api string, merchants []int64, tokens []string) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, ReadBufferSize: 1 << 10, WriteBufferSize: 1 << 10}}
	opened := make(chan error, boardStreams)
	sem := make(chan struct{}, boardOpenAtOnce)
	read := func(data string) {
		var ev struct {
			SentNS int64 `json:"bench_sent_ns"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil || ev.SentNS == 0 {
			return
		}
		d := time.Duration(time.Now().UnixNano() - ev.SentNS)
		bc.mu.Lock()
		bc.lat = append(bc.lat, d)
		bc.mu.Unlock()
		bc.seen.Add(1)
	}
	for i := range boardStreams {
		m := i % len(merchants)
		sctx, cancel := context.WithCancel(ctx)
		bc.cancels = append(bc.cancels, cancel)
		sem <- struct{}{}
		bc.wg.Go(func() {
			if err := openBoard(sctx, client, api, merchants[m], tokens[m], func() { <-sem }, read); err != nil && sctx.Err() == nil {
				opened <- err
			}
		})
	}
	// Every stream answered and sent its first line once sem is empty
	// again: each releases its slot then.
	for range boardOpenAtOnce {
		select {
		case sem <- struct{}{}:
		case err := <-opened:
			return fmt.Errorf("open a board's stream: %w", err)
		}
	}
	return nil
}

// latencies are the latencies read so far.
func (bc *boardClients) latencies() []time.Duration {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	return slices.Clone(bc.lat)
}

// close closes every stream and waits for their readers.
func (bc *boardClients) close() {
	for _, cancel := range bc.cancels {
		cancel()
	}
	bc.wg.Wait()
}

// boardEvents writes events at boardEventsPerS for boardEventsFor, each
// for the next merchant, each as a transition writes it (its own
// transaction) and announced as another instance announces its commits.
func (e *env) boardEvents(ctx context.Context, rep *streamReport, merchants []int64) error {
	rdb, err := redisClient(e.o.redisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	hint := e.apiCfg.RedisPrefix + "order-events"
	tick := time.NewTicker(time.Second / boardEventsPerS)
	defer tick.Stop()
	start := time.Now()
	var writes sync.WaitGroup
	var failed atomic.Pointer[error]
	for n := 0; time.Since(start) < boardEventsFor; n++ {
		<-tick.C
		// Sent on its tick, whatever the one before is doing.
		writes.Go(func() {
			body := fmt.Sprintf(`{"bench_sent_ns":%d}`, time.Now().UnixNano())
			if _, err := e.db.Exec(ctx, `INSERT INTO order_events (event_id, merchant_id, order_id, type, body) VALUES ($1, $2, $3, 'bench.board', $4)`,
				fmt.Sprintf("bench-board-%d", n), merchants[n%len(merchants)], n, body); err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
			_ = rdb.Publish(ctx, hint, "1").Err()
		})
		rep.Events++
	}
	writes.Wait()
	if err := failed.Load(); err != nil {
		return fmt.Errorf("board event: %w", *err)
	}
	rep.EventsS = round3(time.Since(start).Seconds())
	rep.EventsPerS = round3(float64(rep.Events) / rep.EventsS)
	return nil
}

// openBoard holds one stream open until ctx ends: up is called once the
// stream answered and sent its first line, read with the data of each
// event read.
func openBoard(ctx context.Context, client *http.Client, api string, merchant int64, token string, up func(), read func(data string)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/admin/v1/merchants/%d/orders/stream", api, merchant), nil)
	if err != nil {
		up()
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		up()
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		up()
		return fmt.Errorf("stream of merchant %d: %d", merchant, resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 1<<10)
	first := true
	for {
		line, err := br.ReadString('\n')
		if first {
			up()
			first = false
		}
		if err != nil {
			return err
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			read(data)
		}
	}
}

// redisClient connects to the Redis the api uses.
func redisClient(url string) (*redis.Client, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, errors.Join(errors.New("the bench's Redis URL"), err)
	}
	return redis.NewClient(o), nil
}
