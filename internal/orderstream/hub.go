// Package orderstream pushes a merchant's order events to its boards as
// Server-Sent Events.
//
// Every order event (the same ones, with the same ids, as the merchant
// webhook) is written to the order_events outbox in the transaction of its
// transition. Each API instance runs one Hub that reads the outbox forward
// and fans the events out to the streams connected to it; a stream that
// reconnects with Last-Event-ID replays from the outbox. So an event
// committed on one instance reaches a board connected to any other, and a
// board that was away misses nothing.
//
// The hub wakes on a Redis pub/sub hint that some instance wrote events,
// and polls as a backstop (a hint lost to a Redis failover delays an event
// by one poll, never loses it). PostgreSQL's NOTIFY in the committing
// transaction was the other choice: it takes a database-wide lock from
// before the commit record is flushed until the commit ends, so every
// transition of every order would commit one at a time.
package orderstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/takeout/takeout/internal/auth"
	"github.com/takeout/takeout/internal/db/dbsqlc"
	"github.com/takeout/takeout/internal/problem"
	"github.com/takeout/takeout/internal/redisconn"
	"github.com/takeout/takeout/internal/webhook"
)

// Position is where an event sits in the outbox: events are read in
// (Xid, Seq) order.
type Position struct {
	Xid int64
	Seq int64
}

// After reports whether p comes after q.
func (p Position) After(q Position) bool {
	return p.Xid > q.Xid || (p.Xid == q.Xid && p.Seq > q.Seq)
}

// Event is one outbox row as a stream sends it.
type Event struct {
	Pos        Position
	MerchantID int64
	ID         string // the webhook event id
	Type       string // order.paid, ...
	Data       string // the webhook event, JSON
}

// Options configure a Hub.
type Options struct {
	Pool   *pgxpool.Pool
	Redis  *redisconn.Conn
	Logger *slog.Logger
	// Poll is how often the hub reads the outbox without a hint while
	// streams are connected (and, 4 times slower, when none are).
	Poll time.Duration
	// Buffer is how many events a stream may have waiting; a stream that
	// falls further behind catches up from the outbox instead.
	Buffer int
	// MaxStreams bounds the streams of this instance (0: no bound).
	MaxStreams int
	// MaxPerMerchant and MaxPerToken bound the streams of one merchant
	// and of one token on this instance, below MaxStreams, so that one
	// kitchen (or one leaked token) cannot take every slot and keep
	// another kitchen's new orders from ringing (0: no bound).
	MaxPerMerchant int
	MaxPerToken    int
	// Revocations end a stream when its token is revoked (nil: only its
	// expiry ends it).
	Revocations *auth.Revocations
	// Heartbeat is how often an idle stream sends a comment line.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to a stream's client.
	WriteTimeout time.Duration
	Registerer   prometheus.Registerer
}

// Hub fans the outbox out to this instance's streams.
type Hub struct {
	opts    Options
	q       *dbsqlc.Queries
	channel string

	// mu is held for a whole read-and-deliver round, so a stream that
	// subscribes either sees every event the round delivers or none of
	// them, and the cursor never moves past an event a stream missed.
	mu     sync.Mutex
	cursor Position
	fresh  bool // cursor was set since the hub started
	subs   map[int64]map[*subscriber]struct{}
	nsubs  int
	// byToken counts the streams of each token.
	byToken map[string]int

	wrote atomic.Bool   // this instance recorded events since the last round
	wake  chan struct{} // a hint or a local write
	done  chan struct{} // closed when streams must end (shutdown)
	once  sync.Once

	streams   prometheus.Gauge
	delivered prometheus.Counter
	lagged    prometheus.Counter
}

const hintChannel = "order-events"

