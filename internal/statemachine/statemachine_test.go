package statemachine_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/takeout/takeout/internal/statemachine"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		current statemachine.Status
		event   statemachine.Event
		actor   statemachine.Actor
		to      statemachine.Status // "" when not a transition
		replay  bool
		err     string // "conflict" or "forbidden"
	}{
		{statemachine.PendingPayment, statemachine.Cancel, statemachine.User, statemachine.Cancelled, false, ""},
		{statemachine.Paid, statemachine.Cancel, statemachine.User, statemachine.Refunding, false, ""},
		{statemachine.Cancelled, statemachine.Cancel, statemachine.User, "", true, ""},
		{statemachine.Refunding, statemachine.Cancel, statemachine.User, "", true, ""},
		{statemachine.Accepted, statemachine.Cancel, statemachine.User, "", false, "conflict"},
		{statemachine.Accepted, statemachine.Accept, statemachine.Merchant, "", true, ""},
		{statemachine.Delivering, statemachine.Accept, statemachine.Merchant, "", false, "conflict"},
		{statemachine.Paid, statemachine.Accept, statemachine.User, "", false, "forbidden"},
		{statemachine.PendingPayment, statemachine.Pay, statemachine.User, "", false, "forbidden"},
		{statemachine.Cancelled, statemachine.Timeout, statemachine.System, "", true, ""},
		{statemachine.Paid, statemachine.Timeout, statemachine.System, "", false, "conflict"},
		{statemachine.Delivering, statemachine.AutoComplete, statemachine.System, statemachine.Completed, false, ""},
		{statemachine.Completed, statemachine.AutoComplete, statemachine.System, "", true, ""},
		{statemachine.Completed, statemachine.RefundDone, statemachine.Payment, statemachine.Refunded, false, ""},
		{statemachine.Paid, statemachine.RefundDone, statemachine.Payment, statemachine.Refunded, false, ""},
		{statemachine.Paid, statemachine.RefundDone, statemachine.User, "", false, "forbidden"},
		{statemachine.PendingPayment, statemachine.RefundDone, statemachine.Payment, "", false, "conflict"},
		{statemachine.Accepted, statemachine.MarkReady, statemachine.Merchant, statemachine.Ready, false, ""},
		{statemachine.Ready, statemachine.MarkReady, statemachine.Merchant, "", true, ""},
		{statemachine.Ready, statemachine.MarkReady, statemachine.User, "", false, "forbidden"},
		{statemachine.Paid, statemachine.MarkReady, statemachine.Merchant, "", false, "conflict"},
		{statemachine.Ready, statemachine.Dispatch, statemachine.Merchant, statemachine.Delivering, false, ""},
		{statemachine.Accepted, statemachine.Dispatch, statemachine.Merchant, statemachine.Delivering, false, ""},
		{statemachine.Ready, statemachine.Refund, statemachine.Admin, statemachine.Refunding, false, ""},
		{statemachine.Ready, statemachine.Cancel, statemachine.User, "", false, "conflict"},
		{statemachine.Delivering, statemachine.Complete, statemachine.User, statemachine.Completed, false, ""},
		{statemachine.Completed, statemachine.Complete, statemachine.User, "", true, ""},
		{statemachine.Ready, statemachine.Complete, statemachine.User, "", false, "conflict"},
		// The accept deadline: only the system fires it, only on a paid
		// order; a merchant who accepted first makes the auto-accept a
		// replay and the auto-reject a conflict (the sweep's "moved on").
		{statemachine.Paid, statemachine.AutoAccept, statemachine.System, statemachine.Accepted, false, ""},
		{statemachine.Paid, statemachine.AutoReject, statemachine.System, statemachine.Refunding, false, ""},
		{statemachine.Paid, statemachine.AutoReject, statemachine.Merchant, "", false, "forbidden"},
		{statemachine.Accepted, statemachine.AutoAccept, statemachine.System, "", true, ""},
		{statemachine.Accepted, statemachine.AutoReject, statemachine.System, "", false, "conflict"},
		{statemachine.PendingPayment, statemachine.AutoReject, statemachine.System, "", false, "conflict"},
		// The merchant's tap after the system accepted is a replay.
		{statemachine.Accepted, statemachine.Accept, statemachine.Admin, "", true, ""},
	}
	for _, tt := range tests {
		d, err := statemachine.Default().Decide(tt.current, tt.event, tt.actor)
		var ce *statemachine.ConflictError
		var fe *statemachine.ForbiddenError
		switch {
		case tt.err == "conflict" && !errors.As(err, &ce):
			t.Errorf("%s %s by %s: %v, want a conflict", tt.current, tt.event, tt.actor, err)
		case tt.err == "forbidden" && !errors.As(err, &fe):
			t.Errorf("%s %s by %s: %v, want forbidden", tt.current, tt.event, tt.actor, err)
		case tt.err == "" && err != nil:
			t.Errorf("%s %s by %s: %v", tt.current, tt.event, tt.actor, err)
		case tt.err == "" && d.Replay != tt.replay:
			t.Errorf("%s %s by %s: replay %v", tt.current, tt.event, tt.actor, d.Replay)
		case tt.err == "" && tt.to != "" && (d.Transition == nil || d.Transition.To != tt.to):
			t.Errorf("%s %s by %s: %+v, want to %s", tt.current, tt.event, tt.actor, d.Transition, tt.to)
		}
	}
}

// Every status but the first is reachable, and every (from, event) pair
// is unique: the table is a function.
func TestTableIsWellFormed(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	reached := map[statemachine.Status]bool{statemachine.PendingPayment: true}
	for _, tr := range statemachine.Table() {
		k := string(tr.From) + "/" + string(tr.Event)
		if seen[k] {
			t.Errorf("two transitions for %s", k)
		}
		seen[k] = true
		reached[tr.To] = true
		if len(tr.Actors) == 0 {
			t.Errorf("%s has no actor", k)
		}
	}
	for _, s := range statemachine.Statuses() {
		if !reached[s] {
			t.Errorf("%s unreachable", s)
		}
	}
	for _, s := range []statemachine.Status{statemachine.Cancelled, statemachine.Refunded} {
		if !statemachine.Terminal(s) {
			t.Errorf("%s is not terminal", s)
		}
	}
	// A completed order leaves only when partial refunds give all of it
	// back.
	for _, tr := range statemachine.Table() {
		if tr.From == statemachine.Completed && (tr.Event != statemachine.RefundDone || tr.To != statemachine.Refunded) {
			t.Errorf("COMPLETED --%s--> %s", tr.Event, tr.To)
		}
	}
}

// The README's diagram is generated from the table (go generate ./...);
// this fails when they drift.
func TestREADMEDiagramMatchesTable(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := beginMarker + "\n```mermaid\n" + statemachine.Mermaid() + "```\n" + endMarker
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md's state diagram differs from the table; run go generate ./internal/statemachine")
	}
}

const (
	beginMarker = "<!-- BEGIN statemachine diagram (go generate ./internal/statemachine) -->"
	endMarker   = "<!-- END statemachine diagram -->"
)
