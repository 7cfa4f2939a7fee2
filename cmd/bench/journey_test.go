package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The journey's CPU, every serving process (not the providers, not the
// load), is held against its writes priced at the floors' PostgreSQL CPU,
// each floor at its best concurrency; a run with a failed journey or a
// ticket never printed does not meet it, whatever the ratio.
func TestJourneyTarget(t *testing.T) {
	t.Parallel()
	floors := []result{
		{Scenario: "floor_place", Concurrency: 16, Throughput: 1500, CPUUsPerRequest: map[string]float64{"postgres": 300}},
		{Scenario: "floor_place", Concurrency: 64, Throughput: 1000, CPUUsPerRequest: map[string]float64{"postgres": 900}},
		{Scenario: "floor_pay", Concurrency: 16, Throughput: 2000, CPUUsPerRequest: map[string]float64{"postgres": 500}},
		{Scenario: "floor_pay", Concurrency: 64, Throughput: 4000, CPUUsPerRequest: map[string]float64{"postgres": 200}},
	}
	pays := len(journeyWrites) - 1 // every write but the placement is priced at floor_pay
	floor := 300 + float64(pays)*200
	for _, c := range []struct {
		name          string
		errors, print int
		serving       float64 // api + postgres + redis per journey
		want          float64
		met           bool
	}{
		{"within", 0, 0, 2 * floor, 2, true},
		{"over", 0, 0, 3 * floor, 3, false},
		{"a journey failed", 1, 0, floor, 1, false},
		{"a ticket not printed", 0, 1, floor, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := results{Results: floors, Journey: &journeyReport{Journeys: 100, Errors: c.errors, PrintsMissing: c.print,
				CPUUsPerJourney: map[string]float64{"api": c.serving / 2, "postgres": c.serving / 4, "redis": c.serving / 4, "providers": 1e6, "load": 1e6}}}
			r.finish()
			if got := r.Ratios["journey_cpu_vs_floors"]; got != c.want {
				t.Errorf("journey_cpu_vs_floors %v, want %v", got, c.want)
			}
			if r.Journey.FloorCPUUs != floor {
				t.Errorf("floor CPU %v µs, want %v", r.Journey.FloorCPUUs, floor)
			}
			for _, x := range r.Targets {
				if x.Name == "journey_cpu_vs_floors <= 2" && x.Met != c.met {
					t.Errorf("met %v, want %v", x.Met, c.met)
				}
			}
			if md := r.markdown(); !strings.Contains(md, "The journey") {
				t.Errorf("markdown lacks the journey:\n%s", md)
			}
		})
	}
	r := results{Results: floors[2:], Journey: &journeyReport{Journeys: 100, CPUUsPerJourney: map[string]float64{"api": 1}}}
	r.finish()
	if _, ok := r.Ratios["journey_cpu_vs_floors"]; ok {
		t.Error("a journey target without floor_place in the run")
	}
}

// A journey waits for an event whether the board read it before or after
// the wait began, gets each once, and gives up when it never comes.
func TestJourneyBoardHandsEachEventToItsWaiter(t *testing.T) {
	t.Parallel()
	b := newJourneyBoard(1)
	b.read(`{"type":"order.delivery","order_id":"7","status":"PLACED","delivery":{"out_no":"TK7-1"}}`)
	ev, err := b.wait(context.Background(), boardKey{"7", "delivery", "PLACED"})
	if err != nil || string(ev.Delivery) != `{"out_no":"TK7-1"}` {
		t.Fatalf("an event read before the wait: %+v, %v", ev, err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.wait(context.Background(), boardKey{"7", "order", "COMPLETED"})
		got <- err
	}()
	for {
		b.mu.Lock()
		waiting := len(b.waits)
		b.mu.Unlock()
		if waiting == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.read(`{"type":"order.delivery","order_id":"7","status":"COMPLETED"}`) // a delivery's, not the order's
	b.read(`{"type":"order.completed","order_id":"7","status":"COMPLETED"}`)
	if err := <-got; err != nil {
		t.Fatalf("an event read after the wait: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.wait(ctx, boardKey{"7", "delivery", "PLACED"}); err == nil {
		t.Fatal("an event handed out twice")
	}
}
