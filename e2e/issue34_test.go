package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/store/events"
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

// TestEventsInTheGuest: `osaurus-host events list|follow` in the VM. A
// plugin of alice emits; alice's follower (and her list) sees it, marked
// with the plugin; bob's follower never gets it (his first event is his
// own), and his list doesn't show it.
func TestEventsInTheGuest(t *testing.T) {
	m := sharedGuest(t)
	g := m.Agent()
	ctx := context.Background()
	data := t.TempDir()
	paths := config.Paths{Root: data}
	reg := openAgents(t, paths.AgentsJSON())
	ev, err := events.Open(ctx, paths.EventsDB(), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	br := bridge.New(bridge.Options{Events: ev, HostCLI: assets.HostCLI})
	t.Cleanup(func() { br.Close() })
	attachBridge(t, m, br)
	env, _ := pluginServer(t, m, reg, data)
	add := func(name string) agents.Agent {
		a, err := reg.Add(name)
		if err == nil {
			a, err = reg.Update(a.ID, func(a *agents.Agent) error { a.AutonomousExec.Enabled = true; return nil })
		}
		if err != nil {
			t.Fatal(err)
		}
		// Its Linux user, as its first tool call makes it.
		if e := env.Toolset(a).Run(ctx, "sandbox_list_directory", json.RawMessage(`{}`)); e.IsError() {
			t.Fatalf("creating %s's user: %s", name, e.JSON())
		}
		return a
	}
	alice, bob := add("ev-alice"), add("ev-bob")
	p, err := plugins.DecodeBytes([]byte(`{"name": "Greeter", "description": "Emits an event",
		"tools": [{"id": "emit", "description": "Emit greeter:hello", "run": "osaurus-host events emit greeter:hello '{\"n\":1}'"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Toolset(alice).InstallPlugin(ctx, p, 1, nil); err != nil {
		t.Fatal(err)
	}
	since, err := ev.LastID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Each follower prints its first event and ends (head; the extra
	// events emitted below end osaurus-host with SIGPIPE).
	type result struct {
		out, errOut string
		err         error
	}
	follow := func(a agents.Agent) chan result {
		c := make(chan result, 1)
		go func() {
			fctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			script := fmt.Sprintf("timeout 150 osaurus-host events follow --since %d | head -n 1", since)
			out, errOut, _, err := g.Output(fctx, agentproto.ExecRequest{Identity: agentproto.Identity{User: a.User()}, Shell: script})
			c <- result{string(out), string(errOut), err}
		}()
		return c
	}
	aliceF, bobF := follow(alice), follow(bob)
	if e := env.Toolset(alice).Run(ctx, "greeter_emit", json.RawMessage(`{}`)); e.IsError() {
		t.Fatalf("the plugin's tool: %s", e.JSON())
	}
	for _, a := range []agents.Agent{bob, alice, bob} {
		if out, errOut, st := sh(t, g, a.User(), "osaurus-host events emit "+a.Slug+":own"); st.Code != 0 {
			t.Fatalf("emit as %s: %q %q", a.Slug, out, errOut)
		}
	}
	a, b := <-aliceF, <-bobF
	if a.err != nil || !strings.Contains(a.out, "greeter:hello") || !strings.Contains(a.out, "(plugin greeter)") {
		t.Errorf("alice's follower: %q %q %v", a.out, a.errOut, a.err)
	}
	if b.err != nil || !strings.Contains(b.out, "ev-bob:own") || strings.Contains(b.out, "greeter") {
		t.Errorf("bob's follower: %q %q %v", b.out, b.errOut, b.err)
	}
	if out, errOut, st := sh(t, g, alice.User(), "osaurus-host events list --type greeter"); st.Code != 0 || !strings.Contains(out, "greeter:hello") {
		t.Errorf("alice's list: %d %q %q", st.Code, out, errOut)
	}
	if out, errOut, st := sh(t, g, bob.User(), "osaurus-host events list"); st.Code != 0 || strings.Contains(out, "greeter") || !strings.Contains(out, "ev-bob:own") {
		t.Errorf("bob's list: %d %q %q", st.Code, out, errOut)
	}
}
