package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

const greeter = `{"name": "Greeter", "description": "Greets",
 "tools": [{"id": "greet", "description": "Greets someone", "run": "echo hello $PARAM_WHO",
   "parameters": {"who": {"type": "string"}, "times": {"type": "integer", "default": 1}}}]}`

// Listing and argument checks need no guest; running is tested on the
// real guest in e2e.
func TestPluginToolsListedAndChecked(t *testing.T) {
	store := plugins.NewInstalled(t.TempDir())
	h := newHarness(t, func(o *Options) { o.Plugins = store })
	p, err := plugins.DecodeBytes([]byte(greeter))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Record(context.Background(), h.ts.Agent().ID, p, 1); err != nil {
		t.Fatal(err)
	}
	var spec *Spec
	for _, s := range h.ts.List() {
		if s.Name == "greeter_greet" {
			spec = &s
		}
	}
	if spec == nil || spec.InputSchema["additionalProperties"] != false || !strings.Contains(spec.Description, "from the plugin Greeter") {
		t.Fatalf("greeter_greet not listed right: %+v", spec)
	}
	failed(t, h.call("greeter_greet", map[string]any{}), envelope.InvalidArgs, "who")
	failed(t, h.call("greeter_greet", map[string]any{"who": "x", "times": "2"}), envelope.InvalidArgs, "times")
	failed(t, h.call("greeter_greet", map[string]any{"who": "x", "colour": 1}), envelope.InvalidArgs, "colour")
	failed(t, h.call("greeter_nope", map[string]any{}), envelope.ToolNotFound, "")
	if len(h.guest.ops()) != 0 {
		t.Fatalf("bad calls reached the guest: %v", h.guest.ops())
	}

	// Not listed, and refused, without autonomous exec.
	off := h.env.Toolset(testAgent("bob", false, false))
	for _, s := range off.List() {
		if strings.HasPrefix(s.Name, "greeter_") {
			t.Fatalf("%s listed with autonomous exec off", s.Name)
		}
	}
	e, _ := envelope.Parse(off.Call(context.Background(), "greeter_greet", []byte(`{"who":"x"}`)))
	if e.OK || e.Kind != envelope.ToolNotFound || !strings.Contains(e.Message, "autonomous exec") {
		t.Fatalf("%+v", e)
	}
	// Another agent didn't install it.
	other := h.env.Toolset(testAgent("carol", true, false))
	for _, s := range other.List() {
		if strings.HasPrefix(s.Name, "greeter_") {
			t.Fatal("listed to an agent that didn't install it")
		}
	}
}

// A plugin's permissions.network narrows its agent's policy for the
// plugin's commands only, and they run in a namespace of their own
// (NetScope), so the narrower policy never reaches the agent's other
// processes.
func TestPluginNetworkNarrowsAgentPolicy(t *testing.T) {
	for _, tc := range []struct{ agent, plugin, want string }{
		{"outbound", "", "outbound"},
		{"outbound", "api.example.com", "api.example.com"},
		{"*.example.com", "api.example.com,other.org", "api.example.com"},
		{"example.org", "api.example.com", "none"},
		{"none", "outbound", "none"},
		{"outbound", "none", "none"},
	} {
		store := plugins.NewInstalled(t.TempDir())
		h := newHarness(t, func(o *Options) { o.Plugins = store })
		h.ts.agent.AutonomousExec.Network = agents.NetworkSetting(tc.agent)
		p, err := plugins.DecodeBytes([]byte(greeter))
		if err != nil {
			t.Fatal(err)
		}
		if tc.plugin != "" {
			p.Permissions = &plugins.Permissions{Network: tc.plugin}
		}
		if err := store.Record(context.Background(), h.ts.Agent().ID, p, 1); err != nil {
			t.Fatal(err)
		}
		h.call("greeter_greet", map[string]any{"who": "x"})
		h.call("sandbox_exec", map[string]any{"command": "true"})
		var got []agentproto.ExecRequest
		h.guest.mu.Lock()
		for _, r := range h.guest.reqs {
			if er, ok := r.req.(agentproto.ExecRequest); ok && er.User != "" {
				got = append(got, er)
			}
		}
		h.guest.mu.Unlock()
		if len(got) != 2 {
			t.Fatalf("%+v: %d agent execs, want 2", tc, len(got))
		}
		if got[0].Network != tc.want || got[0].NetScope != "greeter" {
			t.Errorf("%+v: plugin tool ran with network %q scope %q", tc, got[0].Network, got[0].NetScope)
		}
		if got[1].Network != netpolicy.MustParse(tc.agent).String() || got[1].NetScope != "" {
			t.Errorf("%+v: sandbox_exec after it ran with network %q scope %q", tc, got[1].Network, got[1].NetScope)
		}
	}
}

// A timed-out tool's advice names what its caller can do: a built-in
// tool's caller raises timeout; a plugin tool has no timeout argument, so
// its message points at the recipe instead.
func TestTimeoutAdviceFitsTheTool(t *testing.T) {
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
		want       []string
		notWant    []string
	}{
		{"sandbox_exec", "sandbox_exec", map[string]any{"command": "sleep 99", "timeout": 2},
			[]string{"still running after 2s", "Raise timeout (max 5m0s)", "sandbox_exec_background", "stdout: started"},
			[]string{"plugin"}},
		{"plugin tool", "greeter_greet", map[string]any{"who": "x"},
			[]string{"still running after 30s", "fixed at 30s", "can't raise it", "osaurus-sandbox plugin show greeter",
				"plugin import", "stdout: started"},
			[]string{"Raise timeout", "raise timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := plugins.NewInstalled(t.TempDir())
			h := newHarness(t, func(o *Options) { o.Plugins = store })
			p, err := plugins.DecodeBytes([]byte(greeter))
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Record(context.Background(), h.ts.Agent().ID, p, 1); err != nil {
				t.Fatal(err)
			}
			h.guest.exec = printer("started\n", "", agentproto.ExitStatus{Code: 137, Signal: 9, TimedOut: true})
			e := h.call(tc.tool, tc.args)
			failed(t, e, envelope.Timeout, "")
			for _, w := range tc.want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message lacks %q: %s", w, e.Message)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(e.Message, w) {
					t.Errorf("message has %q: %s", w, e.Message)
				}
			}
		})
	}
}
