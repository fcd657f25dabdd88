package host

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// aliceAndBob adds the agents alice and bob to h, returning alice.
func aliceAndBob(t *testing.T, h *Host) agents.Agent {
	t.Helper()
	o := agents.AddOptions{Workspace: h.Paths().Workspace()}
	alice, err := h.reg.AddWith("alice", o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.reg.AddWith("bob", o); err != nil {
		t.Fatal(err)
	}
	return alice
}

// Through the owner, without a VM: an agent's checkpoint puts back its
// home and settings, saving the state it replaces, and leaves another
// agent alone; a fork is a new agent with its own uid and a copy.
func TestAgentCheckpointsThroughTheOwner(t *testing.T) {
	h := testHost(t)
	ctx := context.Background()
	p := h.Paths()
	alice := aliceAndBob(t, h)
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

// sandbox_checkpoint is gated like writes (autonomous exec), checks its
// label, and is bounded in count and in disk (the agent's quota).
func TestSandboxCheckpointTool(t *testing.T) {
	h := testHost(t)
	ctx := context.Background()
	p := h.Paths()
	a, err := h.reg.AddWith("alice", agents.AddOptions{Workspace: p.Workspace()})
	if err != nil {
		t.Fatal(err)
	}
	home := agents.HostHome(p.Workspace(), a.Slug)
	os.MkdirAll(home, 0o700)
	os.WriteFile(filepath.Join(home, "notes"), []byte("notes"), 0o600)
	call := func(label string) envelope.Envelope {
		return h.ToolHost.RunTool(ctx, a.ID, "sandbox_checkpoint", json.RawMessage(`{"label":"`+label+`"}`))
	}
	if e := call("x"); e.OK || e.Kind != envelope.ToolNotFound {
		t.Fatalf("without autonomous exec: %+v", e)
	}
	if _, err := h.reg.Update(a.ID, func(x *agents.Agent) error { x.AutonomousExec.Enabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if e := call("../../etc"); e.OK || e.Kind != envelope.InvalidArgs {
		t.Fatalf("a label with a path: %+v", e)
	}
	for i := range MaxAgentOwnCheckpoints {
		if e := call("c" + strconv.Itoa(i)); !e.OK {
			t.Fatalf("checkpoint %d: %+v", i, e)
		}
	}
	if e := call("one-more"); e.OK || !strings.Contains(e.Message, "at most 5") {
		t.Fatalf("beyond the count: %+v", e)
	}
	l, _ := h.ListAgentCheckpoints(ctx, api.AgentCheckpointRequest{Agent: "alice"})
	if len(l.Checkpoints) != MaxAgentOwnCheckpoints || l.Checkpoints[0].Reason != checkpoint.ReasonAgent {
		t.Fatalf("list: %+v", l.Checkpoints)
	}
	// A small quota the home and one checkpoint of it would exceed.
	for _, m := range l.Checkpoints {
		h.RemoveAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: "alice", Label: m.Label})
	}
	os.WriteFile(filepath.Join(home, "big"), make([]byte, 6<<20), 0o600)
	if _, err := h.reg.Update(a.ID, func(x *agents.Agent) error { x.DiskGB = 0.01; return nil }); err != nil {
		t.Fatal(err)
	}
	if e := call("big"); e.OK || !strings.Contains(e.Message, "disk quota") {
		t.Fatalf("beyond the quota: %+v", e)
	}
	if l, _ := h.ListAgentCheckpoints(ctx, api.AgentCheckpointRequest{Agent: "alice"}); len(l.Checkpoints) != 0 {
		t.Fatalf("the refused checkpoint was kept: %+v", l.Checkpoints)
	}
}

// Removing an agent removes its checkpoints (copies of its home) and
// says how many and how much disk; another agent's stay, a checkpoint of
// the removed agent begun too late leaves nothing, and a new agent with
// the same slug starts with none of the old ones.
func TestRemoveAgentRemovesItsCheckpoints(t *testing.T) {
	h := testHost(t)
	ctx := context.Background()
	p := h.Paths()
	alice := aliceAndBob(t, h)
	for _, s := range []string{"alice", "bob"} {
		home := agents.HostHome(p.Workspace(), s)
		os.MkdirAll(home, 0o700)
		os.WriteFile(filepath.Join(home, "notes"), make([]byte, 64<<10), 0o600)
	}
	var disk int64
	for _, l := range []string{"one", "two"} {
		m, err := h.CreateAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: "alice", Label: l})
		if err != nil {
			t.Fatal(err)
		}
		disk += m.DiskBytes
	}
	if _, err := h.CreateAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: "bob", Label: "one"}); err != nil {
		t.Fatal(err)
	}
	dir := h.agentCheckpoints().Dir(alice)
	if _, err := os.Stat(filepath.Join(dir, "one", "data", "home", "notes")); err != nil || disk == 0 {
		t.Fatalf("alice's checkpoint holds no copy of her home (%v, %d bytes): the test would prove nothing", err, disk)
	}

	r, err := h.RemoveAgent(ctx, api.RemoveAgentRequest{Agent: "alice"})
	if err != nil || r.Checkpoints != 2 || r.CheckpointBytes != disk || r.CheckpointsError != "" {
		t.Fatalf("RemoveAgent: %d checkpoints, %d bytes (%q), %v; want 2, %d", r.Checkpoints, r.CheckpointBytes, r.CheckpointsError, err, disk)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alice's checkpoint folder after her removal: %v", err)
	}
	if l, err := h.ListAgentCheckpoints(ctx, api.AgentCheckpointRequest{Agent: "bob"}); err != nil || len(l.Checkpoints) != 1 || l.Checkpoints[0].Label != "one" {
		t.Errorf("bob's checkpoints after alice's removal: %+v %v", l.Checkpoints, err)
	}
	if _, err := h.RestoreAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: "bob", Label: "one"}); err != nil {
		t.Errorf("restoring bob's checkpoint after alice's removal: %v", err)
	}

	// A checkpoint that resolved alice before her removal and is written
	// after it.
	if _, err := h.agentCheckpoint(ctx, alice, "late", checkpoint.ReasonUser); !errors.Is(err, agents.ErrNotFound) {
		t.Errorf("a checkpoint of the removed agent: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the late checkpoint left %s: %v", dir, err)
	}

	again, err := h.reg.AddWith("alice", agents.AddOptions{Workspace: p.Workspace(), Home: agents.HomeAdopt})
	if err != nil {
		t.Fatal(err)
	}
	if again.Slug != alice.Slug || again.ID == alice.ID {
		t.Fatalf("the new alice: slug %q id %q; the old: %q %q", again.Slug, again.ID, alice.Slug, alice.ID)
	}
	if l, err := h.ListAgentCheckpoints(ctx, api.AgentCheckpointRequest{Agent: "alice"}); err != nil || len(l.Checkpoints) != 0 {
		t.Errorf("the new alice sees checkpoints: %+v %v", l.Checkpoints, err)
	}
	if _, err := h.RestoreAgentCheckpoint(ctx, api.AgentCheckpointRequest{Agent: "alice", Label: "one"}); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("the new alice restoring the old one's checkpoint: %v", err)
	}
}
