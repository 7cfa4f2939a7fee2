package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/takeout/takeout/internal/testenv"
	"github.com/takeout/takeout/internal/webhook"
)

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct {
	ID, Event, Data string
}

// sseStream is a connected order stream.
type sseStream struct {
	events chan sseEvent
	status int
	header http.Header
	body   []byte // a refusal's body
	cancel context.CancelFunc
	done   chan struct{}
}

// openStream connects to a merchant's order stream on api, resuming after
// lastID when set; the stream is read into events until closed.
func openStream(t testing.TB, api *instance, merchantID, token, lastID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", api.url+"/admin/v1/merchants/"+merchantID+"/orders/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	// Through the contract's checker: the answer's status and headers,
	// then each event as it is read.
	resp, err := testenv.ContractClient(t).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &sseStream{events: make(chan sseEvent, 1024), status: resp.StatusCode, header: resp.Header, cancel: cancel, done: make(chan struct{})}
	t.Cleanup(s.close)
	if resp.StatusCode != 200 {
		s.body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		close(s.events)
		close(s.done)
		return s
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("stream Content-Type %q", ct)
	}
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Event != "" || ev.Data != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				s.events <- sseEvent{Event: "comment", Data: line}
			default:
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "id":
					ev.ID = value
				case "event":
					ev.Event = value
				case "data":
					ev.Data = value
				}
			}
		}
	}()
	return s
}

func (s *sseStream) close() {
	s.cancel()
	<-s.done
}

// next returns the next order event (skipping comments and retry lines)
// or fails after d.
func (s *sseStream) next(t testing.TB, d time.Duration) sseEvent {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatal("stream ended")
			}
			if ev.Event == "comment" || (ev.Event == "" && ev.ID == "") {
				continue
			}
			return ev
		case <-timeout:
			t.Fatalf("no event within %s", d)
		}
	}
}

// quiet checks no order event arrives within d.
func (s *sseStream) quiet(t testing.TB, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return
			}
			if ev.Event != "comment" && ev.ID != "" {
				t.Errorf("unexpected event %s %s", ev.ID, ev.Event)
			}
		case <-timeout:
			return
		}
	}
}

// paidOrder places an order for a customer of its own (the same cart
// twice from one customer would be one order) and marks it paid,
// returning its id.
func (sh *shop) paidOrder(t *testing.T, key string) string {
	t.Helper()
	p := sh.place(t, sh.login(t, "customer-"+key), key, 1)
	sh.markPaid(t, p.ID)
	return p.ID
}

// The stream of instance B carries the events committed on instance A,
// with the webhook's event ids, each once; a reconnect with Last-Event-ID
// resumes exactly after it; an unknown one says to reload.
func TestOrderStreamAcrossInstances(t *testing.T) {
	t.Parallel()
	sh := newShop(t, 2, map[string]string{"TAKEOUT_STREAM_HEARTBEAT": "200ms"}, 1000)
	a, b := sh.apis[0], sh.apis[1]
	sh.createStaff(t, "line.cook", "correct horse battery")
	sess := sh.staffLogin(t, b, "line.cook", "correct horse battery")

	if s := openStream(t, b, createMerchant(t, sh.stack, a, "Not Mine"), sess.Token, ""); s.status != 403 {
		t.Errorf("another merchant's stream: %d, want 403", s.status)
	}
	stream := openStream(t, b, sh.merchantID, sess.Token, "")
	if stream.status != 200 {
		t.Fatalf("stream: %d", stream.status)
	}
	// A heartbeat arrives while nothing happens.
	select {
	case ev := <-stream.events:
		if ev.Event != "comment" && ev.ID != "" {
			t.Fatalf("first thing on an idle stream: %+v", ev)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no heartbeat within 2s")
	}

	id := sh.paidOrder(t, "k1")
	acc := sh.do(t, a, "POST", "/admin/v1/orders/"+id+"/accept", sess.Token, nil)
	if acc.status != 200 {
		t.Fatalf("accept: %d %s", acc.status, acc.body)
	}
	ev := stream.next(t, 5*time.Second)
	var body webhook.Event
	if err := json.Unmarshal([]byte(ev.Data), &body); err != nil {
		t.Fatal(err)
	}
	oid := mustID(t, id)
	if ev.Event != "order.accepted" || ev.ID != webhook.EventID(oid, "order.accepted", body.Version) || body.OrderID != id || body.Status != "ACCEPTED" {
		t.Fatalf("event %+v / %+v", ev, body)
	}
	if n := sh.count(t, `SELECT count(*) FROM river_job WHERE kind = 'webhook.deliver' AND args->'event'->>'id' = $1`, ev.ID); n != 0 {
		// No webhook is configured in this shop: the stream does not need one.
		t.Errorf("%d webhook jobs without a webhook", n)
	}
	first := ev.ID

	// Concurrent transitions on both instances: each event once, in the
	// outbox's order.
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = sh.paidOrder(t, fmt.Sprint("c", i))
	}
	var wg sync.WaitGroup
	for i, oid := range ids {
		for dup := range 2 { // a double tap: one transition
			wg.Go(func() { sh.do(t, sh.apis[(i+dup)%2], "POST", "/admin/v1/orders/"+oid+"/accept", sess.Token, nil) })
		}
	}
	wg.Wait()
	seen := map[string]int{}
	for range ids {
		e := stream.next(t, 5*time.Second)
		seen[e.ID]++
	}
	stream.quiet(t, 700*time.Millisecond)
	for _, oid := range ids {
		var v int64
		if err := sh.pool.QueryRow(context.Background(), `SELECT version FROM orders WHERE id = $1`, oid).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if want := webhook.EventID(mustID(t, oid), "order.accepted", v); seen[want] != 1 {
			t.Errorf("event %s seen %d times", want, seen[want])
		}
	}
	if n := sh.count(t, `SELECT count(*) FROM order_events WHERE merchant_id = $1`, mustID(t, sh.merchantID)); n != 13 {
		t.Errorf("%d events in the outbox, want 13", n)
	}

	// Away and back: resume after the first event on the other instance.
	stream.close()
	sh.do(t, a, "POST", "/admin/v1/orders/"+id+"/dispatch", sess.Token, nil)
	sh.do(t, b, "POST", "/admin/v1/orders/"+id+"/complete", sess.Token, nil)
	resumed := openStream(t, a, sh.merchantID, sess.Token, first)
	var got []string
	for range 14 {
		got = append(got, resumed.next(t, 5*time.Second).Event)
	}
	resumed.quiet(t, 500*time.Millisecond)
	if got[12] != "order.delivering" || got[13] != "order.completed" || strings.Count(strings.Join(got, ","), "order.accepted") != 12 {
		t.Errorf("resumed after %s: %v", first, got)
	}

	reset := openStream(t, a, sh.merchantID, sess.Token, "1:order.paid:99")
	if ev := reset.next(t, 5*time.Second); ev.Event != "stream.reset" {
		t.Errorf("unknown Last-Event-ID: first event %+v, want stream.reset", ev)
	}
	reset.quiet(t, 300*time.Millisecond)
}