// NewHub returns a hub; Run starts it.
func NewHub(o Options) (*Hub, error) {
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Buffer <= 0 {
		o.Buffer = 256
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	h := &Hub{
		opts: o, q: dbsqlc.New(), channel: o.Redis.Key(hintChannel),
		subs: map[int64]map[*subscriber]struct{}{}, byToken: map[string]int{}, wake: make(chan struct{}, 1), done: make(chan struct{}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "takeout_order_streams", Help: "Live order streams (boards) connected to this instance.",
		}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "takeout_order_stream_events_total", Help: "Order events written to live order streams.",
		}),
		lagged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "takeout_order_stream_catchups_total", Help: "Times a stream fell a buffer behind and caught up from the outbox.",
		}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{h.streams, h.delivered, h.lagged} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register stream metrics: %w", err)
			}
		}
	}
	return h, nil
}

// Record writes an order event of merchantID's order orderID to the
// outbox in the transition's transaction.
func (h *Hub) Record(ctx context.Context, tx pgx.Tx, merchantID, orderID int64, ev webhook.Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode order event: %w", err)
	}
	if err := h.q.OrderEventInsert(ctx, tx, dbsqlc.OrderEventInsertParams{
		EventID: ev.ID, MerchantID: merchantID, OrderID: orderID, Type: ev.Type, Body: body,
	}); err != nil {
		return fmt.Errorf("record order event: %w", err)
	}
	h.Wrote()
	return nil
}

// Wrote tells the hub this instance wrote events: it reads the outbox on
// its next round even with no stream open (and tells the others).
func (h *Hub) Wrote() {
	h.wrote.Store(true)
	h.poke()
}

func (h *Hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Run reads the outbox and delivers until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	go h.opts.Redis.Subscribe(ctx, h.channel, redisconn.Subscription{
		OnMessage:   func(string) { h.poke() },
		OnSubscribe: h.poke,
	}, nil)
	t := time.NewTicker(h.opts.Poll)
	defer t.Stop()
	idleRounds := 0
	var last time.Time
	for {
		// Under a stream of transitions every commit wakes the hub: one
		// round per minRound reads them in batches.
		if wait := minRound - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		case <-t.C:
			// Without streams, the cursor only needs to keep up now and then.
			if h.streamCount() == 0 && !h.wrote.Load() {
				if idleRounds++; idleRounds%4 != 0 {
					continue
				}
			}
		}
		last = time.Now()
		local := h.wrote.Swap(false)
		n, err := h.round(ctx)
		if err != nil {
			if ctx.Err() == nil {
				h.opts.Logger.Warn("read order events", "err", err)
			}
			h.wrote.Store(local || h.wrote.Load())
			continue
		}
		if local {
			if n == 0 {
				// Not committed yet (or behind an older transaction): look again soon.
				h.wrote.Store(true)
				time.AfterFunc(20*time.Millisecond, h.poke)
			} else if err := h.opts.Redis.Publish(context.WithoutCancel(ctx), h.channel, "1"); err != nil {
				h.opts.Logger.Debug("publish order event hint", "err", err)
			}
		}
	}
}

func (h *Hub) streamCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nsubs
}

// minRound is the least time between two reads of the outbox.
const minRound = 20 * time.Millisecond

// pageRows is how many events one read takes.
const pageRows = 500

// round reads what is new and delivers it; it returns how many events it
// read.
func (h *Hub) round(ctx context.Context) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.fresh || h.nsubs == 0 {
		// Nobody to deliver to: skip to the end.
		return h.skipToLatest(ctx)
	}
	total := 0
	for {
		rows, err := h.q.OrderEventsAfter(ctx, h.opts.Pool, dbsqlc.OrderEventsAfterParams{
			Xid: h.cursor.Xid, Seq: h.cursor.Seq, MaxRows: pageRows,
		})
		if err != nil {
			return total, err
		}
		for _, r := range rows {
			// One event, shared by the merchant's streams: an inbox holds
			// pointers, so an idle stream's inbox is a few hundred bytes.
			ev := &Event{Pos: Position{Xid: r.Xid, Seq: r.Seq}, MerchantID: r.MerchantID, ID: r.EventID, Type: r.Type, Data: r.Body}
			for s := range h.subs[ev.MerchantID] {
				s.offer(ev)
			}
			h.cursor = ev.Pos
		}
		total += len(rows)
		if len(rows) < pageRows {
			return total, nil
		}
	}
}

