package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// boards are the merchants' order boards: one per merchant on every
// instance, each following the live order stream from before the first
// order and reconnecting (with Last-Event-ID) through every fault, as a
// kitchen's browser does. The checker then asks whether every paid order
// reached every board of its merchant, and whether any board got an event
// twice.
type boards struct {
	list []*board
	wg   sync.WaitGroup
	stop context.CancelFunc
}

type board struct {
	inst       *instance
	merchantID string
	token      string
	client     *http.Client

	mu       sync.Mutex
	lastID   string
	seen     map[string]bool // event ids
	paid     map[string]bool // order ids whose order.paid arrived
	repeats  int
	connects int
	events   int
}

// startBoards connects a board per merchant to every instance and returns
// once each is connected.
func startBoards(ctx context.Context, d *driver) (*boards, error) {
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	bs := &boards{stop: cancel}
	// No overall timeout: a stream lasts; dial and header waits are bounded.
	client := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 10 * time.Second, MaxIdleConnsPerHost: 64}}
	for _, in := range d.insts {
		for _, m := range d.merchants {
			b := &board{inst: in, merchantID: m.ID, token: m.Staff, client: client, seen: map[string]bool{}, paid: map[string]bool{}}
			bs.list = append(bs.list, b)
			bs.wg.Go(func() { b.follow(bctx) })
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, b := range bs.list {
		for b.connected() == 0 {
			if time.Now().After(deadline) {
				bs.close()
				return nil, fmt.Errorf("board of merchant %s on instance %d did not connect in 30s", b.merchantID, b.inst.n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return bs, nil
}

func (bs *boards) close() {
	bs.stop()
	bs.wg.Wait()
}

func (b *board) connected() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.connects
}

// follow keeps the board's stream open until ctx ends.
func (b *board) follow(ctx context.Context) {
	for ctx.Err() == nil {
		_ = b.read(ctx)
		sleep(ctx, 500*time.Millisecond)
	}
}

func (b *board) read(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "GET", b.inst.baseURL()+"/admin/v1/merchants/"+b.merchantID+"/orders/stream", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	b.mu.Lock()
	if b.lastID != "" {
		req.Header.Set("Last-Event-ID", b.lastID)
	}
	b.mu.Unlock()
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stream: HTTP %d", resp.StatusCode)
	}
	b.mu.Lock()
	b.connects++
	b.mu.Unlock()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, typ string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if id != "" {
				b.got(id, typ)
			}
			id, typ = "", ""
		case strings.HasPrefix(line, "id: "):
			id = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			typ = line[len("event: "):]
		}
	}
	return sc.Err()
}

// got records an event: its id is "order:type:version".
func (b *board) got(id, typ string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastID = id
	b.events++
	if b.seen[id] {
		b.repeats++
		return
	}
	b.seen[id] = true
	if typ == "order.paid" {
		order, _, _ := strings.Cut(id, ":")
		b.paid[order] = true
	}
}

// boardStats is the report's account of the boards.
type boardStats struct {
	Boards   int `json:"boards"`
	Events   int `json:"events_received"`
	Connects int `json:"connects"`
	Missed   int `json:"paid_orders_missed"`
	Repeats  int `json:"events_repeated"`
}

// verify waits (up to wait) until every paid order reached every board of
// its merchant, then stops the boards and returns what is still missing,
// with a few examples.
func (bs *boards) verify(ctx context.Context, db querier, wait time.Duration) (boardStats, []string, error) {
	defer bs.close()
	deadline := time.Now().Add(wait)
	for {
		paid, err := paidOrders(ctx, db)
		if err != nil {
			return boardStats{}, nil, err
		}
		st := boardStats{Boards: len(bs.list)}
		var examples []string
		for _, b := range bs.list {
			b.mu.Lock()
			for _, o := range paid[b.merchantID] {
				if !b.paid[o] {
					st.Missed++
					if len(examples) < 5 {
						examples = append(examples, fmt.Sprintf("order %s not on merchant %s's board on instance %d", o, b.merchantID, b.inst.n))
					}
				}
			}
			st.Events += b.events
			st.Connects += b.connects
			st.Repeats += b.repeats
			b.mu.Unlock()
		}
		if st.Missed == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			sort.Strings(examples)
			return st, examples, nil
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// paidOrders lists, by merchant, every order that was ever paid.
func paidOrders(ctx context.Context, db querier) (map[string][]string, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT o.merchant_id::text, o.id::text FROM order_status_history h
		JOIN orders o ON o.id = h.order_id WHERE h.to_status = 'PAID'`)
	if err != nil {
		return nil, fmt.Errorf("paid orders: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var m, o string
		if err := rows.Scan(&m, &o); err != nil {
			return nil, err
		}
		out[m] = append(out[m], o)
	}
	return out, rows.Err()
}
