package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// skillOf is the Sandbox Plugin Creator prompt's text as s's server gives
// it, and whether its instructions carry it; "" when it isn't listed.
func skillOf(t *testing.T, s *session) (prompt string, inInstructions bool) {
	t.Helper()
	ctx := context.Background()
	res, err := s.cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatalf("%s: prompts/list: %v", s.name, err)
	}
	for _, p := range res.Prompts {
		if p.Name == tools.PluginCreatorSkillName {
			got, err := s.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.Name})
			if err != nil {
				t.Fatalf("%s: prompts/get: %v", s.name, err)
			}
			prompt = got.Messages[0].Content.(*mcp.TextContent).Text
		}
	}
	return prompt, strings.Contains(s.cs.InitializeResult().Instructions, "# Sandbox Plugin Creator")
}

// TestPluginCreatorSkillE2E: an agent with autonomous exec and
// pluginCreate and no plugins sees the skill (prompt and instructions)
// over MCP; it follows the skill's minimal example (write the recipe, test
// the tool as it will run, register) and the registered tool works on the
// real guest; then, with a plugin tool of its own, the skill is gone. An
// agent without autonomous exec never sees it.
func TestPluginCreatorSkillE2E(t *testing.T) {
	te := newToolsEnvOn(t, sharedGuest(t), false)
	alice := te.addAgent(t, "skill-alice", func(ae *agents.AutonomousExec) { ae.Enabled = true })
	te.addAgent(t, "skill-bob", nil)

	if p, instr := skillOf(t, te.http(t, "skill-bob")); p != "" || instr {
		t.Fatalf("an agent without autonomous exec sees the skill (prompt %v, instructions %v)", p != "", instr)
	}
	s := te.http(t, alice.Slug)
	text, instr := skillOf(t, s)
	if text == "" || !instr {
		t.Fatalf("the agent doesn't see the skill: prompt %q, instructions %v", text, instr)
	}
	// Follow it: the minimal example, as the skill gives it.
	_, rest, _ := strings.Cut(text, "```json\n")
	recipe, _, _ := strings.Cut(rest, "```")
	if !strings.Contains(recipe, `"name": "Word Count"`) {
		t.Fatalf("the skill's first example is not the minimal one: %s", recipe)
	}
	s.ok(t, "sandbox_write_file", map[string]any{"path": "~/plugins/word-count/plugin.json", "content": recipe})
	s.ok(t, "sandbox_write_file", map[string]any{"path": "notes.txt", "content": "one two three four\n"})
	// Step 2: test the tool before registering, as it will run.
	r := s.ok(t, "sandbox_exec", map[string]any{"cwd": "plugins/word-count", "command": `PARAM_FILE=$HOME/notes.txt sh -c 'wc -w < "$PARAM_FILE"'`})
	if strings.TrimSpace(str(r["stdout"])) != "4" {
		t.Fatalf("testing the tool: %v", r)
	}
	r = s.ok(t, "sandbox_plugin_register", map[string]any{"plugin_id": "word-count"})
	if r["status"] != "installed" {
		t.Fatalf("register: %v", r)
	}
	s.waitChanged(t)
	if r := s.ok(t, "word-count_count", map[string]any{"file": alice.Home() + "/notes.txt"}); strings.TrimSpace(str(r["stdout"])) != "4" {
		t.Fatalf("the registered tool: %v", r)
	}
	// The skill is a backstop: with a plugin tool it is withdrawn.
	if p, instr := skillOf(t, te.http(t, alice.Slug)); p != "" || instr {
		t.Fatalf("with a plugin installed the agent still sees the skill (prompt %v, instructions %v)", p != "", instr)
	}
}
