//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/plugins"
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
	te := newToolsEnvCAs(t, false)
	alice := te.addAgent(t, "skill-alice", func(ae *agents.AutonomousExec) { ae.Enabled = true })
	te.addAgent(t, "skill-bob", nil)

	if p, instr := skillOf(t, te.http(t, "skill-bob")); p != "" || instr {
		t.Fatalf("an agent without autonomous exec sees the skill (prompt %v, instructions %v)", p != "", instr)
	}
	s := te.http(t, alice.Slug)
	// Background processes follow autonomous exec (issue 34 item 6): a
	// new agent with only enabled on has them, within the same limits.
	if names := s.tools(t); !slices.Contains(names, "sandbox_exec_background") || !slices.Contains(names, "sandbox_process") {
		t.Fatalf("a new agent with autonomous exec lacks background processes: %v", names)
	}
	bg := s.ok(t, "sandbox_exec_background", map[string]any{"command": "sleep 300"})
	pid := num(bg["pid"])
	if r := s.ok(t, "sandbox_process", map[string]any{"action": "kill", "pid": pid}); r == nil {
		t.Fatal("kill: no result")
	}
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
	// The owner's bridge serves the events; its tools install the plugin.
	h := sharedHost(t, nil)
	g := ownerAgent(t, h)
	ctx := context.Background()
	reg, env, ev := h.Registry(), h.Tools(), h.DataOwner.EventLog
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

// mapSecrets gives plugins their agent's secrets from a map (agent slug →
// name → value); the keychain is tested elsewhere.
type mapSecrets map[string]map[string]string

func (m mapSecrets) PluginSecrets(_ context.Context, agent, _ string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		v, ok := m[agent][n]
		if !ok {
			return nil, fmt.Errorf("no secret %s for %s", n, agent)
		}
		out[n] = v
	}
	return out, nil
}

// Stand-ins for the recipe's Python packages, built by the test and
// served from its loopback index: enough of pandas for the recipe's tool
// (read_csv, describe, to_string) and of matplotlib for its helpers.py.
const (
	stubPandas = `import csv as _csv, statistics as _st
class _Frame:
    def __init__(self, cols): self.cols = cols
    def describe(self):
        rows = ["count", "mean", "min", "max"]
        out = {}
        for k, v in self.cols.items():
            try: xs = [float(x) for x in v]
            except ValueError: continue
            out[k] = [len(xs), _st.mean(xs), min(xs), max(xs)]
        return _Described(rows, out)
class _Described:
    def __init__(self, rows, cols): self.rows, self.cols = rows, cols
    def to_string(self):
        lines = ["       " + "  ".join(self.cols)]
        for i, r in enumerate(self.rows):
            lines.append(r.ljust(7) + "  ".join("%g" % c[i] for c in self.cols.values()))
        return "\n".join(lines)
def read_csv(path):
    with open(path, newline="") as f:
        rs = list(_csv.DictReader(f))
    return _Frame({k: [r[k] for r in rs] for k in (rs[0].keys() if rs else [])})
`
	stubMatplotlib = `import sys as _sys, types as _types
def use(backend): pass
pyplot = _types.ModuleType("matplotlib.pyplot")
_sys.modules["matplotlib.pyplot"] = pyplot
`
)

