package runner_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// A task's system prompt carries the Sandbox Plugin Creator skill only for
// an agent with autonomous exec and pluginCreate, no plugins, and the skill
// not switched off.
func TestSystemPromptCarriesThePluginCreatorSkill(t *testing.T) {
	tests := []struct {
		name string
		set  func(*agents.AutonomousExec)
		want bool
	}{
		{"autonomous exec off", func(*agents.AutonomousExec) {}, false},
		{"autonomous exec on", func(ae *agents.AutonomousExec) { ae.Enabled = true }, true},
		{"pluginCreate off", func(ae *agents.AutonomousExec) { ae.Enabled, ae.PluginCreate = true, false }, false},
		{"skill switched off", func(ae *agents.AutonomousExec) { ae.Enabled, ae.PluginCreatorSkillOff = true, true }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			dir := t.TempDir()
			lib, err := plugins.OpenLibrary(filepath.Join(dir, "library"))
			if err != nil {
				t.Fatal(err)
			}
			f.r.Close()
			r := newRunnerWith(f, tools.Options{Guest: noVM, Agents: f.reg, Plugins: plugins.NewInstalled(filepath.Join(dir, "agents")),
				Registry: &tools.PluginRegistry{Library: lib, Allowlist: func() plugins.Allowlist { return plugins.Allowlist{} }}})
			t.Cleanup(r.Close)
			if _, err := f.reg.Update("alice", func(a *agents.Agent) error { tt.set(&a.AutonomousExec); return nil }); err != nil {
				t.Fatal(err)
			}
			f.model.Play(scriptedmodel.Turn{Content: "done"})
			if _, err := r.Run(context.Background(), "alice", "x", "cli", nil); err != nil {
				t.Fatal(err)
			}
			sys := f.model.Requests()[0].Messages[0]
			if got := strings.Contains(sys.Content, "# Sandbox Plugin Creator"); sys.Role != "system" || got != tt.want {
				t.Errorf("system prompt carries the skill: %v, want %v", got, tt.want)
			}
		})
	}
}
