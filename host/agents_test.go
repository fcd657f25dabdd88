package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
)

// The owner's agent operations keep every check the registry makes, and
// a change of several settings is stored whole or not at all.
func TestAgentOpsValidate(t *testing.T) {
	ctx := context.Background()
	h := testHost(t)
	alice, err := h.AddAgent(ctx, control.AgentAddRequest{Name: "Data Analyst"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := h.AddAgent(ctx, control.AgentAddRequest{Name: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	set := func(kv ...string) control.AgentUpdateRequest {
		r := control.AgentUpdateRequest{Agent: "bob"}
		for i := 0; i < len(kv); i += 2 {
			r.Settings = append(r.Settings, control.Setting{Key: kv[i], Value: kv[i+1]})
		}
		return r
	}
	for _, tt := range []struct {
		name string
		err  func() error
		want string // in the error
	}{
		{"a name that folds to another agent's slug", func() error {
			_, err := h.UpdateAgent(ctx, set("name", "data_analyst"))
			return err
		}, "too like agent"},
		{"an added name that folds to another's", func() error {
			_, err := h.AddAgent(ctx, control.AgentAddRequest{Name: "DATA ANALYST"})
			return err
		}, "already used"},
		{"a home choice that isn't one", func() error {
			_, err := h.AddAgent(ctx, control.AgentAddRequest{Name: "carol", Home: "keep"})
			return err
		}, "home"},
		{"dispatch to itself", func() error {
			_, err := h.UpdateAgent(ctx, set("dispatchTo", "bob"))
			return err
		}, "other agents"},
		{"dispatch to nobody known", func() error {
			_, err := h.UpdateAgent(ctx, set("dispatchTo", "zed"))
			return err
		}, `dispatchTo: "zed"`},
		{"projects without their views", func() error {
			_, err := h.UpdateAgent(ctx, set("projects", "web"))
			return err
		}, "SetAgentProjects"},
		{"one bad setting among good ones", func() error {
			_, err := h.UpdateAgent(ctx, set("enabled", "true", "memoryMB", "8"))
			return err
		}, "memoryMB"},
		{"an unknown agent", func() error {
			_, err := h.UpdateAgent(ctx, control.AgentUpdateRequest{Agent: "nobody", Settings: []control.Setting{{Key: "enabled", Value: "true"}}})
			if !errors.Is(err, agents.ErrNotFound) {
				return errors.New("not ErrNotFound")
			}
			return err
		}, "nobody"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.err(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
	if b, _ := h.Registry().Get(bob.ID); b.AutonomousExec.Enabled || b.Name != "bob" || len(b.DispatchTo) != 0 || len(h.Registry().List()) != 2 {
		t.Fatalf("a refused change was stored: %+v", b)
	}
	b, err := h.UpdateAgent(ctx, set("enabled", "true", "dispatchTo", "data analyst", "name", "Bobby"))
	if err != nil || !b.AutonomousExec.Enabled || b.Name != "Bobby" || !slices.Equal(b.DispatchTo, []string{alice.ID}) {
		t.Fatalf("a valid change: %+v %v", b, err)
	}
}

// GetAgent finds an agent as every other op does: by id, slug or name.
func TestGetAgent(t *testing.T) {
	ctx := context.Background()
	h := testHost(t)
	a, err := h.AddAgent(ctx, control.AgentAddRequest{Name: "Data Analyst"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		ref   string
		found bool
	}{{a.ID, true}, {"data-analyst", true}, {"Data Analyst", true}, {"bob", false}, {"", false}} {
		got, err := h.GetAgent(ctx, tt.ref)
		if tt.found != (err == nil) || tt.found && got.ID != a.ID || !tt.found && !errors.Is(err, agents.ErrNotFound) {
			t.Errorf("%q: %+v %v", tt.ref, got, err)
		}
	}
}

// ListAgents is every agent in the registry's order, each with a disk
// use (a home with a file in it is not 0): what a remote context's
// `agent list` shows.
func TestListAgents(t *testing.T) {
	ctx := context.Background()
	h := testHost(t)
	if l, err := h.ListAgents(ctx); err != nil || len(l.Agents) != 0 {
		t.Fatalf("no agents yet: %+v %v", l, err)
	}
	var want []string
	for _, n := range []string{"bob", "Alice"} {
		a, err := h.AddAgent(ctx, control.AgentAddRequest{Name: n})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, a.ID)
	}
	home := filepath.Join(h.paths.AgentHomes(), "alice")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "f"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := h.ListAgents(ctx)
	var got []string
	for _, a := range l.Agents {
		got = append(got, a.ID)
	}
	if err != nil || !slices.Equal(got, want) || l.DiskUsed["alice"] < 64<<10 || l.DiskUsed["bob"] != 0 {
		t.Fatalf("got %v %v (disk %v), want %v", got, err, l.DiskUsed, want)
	}
}
