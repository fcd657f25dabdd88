package host

import (
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// The idle decision the owner gives the sandbox: an agent's running
// processes keep the VM awake unless it opted out (backgroundKeepsAwake
// false); an opted-out agent's processes don't hide another's.
func TestBackgroundKeepsAwakeDecision(t *testing.T) {
	agent := func(slug string, keeps bool) agents.Agent {
		a := agents.Agent{ID: slug + "-id", Name: slug, Slug: slug}
		a.AutonomousExec.BackgroundKeepsAwakeOff = !keeps
		return a
	}
	in, out := agent("alice", true), agent("bob", false)
	list := []agents.Agent{in, out}
	use := func(a agents.Agent, procs int) agentproto.UserUsage {
		return agentproto.UserUsage{User: a.User(), Processes: procs}
	}
	for _, tc := range []struct {
		name  string
		users []agentproto.UserUsage
		awake bool
	}{
		{"no users", nil, false},
		{"nobody has a process", []agentproto.UserUsage{use(in, 0), use(out, 0)}, false},
		{"opted in, with a process", []agentproto.UserUsage{use(in, 1), use(out, 0)}, true},
		{"opted out, with processes", []agentproto.UserUsage{use(in, 0), use(out, 3)}, false},
		{"both with processes", []agentproto.UserUsage{use(out, 3), use(in, 2)}, true},
		{"opted in, without a process; opted out with", []agentproto.UserUsage{use(out, 1)}, false},
		{"a user no agent has, with a process", []agentproto.UserUsage{{User: "agent-gone", Processes: 1}}, true},
		{"a user no agent has, without", []agentproto.UserUsage{{User: "agent-gone"}}, false},
	} {
		got := sandbox.ProcessesKeepAwake(tc.users, func(user string) bool { return processesKeepAwake(list, user) })
		if got != tc.awake {
			t.Errorf("%s: keeps awake %v, want %v", tc.name, got, tc.awake)
		}
	}
	// Without the owner's answer (nil), every process counts.
	if !sandbox.ProcessesKeepAwake([]agentproto.UserUsage{use(out, 1)}, nil) {
		t.Error("with no opt-outs known, a process did not keep the VM awake")
	}
}

// The owner answers from its registry as it is now: a changed setting
// holds at the next idle check, with no restart.
func TestOwnerReadsBackgroundKeepsAwake(t *testing.T) {
	h := testHost(t)
	a, err := h.reg.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	keeps := h.processesKeepAwake
	if !keeps(a.User()) {
		t.Fatal("a new agent's processes don't keep the VM awake")
	}
	if _, err := h.reg.Update(a.ID, func(x *agents.Agent) error { return x.Set("backgroundKeepsAwake", "false") }); err != nil {
		t.Fatal(err)
	}
	if keeps(a.User()) {
		t.Error("after backgroundKeepsAwake false, alice's processes still keep the VM awake")
	}
}
