package mcpserver

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// An MCP client sees the Sandbox Plugin Creator skill, as a prompt and in
// the instructions, exactly while the documented condition holds:
// autonomous exec, pluginCreate, no plugin tools, and the agent's
// pluginCreatorSkill setting not off.
func TestPluginCreatorSkillFollowsTheCondition(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	lib, err := plugins.OpenLibrary(filepath.Join(dir, "library"))
	if err != nil {
		t.Fatal(err)
	}
	installed := plugins.NewInstalled(filepath.Join(dir, "agents"))
	g := fakeGuest(t)
	f.cfg.Env = tools.NewEnv(tools.Options{Guest: func(context.Context) (*agentproto.Client, error) { return g, nil },
		Plugins: installed, Registry: &tools.PluginRegistry{Library: lib, Allowlist: func() plugins.Allowlist { return plugins.Allowlist{} }}})

	sees := func(t *testing.T) (prompt, instr bool) {
		t.Helper()
		cs := connectInMemory(t, f, "bob", newChanges())
		res, err := cs.ListPrompts(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Prompts {
			if p.Name == tools.PluginCreatorSkillName {
				prompt = true
				got, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: p.Name})
				if err != nil {
					t.Fatal(err)
				}
				text := got.Messages[0].Content.(*mcp.TextContent).Text
				for _, want := range []string{"# Sandbox Plugin Creator", "sandbox_plugin_register", "Restricted defaults", "Why a registration is rejected", "PARAM_"} {
					if !strings.Contains(text, want) {
						t.Errorf("the prompt lacks %q", want)
					}
				}
			}
		}
		instr = strings.Contains(cs.InitializeResult().Instructions, "# Sandbox Plugin Creator")
		return prompt, instr
	}
	steps := []struct {
		name string
		set  func(*agents.Agent)
		want bool
	}{
		{"autonomous exec off", func(*agents.Agent) {}, false},
		{"autonomous exec and pluginCreate on", func(a *agents.Agent) { a.AutonomousExec.Enabled = true }, true},
		{"pluginCreate off", func(a *agents.Agent) { a.AutonomousExec.PluginCreate = false }, false},
		{"pluginCreate on again", func(a *agents.Agent) { a.AutonomousExec.PluginCreate = true }, true},
		{"skill switched off", func(a *agents.Agent) { a.AutonomousExec.PluginCreatorSkillOff = true }, false},
		{"skill on again", func(a *agents.Agent) { a.AutonomousExec.PluginCreatorSkillOff = false }, true},
		{"a plugin installed", func(a *agents.Agent) {
			if err := installed.Record(context.Background(), a.ID, greet(t), 1); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, s := range steps {
		if _, err := f.reg.Update("bob", func(a *agents.Agent) error { s.set(a); return nil }); err != nil {
			t.Fatal(err)
		}
		prompt, instr := sees(t)
		if prompt != s.want || instr != s.want {
			t.Errorf("%s: prompt listed %v, in instructions %v; want %v", s.name, prompt, instr, s.want)
		}
	}
}