// TestInstallsWhereTheAgentWorks: the documentation's example recipe,
// from its file byte for byte, installs on the test guest (its setup's
// `pip install --user` from the test's loopback index) and its tool runs;
// the agent's venv stays for sandbox_pip_install, with `pip install
// --user` working in it too; sandbox_npm_install and sandbox_pip_install
// with cwd install into the project folder.
func TestInstallsWhereTheAgentWorks(t *testing.T) {
	m := sharedGuest(t)
	g := m.Agent()
	ctx := context.Background()
	idx := serveLocalPackageIndexWith(t, g,
		map[string]string{"pandas": stubPandas, "matplotlib": stubMatplotlib, "seaborn": "", pipDemo: "VALUE = \"from the test index\"\n"},
		map[string]string{"left-pad": "#!/usr/bin/env node\nconsole.log('left-pad')\n"})
	data := t.TempDir()
	reg := openAgents(t, filepath.Join(data, "config", "agents.json"))
	a, err := reg.Add("doc-recipe")
	if err == nil {
		a, err = reg.Update(a.ID, func(a *agents.Agent) error { autonomous(100, false)(&a.AutonomousExec); return nil })
	}
	if err != nil {
		t.Fatal(err)
	}
	lib, err := plugins.OpenLibrary(filepath.Join(data, "plugins"))
	if err != nil {
		t.Fatal(err)
	}
	env := tools.NewEnv(tools.Options{
		Guest:   func(context.Context) (*agentproto.Client, error) { return g, nil },
		Agents:  reg,
		Plugins: plugins.NewInstalled(filepath.Join(data, "agents")),
		Secrets: mapSecrets{a.Slug: {"OPENAI_API_KEY": "sk-doc-recipe-0000"}},
		Registry: &tools.PluginRegistry{Library: lib, Allowlist: func() plugins.Allowlist {
			return plugins.NewAllowlist(config.DefaultPluginSetupAllowlist)
		}},
	})
	ts := env.Toolset(a)
	run := func(t *testing.T, tool string, args any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(args)
		e := ts.Run(ctx, tool, b)
		if e.IsError() {
			t.Fatalf("%s %s: %s", tool, b, e.JSON())
		}
		r, _ := json.Marshal(e.Result)
		var out map[string]any
		json.Unmarshal(r, &out)
		return out
	}

	t.Run("the documentation's recipe installs and its tool runs", func(t *testing.T) {
		f, err := os.Open(filepath.Join("..", "docs", "examples", "python-data-tools.json"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		p, err := plugins.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		var steps []tools.InstallStep
		if err := ts.InstallPlugin(ctx, p, 1, func(s tools.InstallStep) { steps = append(steps, s) }); err != nil {
			t.Fatalf("install: %v (steps %v)", err, steps)
		}
		if idx.fetched("/files/pandas-1.0.0-py3-none-any.whl") == 0 || idx.fetched("/files/seaborn-1.0.0-py3-none-any.whl") == 0 {
			t.Fatal("setup did not fetch its packages from the test's index")
		}
		run(t, "sandbox_write_file", map[string]any{"path": "prices.csv", "content": "item,price\na,1\nb,3\n"})
		r := run(t, "python-data-tools_analyze_csv", map[string]any{"file": a.Home() + "/prices.csv"})
		if out := str(r["stdout"]); !strings.Contains(out, "price") || !strings.Contains(out, "mean   2") {
			t.Fatalf("the recipe's tool: %v", r)
		}
		// The packages are the agent's own (its user site), not the system's.
		if r := run(t, "sandbox_exec", map[string]any{"command": "python3 -c 'import pandas; print(pandas.__file__)'"}); !strings.HasPrefix(str(r["stdout"]), a.Home()+"/.local/lib/") {
			t.Fatalf("pandas: %v", r)
		}
	})

	t.Run("the venv stays for sandbox_pip_install and takes --user too", func(t *testing.T) {
		r := run(t, "sandbox_pip_install", map[string]any{"packages": []string{pipDemo}})
		if r["venv"] != a.Home()+"/.venv" {
			t.Fatalf("pip install: %v", r)
		}
		r = run(t, "sandbox_exec", map[string]any{"command": "command -v pip; pip install --user seaborn >/dev/null && python3 -c 'import pandas, " + pipDemo + "; print(" + pipDemo + ".VALUE)'", "timeout": 120})
		if str(r["stdout"]) != a.Home()+"/.venv/bin/pip\nfrom the test index\n" {
			t.Fatalf("--user in the venv: %v", r)
		}
	})

	t.Run("npm and pip install into a project with cwd", func(t *testing.T) {
		run(t, "sandbox_write_file", map[string]any{"path": "web/package.json", "content": `{"name": "web", "version": "1.0.0"}`})
		r := run(t, "sandbox_npm_install", map[string]any{"packages": []string{"left-pad"}, "cwd": "web"})
		if r["prefix"] != a.Home()+"/web" {
			t.Fatalf("npm install: %v", r)
		}
		r = run(t, "sandbox_exec", map[string]any{"command": "test -f web/node_modules/left-pad/package.json && grep -c left-pad web/package.json; test -e .npm-global/lib/node_modules/left-pad; echo global=$?"})
		if str(r["stdout"]) != "1\nglobal=1\n" {
			t.Fatalf("left-pad landed: %v", r)
		}
		// Its own venv (ensurepip is slow under TCG: the longest timeout).
		run(t, "sandbox_exec", map[string]any{"command": "python3 -m venv tool/.venv", "timeout": 300})
		r = run(t, "sandbox_pip_install", map[string]any{"packages": []string{pipDemo}, "cwd": "tool"})
		if r["venv"] != a.Home()+"/tool/.venv" {
			t.Fatalf("pip install with cwd: %v", r)
		}
		r = run(t, "sandbox_exec", map[string]any{"command": "tool/.venv/bin/python -c 'import " + pipDemo + "; print(" + pipDemo + ".__file__)'"})
		if !strings.HasPrefix(str(r["stdout"]), a.Home()+"/tool/.venv/lib/") {
			t.Fatalf("the project's venv: %v", r)
		}
	})
}