// skipToLatest moves the cursor to the outbox's latest final event; it
// returns 1 if that moved a cursor already set, else 0. h.mu is held.
func (h *Hub) skipToLatest(ctx context.Context) (int, error) {
	last, err := h.q.OrderEventsLatest(ctx, h.opts.Pool)
	if err != nil {
		return 0, err
	}
	p := Position{Xid: last.Xid, Seq: last.Seq}
	n := 0
	if h.fresh && p.After(h.cursor) {
		n = 1
	}
	if p.After(h.cursor) {
		h.cursor = p
	}
	h.fresh = true
	return n, nil
}

// Refusals of a stream beyond a bound. A full instance is 503 (another
// instance may have room); a merchant or token at its bound is 429 (its
// own streams hold the slots).
var (
	errInstanceFull = problem.New(problem.Unavailable, "this instance serves as many order streams as it may; retry shortly").With("retry_after", 5)
	errMerchantFull = problem.New(problem.RateLimited, "this merchant has as many order streams open on this instance as it may; close a board first").With("retry_after", 5)
	errTokenFull    = problem.New(problem.RateLimited, "this token has as many order streams open as it may; close a board first").With("retry_after", 5)
)

// subscribe registers a stream of merchantID's events opened with the
// token tokenID, unless a bound refuses it.
func (h *Hub) subscribe(ctx context.Context, merchantID int64, tokenID string) (*subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch o := h.opts; {
	case o.MaxStreams > 0 && h.nsubs >= o.MaxStreams:
		return nil, errInstanceFull
	case o.MaxPerMerchant > 0 && len(h.subs[merchantID]) >= o.MaxPerMerchant:
		return nil, errMerchantFull
	case o.MaxPerToken > 0 && h.byToken[tokenID] >= o.MaxPerToken:
		return nil, errTokenFull
	}
	if !h.fresh {
		// The hub has not read the outbox yet. Its cursor is set now,
		// before the stream reads its start: a first round that found a
		// subscriber would otherwise skip to the end, past events the
		// stream is waiting for.
		if _, err := h.skipToLatest(ctx); err != nil {
			return nil, fmt.Errorf("latest order event: %w", err)
		}
	}
	s := &subscriber{events: make(chan *Event, h.opts.Buffer), merchantID: merchantID, tokenID: tokenID}
	if h.subs[merchantID] == nil {
		h.subs[merchantID] = map[*subscriber]struct{}{}
	}
	h.subs[merchantID][s] = struct{}{}
	h.byToken[tokenID]++
	h.nsubs++
	h.streams.Inc()
	return s, nil
}

func (h *Hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s.merchantID][s]; !ok {
		return
	}
	delete(h.subs[s.merchantID], s)
	if len(h.subs[s.merchantID]) == 0 {
		delete(h.subs, s.merchantID)
	}
	if h.byToken[s.tokenID]--; h.byToken[s.tokenID] == 0 {
		delete(h.byToken, s.tokenID)
	}
	h.nsubs--
	h.streams.Dec()
}

// CloseStreams ends every stream (on shutdown: their clients reconnect to
// another instance and resume).
func (h *Hub) CloseStreams() { h.once.Do(func() { close(h.done) }) }

// subscriber is one stream's inbox.
type subscriber struct {
	merchantID int64
	tokenID    string
	events     chan *Event
	// behind is set when an event did not fit: the stream reads the
	// outbox from its position before taking more from events.
	behind atomic.Bool
}

func (s *subscriber) offer(ev *Event) {
	select {
	case s.events <- ev:
	default:
		s.behind.Store(true)
	}
}
