package courier_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/takeout/takeout/internal/courier"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	tests := []struct {
		name  string
		cur   courier.State
		to    courier.Status
		rider string
		at    time.Time
		want  courier.Outcome
	}{
		{"the next step", courier.State{Status: courier.Placed}, courier.Assigned, "r1", *at(1), courier.Advance},
		{"steps skipped", courier.State{Status: courier.Placed, At: at(1)}, courier.Delivered, "r1", *at(2), courier.Advance},
		{"the same again", courier.State{Status: courier.Assigned, Rider: "r1", At: at(1)}, courier.Assigned, "r1", *at(1), courier.Stale},
		{"behind", courier.State{Status: courier.PickedUp, Rider: "r1", At: at(3)}, courier.Arrived, "r1", *at(4), courier.Stale},
		{"further, reported late", courier.State{Status: courier.Assigned, Rider: "r2", At: at(5)}, courier.Arrived, "r1", *at(4), courier.Catch},
		{"older and behind", courier.State{Status: courier.Arrived, Rider: "r1", At: at(5)}, courier.Assigned, "r1", *at(4), courier.Stale},
		{"another rider, older", courier.State{Status: courier.Assigned, Rider: "r2", At: at(5)}, courier.Assigned, "r1", *at(4), courier.Stale},
		{"another rider", courier.State{Status: courier.Assigned, Rider: "r1", At: at(1)}, courier.Assigned, "r2", *at(2), courier.Reassign},
		{"another rider taking it at the shop", courier.State{Status: courier.Arrived, Rider: "r1", At: at(1)}, courier.Assigned, "r2", *at(2), courier.Reassign},
		{"another rider after delivery", courier.State{Status: courier.Delivered, Rider: "r1", At: at(1)}, courier.Assigned, "r2", *at(2), courier.Stale},
		{"back to waiting", courier.State{Status: courier.Assigned, Rider: "r1", At: at(1)}, courier.Placed, "", *at(2), courier.Stale},
		{"cancelled by the provider", courier.State{Status: courier.Arrived, Rider: "r1", At: at(1)}, courier.Cancelled, "", *at(2), courier.Advance},
		{"after the end", courier.State{Status: courier.Cancelled, At: at(1)}, courier.Delivered, "r1", *at(2), courier.Stale},
		{"failed to place", courier.State{Status: courier.Placed}, courier.Failed, "", *at(1), courier.Advance},
		{"no provider time", courier.State{Status: courier.Placed, At: at(9)}, courier.Assigned, "r1", time.Time{}, courier.Advance},
		{"not a status", courier.State{Status: courier.Placed}, courier.Status("LOST"), "", *at(1), courier.Stale},
	}
	for _, tt := range tests {
		if got := courier.Decide(tt.cur, tt.to, tt.rider, tt.at); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestTableIsWellFormed(t *testing.T) {
	t.Parallel()
	reached := map[courier.Status]bool{courier.Quoted: true}
	for _, tr := range courier.Table() {
		reached[tr.To] = true
		if tr.From.Terminal() {
			t.Errorf("%s leaves an end", tr.From)
		}
	}
	for _, s := range courier.Statuses() {
		if !reached[s] {
			t.Errorf("%s unreachable", s)
		}
	}
	if courier.Allowed(courier.PickedUp, courier.Assigned) || courier.Allowed(courier.Delivered, courier.Cancelled) {
		t.Error("the table leads back")
	}
}

var progress = map[courier.Status]int{courier.Placed: 1, courier.Assigned: 2, courier.Arrived: 3, courier.PickedUp: 4, courier.Delivered: 5, courier.Cancelled: 6, courier.Failed: 6}

// update is one of a provider's reports.
type update struct {
	status courier.Status
	rider  string
	at     time.Time
}

// A provider's true course (steps skipped, riders reassigned, perhaps
// cancelled), reported in any order, each report any number of times:
// the status never goes back, ends at the furthest reported, with
// the rider of the latest report that names one, and the reports applied
// again change nothing.
func TestDecideProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		t0 := time.Unix(1_800_000_000, 0)
		var course []update
		clock := 0
		tick := func() time.Time { clock++; return t0.Add(time.Duration(clock) * time.Second) }
		rider, riders := "", 0
		for _, st := range []courier.Status{courier.Assigned, courier.Arrived, courier.PickedUp, courier.Delivered} {
			if st == courier.Assigned {
				riders++
				rider = "r" + string(rune('0'+riders))
			}
			if rapid.IntRange(0, 3).Draw(rt, "skip") > 0 || st == courier.Assigned {
				course = append(course, update{st, rider, tick()})
			}
			if (st == courier.Assigned || st == courier.Arrived) && rapid.IntRange(0, 3).Draw(rt, "reassign") == 0 {
				riders++
				rider = "r" + string(rune('0'+riders))
				course = append(course, update{courier.Assigned, rider, tick()})
			}
			if st != courier.Delivered && rapid.IntRange(0, 9).Draw(rt, "cancel") == 0 {
				course = append(course, update{courier.Cancelled, rider, tick()})
				break
			}
		}
		furthest := courier.Placed
		for _, u := range course {
			if progress[u.status] > progress[furthest] {
				furthest = u.status
			}
		}
		reports := rapid.Permutation(course).Draw(rt, "order")
		for range rapid.IntRange(0, 5).Draw(rt, "repeats") {
			reports = append(reports, rapid.SampledFrom(course).Draw(rt, "repeat"))
		}
		cur := courier.State{Status: courier.Placed}
		apply := func(u update) bool {
			switch courier.Decide(cur, u.status, u.rider, u.at) {
			case courier.Advance:
				if progress[u.status] <= progress[cur.Status] {
					rt.Fatalf("%s to %s is not forward", cur.Status, u.status)
				}
				cur.Status = u.status
			case courier.Catch:
				if progress[u.status] <= progress[cur.Status] {
					rt.Fatalf("%s to %s is not forward", cur.Status, u.status)
				}
				cur.Status = u.status
				return true
			case courier.Reassign:
			default:
				return false
			}
			cur.Rider, cur.At = u.rider, &u.at
			return true
		}
		for _, u := range reports {
			apply(u)
		}
		if cur.Status != furthest {
			rt.Fatalf("ended %s, the course got to %s", cur.Status, furthest)
		}
		if last := course[len(course)-1]; cur.Rider != last.rider {
			rt.Fatalf("rider %s, the latest report names %s", cur.Rider, last.rider)
		}
		for _, u := range course {
			if apply(u) {
				rt.Fatalf("%+v applied again", u)
			}
		}
	})
}

// docs/delivery.md's diagram is generated from the table (go generate
// ./internal/courier); this fails when they drift.
func TestDocDiagramMatchesTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/delivery.md")
	if err != nil {
		t.Fatal(err)
	}
	want := courier.DiagramBegin + "\n```mermaid\n" + courier.Mermaid() + "```\n" + courier.DiagramEnd
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/delivery.md's diagram differs from the table; run go generate ./internal/courier")
	}
}
