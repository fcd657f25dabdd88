package runner_test

import (
	"errors"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// An agent dispatches to another only when its dispatchTo lists it; the
// task runs as the target and both see it; chains and fan-out stop at
// their bounds.
func TestDispatchToOtherAgents(t *testing.T) {
	f := setup(t)
	add := func(name string) agents.Agent {
		a, err := f.reg.Add(name)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	bob, _ := f.reg.Get("Bob")
	carol, dave, erin := add("Carol"), add("Dave"), add("Erin")
	grant := func(from string, to ...agents.Agent) {
		t.Helper()
		if _, err := f.reg.Update(from, func(a *agents.Agent) error {
			a.DispatchTo = nil
			for _, x := range to {
				a.DispatchTo = append(a.DispatchTo, x.ID)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Every model call waits until the test ends: tasks stay running.
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	f.model.Respond(func(scriptedmodel.Request) scriptedmodel.Turn { return scriptedmodel.Turn{Content: "done", Hold: hold} })

	for _, target := range []string{"Bob", "bob", bob.ID, "nobody"} {
		if _, err := f.r.Dispatch("alice", target, "x"); !errors.Is(err, runner.ErrForbidden) {
			t.Fatalf("alice to %s without dispatchTo: %v", target, err)
		}
	}
	grant("alice", bob)
	task, err := f.r.Dispatch("alice", "Bob", "x")
	if err != nil {
		t.Fatal(err)
	}
	if task.Agent != "bob" || task.DispatchedBy != "alice" || task.Depth != 1 || !task.VisibleTo("alice") || !task.VisibleTo("bob") || task.VisibleTo("carol") {
		t.Fatalf("dispatched task: %+v", task)
	}
	// Not symmetric: bob may not dispatch to alice.
	if _, err := f.r.Dispatch("bob", "alice", "x"); !errors.Is(err, runner.ErrForbidden) {
		t.Fatalf("bob to alice: %v", err)
	}
	// A chain: alice → bob (1) → carol (2) → dave (3) → erin (4) is refused.
	grant("bob", carol)
	grant("carol", dave)
	grant("dave", erin)
	for _, step := range []struct{ from, to string }{{"bob", "carol"}, {"carol", "dave"}} {
		if _, err := f.r.Dispatch(step.from, step.to, "x"); err != nil {
			t.Fatalf("%s to %s: %v", step.from, step.to, err)
		}
	}
	if _, err := f.r.Dispatch("dave", "erin", "x"); !errors.Is(err, runner.ErrBusy) {
		t.Fatalf("the 4th dispatch of a chain: %v", err)
	}
	// Fan-out: alice has one running at bob; two more, then refused.
	grant("alice", bob, carol, erin)
	for _, to := range []string{"carol", "erin"} {
		if _, err := f.r.Dispatch("alice", to, "x"); err != nil {
			t.Fatalf("alice to %s: %v", to, err)
		}
	}
	if _, err := f.r.Dispatch("alice", "bob", "x"); !errors.Is(err, runner.ErrBusy) {
		t.Fatalf("alice's 4th running dispatch: %v", err)
	}
}

// A self-dispatch continues its chain: alice → bob, bob → bob, bob →
// carol counts carol's task at depth 2.
func TestSelfDispatchKeepsTheChainsDepth(t *testing.T) {
	f := setup(t)
	carol, err := f.reg.Add("Carol")
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := f.reg.Get("Bob")
	for from, to := range map[string]string{"alice": bob.ID, "bob": carol.ID} {
		if _, err := f.reg.Update(from, func(a *agents.Agent) error { a.DispatchTo = []string{to}; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	f.model.Respond(func(scriptedmodel.Request) scriptedmodel.Turn { return scriptedmodel.Turn{Content: "done", Hold: hold} })
	var last runner.Task
	for _, step := range []struct{ from, to string }{{"alice", "bob"}, {"bob", ""}, {"bob", "carol"}} {
		var err error
		if last, err = f.r.Dispatch(step.from, step.to, "x"); err != nil {
			t.Fatalf("%s to %q: %v", step.from, step.to, err)
		}
	}
	if last.Agent != "carol" || last.Depth != 2 {
		t.Fatalf("carol's task: %+v", last)
	}
}
