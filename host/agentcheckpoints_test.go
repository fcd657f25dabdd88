package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// Through the owner, without a VM: an agent's checkpoint puts back its
// home and settings, saving the state it replaces, and leaves another
// agent alone; a fork is a new agent with its own uid and a copy.
func TestAgentCheckpointsThroughTheOwner(t *testing.T) {
	h := testHost(t)
	ctx := context.Background()
	p := h.Paths()
	o := agents.AddOptions{Workspace: p.Workspace()}
	alice, err := h.reg.AddWith("alice", o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.reg.AddWith("bob", o); err != nil {
		t.Fatal(err)
	}
	home := func(slug string) string { return agents.HostHome(p.Workspace(), slug) }
	for _, s := range []string{"alice", "bob"} {
		os.MkdirAll(home(s), 0o700)
		os.WriteFile(filepath.Join(home(s), "notes"), []byte(s+"'s notes"), 0o600)
	}
	if _, err := h.CreateAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: "alice", Label: "good"}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(home("alice"), "notes"))
	os.WriteFile(filepath.Join(home("bob"), "notes"), []byte("bob's new notes"), 0o600)
	if _, err := h.reg.Update("alice", func(a *agents.Agent) error { a.DiskGB = 7; return nil }); err != nil {
		t.Fatal(err)
	}
	r, err := h.RestoreAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: "alice", Label: "good"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(home("alice"), "notes")); string(b) != "alice's notes" {
		t.Errorf("alice's notes after restore: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(home("bob"), "notes")); string(b) != "bob's new notes" {
		t.Errorf("bob's notes changed by alice's restore: %q", b)
	}
	if a, _ := h.reg.Get("alice"); a.DiskGB != alice.DiskGB {
		t.Errorf("settings not restored: diskGB %v, want %v", a.DiskGB, alice.DiskGB)
	}
	l, err := h.ListAgentCheckpoints(ctx, api.AgentCheckpointRequest{Agent: "alice"})
	if err != nil || len(l.Checkpoints) != 2 || l.Checkpoints[1].Label != r.Saved.Label || l.Checkpoints[1].Reason != "before restoring good" {
		t.Fatalf("list after restore: %+v %v", l.Checkpoints, err)
	}

	f, err := h.ForkAgent(ctx, api.ForkRequest{Agent: "alice", New: "alice2"})
	if err != nil {
		t.Fatal(err)
	}
	if f.Agent.UID == alice.UID || f.Agent.UID == 0 {
		t.Errorf("fork's uid %d, original's %d", f.Agent.UID, alice.UID)
	}
	if b, _ := os.ReadFile(filepath.Join(home(f.Agent.Slug), "notes")); string(b) != "alice's notes" {
		t.Errorf("fork's notes: %q", b)
	}
	if _, err := h.ForkAgent(ctx, api.ForkRequest{Agent: "alice", New: "alice2"}); err == nil {
		t.Error("a fork to a taken name succeeded")
	}
	if _, err := h.RestoreAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: "bob", Label: "good"}); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("bob restoring alice's checkpoint: %v", err)
	}
}
