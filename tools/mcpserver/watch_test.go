package mcpserver

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools"
)

const greetJSON = `{"name": "Hello Tools", "description": "Says hello", "version": "1.0.0",
 "tools": [{"id": "greet", "description": "Greets someone", "run": "echo hello $PARAM_WHO",
   "parameters": {"who": {"type": "string", "default": "world"}}}]}`

// A change another process makes (the CLI, the app) to the registry or to
// an agent's installed plugins reaches connected clients as
// tools/list_changed, with no timer: the watches' polling interval is an
// hour, so only change notification can pass.
func TestWatchAnnouncesOtherProcessesChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, f *fixture, state string)
		want   string // the tool that appears
	}{
		{"agents.json replaced", func(t *testing.T, f *fixture, _ string) {
			other, err := agents.Open(f.reg.Path())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.Update("bob", func(a *agents.Agent) error { a.AutonomousExec.BackgroundProcesses = true; return nil }); err != nil {
				t.Fatal(err)
			}
		}, "sandbox_exec_background"},
		{"a plugin installed", func(t *testing.T, f *fixture, state string) {
			p := greet(t)
			// The agent's folder doesn't exist yet: its creation is noticed.
			if err := plugins.NewInstalled(state).Record(context.Background(), f.bob.ID, p, 1); err != nil {
				t.Fatal(err)
			}
		}, greet(t).ToolName("greet")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			state := filepath.Join(t.TempDir(), "agents")
			g := fakeGuest(t)
			f.cfg.Env = tools.NewEnv(tools.Options{Guest: func(context.Context) (*agentproto.Client, error) { return g, nil }, Plugins: plugins.NewInstalled(state)})
			f.set(t, "bob", func(ae *agents.AutonomousExec) { ae.Enabled, ae.BackgroundProcesses = true, false })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go Watch(ctx, f.reg, time.Hour, t.Logf)
			go WatchPlugins(ctx, f.cfg.Env, time.Hour)
			ch := newChanges()
			cs := connectInMemory(t, f, "bob", ch)
			before := listNames(t, cs)
			if slices.Contains(before, tt.want) {
				t.Fatalf("already listed: %v", before)
			}
			tt.change(t, f, state)
			for deadline := time.Now().Add(10 * time.Second); ; {
				ch.wait(t)
				if got := listNames(t, cs); slices.Contains(got, tt.want) {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("tools after the change: %v", got)
				}
			}
		})
	}
}

func greet(t *testing.T) *plugins.Plugin {
	t.Helper()
	p, err := plugins.DecodeBytes([]byte(greetJSON))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
