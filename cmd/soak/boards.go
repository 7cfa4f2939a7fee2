package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
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
	seen     map[string]sighting // by event id: its first arrival
	paid     map[string]bool     // order ids whose order.paid arrived
	repeats  []repeat            // the first few events that came again
	nrepeats int
	connects int
	events   int
}

// sighting is when, and on which of the board's connections, an event
// arrived.
type sighting struct {
	at      time.Time
	connect int
}

// repeat is an event a board got twice: the report names it, with both
// arrivals, so that its cause can be told from the outbox.
type repeat struct {
	id           string
	first, again sighting
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
			b := &board{inst: in, merchantID: m.ID, token: m.Staff, client: client, seen: map[string]sighting{}, paid: map[string]bool{}}
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
	connect := b.connects
	b.mu.Unlock()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var id, typ string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if id != "" {
				b.got(id, typ, connect)
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

// got records an event that arrived on the board's connect'th
// connection: its id is "order:type:version".
func (b *board) got(id, typ string, connect int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastID = id
	b.events++
	now := sighting{at: time.Now(), connect: connect}
	if first, ok := b.seen[id]; ok {
		b.nrepeats++
		if len(b.repeats) < 5 {
			b.repeats = append(b.repeats, repeat{id: id, first: first, again: now})
		}
		return
	}
	b.seen[id] = now
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
// its merchant, then stops the boards and returns what is still missing
// and what came twice, with a few examples of each.
func (bs *boards) verify(ctx context.Context, db querier, wait time.Duration) (boardStats, []string, []string, error) {
	defer bs.close()
	deadline := time.Now().Add(wait)
	for {
		paid, err := paidOrders(ctx, db)
		if err != nil {
			return boardStats{}, nil, nil, err
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
			st.Repeats += b.nrepeats
			b.mu.Unlock()
		}
		if st.Missed == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			sort.Strings(examples)
			repeated, err := bs.repeated(ctx, db)
			return st, examples, repeated, err
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// repeated describes the first few events a board got twice, each with
// when its outbox row was written: a row written after the first arrival
// means the first copy was read from a commit that a failover then lost
// (and the transition, retried, wrote again).
func (bs *boards) repeated(ctx context.Context, db querier) ([]string, error) {
	var out []string
	for _, b := range bs.list {
		b.mu.Lock()
		reps := append([]repeat(nil), b.repeats...)
		b.mu.Unlock()
		for _, r := range reps {
			row := "no outbox row now"
			var written time.Time
			var xid, seq int64
			err := db.QueryRow(ctx, `SELECT created_at, xid, seq FROM order_events WHERE event_id = $1`, r.id).Scan(&written, &xid, &seq)
			switch {
			case err == nil:
				row = fmt.Sprintf("its outbox row (xid %d, seq %d) written %s", xid, seq, written.UTC().Format(stamp))
			case !errors.Is(err, pgx.ErrNoRows):
				return nil, fmt.Errorf("outbox row of %s: %w", r.id, err)
			}
			out = append(out, fmt.Sprintf("event %s twice on merchant %s's board on instance %d: %s (connection %d), again %s (connection %d); %s",
				r.id, b.merchantID, b.inst.n, r.first.at.UTC().Format(stamp), r.first.connect, r.again.at.UTC().Format(stamp), r.again.connect, row))
			if len(out) == 5 {
				return out, nil
			}
		}
	}
	return out, nil
}

// stamp is how the report writes an instant: to the millisecond.
const stamp = "15:04:05.000"

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
