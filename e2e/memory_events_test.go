//go:build linux

package e2e

//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 but is how events reach clients today; these tests check that delivery.

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/store/events"
)

// TestMemoryAndEvents is agent memory and the event log on the real
// guest through osaurus-host: alice stores and finds her memories, bob
// never sees them however he asks; events reach the CLI (listed and
// followed) and alice's MCP session as log notifications; every route
// answers the documented status codes.
func TestMemoryAndEvents(t *testing.T) {
	// The owner's bridge, with a small events quota so 429 is reachable
	// in a few calls.
	h := sharedHost(t, func(c *config.Sandbox) { c.RateLimits = "events=8" })
	te := toolsEnvOf(t, h)
	ctx := context.Background()
	home, reg := te.home, te.reg
	g := ownerAgent(t, h)
	te.addAgent(t, "alice", autonomous(100, false))
	te.addAgent(t, "bob", autonomous(100, false))
	for _, name := range []string{"alice", "bob"} {
		// The bridge serves the agent users of the guest.
		a, err := reg.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.UserAdd(ctx, agentproto.UserAddRequest{Name: a.User(), Home: a.Home()}); err != nil {
			t.Fatalf("user %s: %v", a.User(), err)
		}
	}
	cli := cliRun{t: t, bin: te.bin, home: home}
	as := func(t *testing.T, user, script string) (string, string, int) {
		t.Helper()
		out, errOut, st := sh(t, g, "agent-"+user, script)
		return out, errOut, st.Code
	}

	t.Run("alice stores, alice finds, bob never", func(t *testing.T) {
		for _, c := range []string{
			"the deploy key lives in vault path ops/deploy",
			"lunch order: falafel wrap, no onions",
			"deploy only on weekdays",
		} {
			if out, errOut, code := as(t, "alice", "osaurus-host agent memory store '"+c+"'"); code != 0 {
				t.Fatalf("store %q: %d %q %q", c, code, out, errOut)
			}
		}
		out, errOut, code := as(t, "alice", "osaurus-host agent memory query 'where is the deploy key'")
		if code != 0 || !strings.HasPrefix(out, "the deploy key lives in vault path ops/deploy\n") || !strings.Contains(out, "deploy only on weekdays") || strings.Contains(out, "falafel") {
			t.Errorf("alice's query: %d %q %q", code, out, errOut)
		}
		out, _, _ = as(t, "alice", "osaurus-host --json agent memory query falafel")
		var resp struct {
			Results []map[string]any `json:"results"`
		}
		if json.Unmarshal([]byte(out), &resp) != nil || len(resp.Results) != 1 || len(resp.Results[0]) != 3 ||
			resp.Results[0]["content"] != "lunch order: falafel wrap, no onions" || resp.Results[0]["salience"] != 0.5 {
			t.Errorf("alice's --json query: %q", out)
		}
		if ts, _ := resp.Results[0]["created_at"].(string); ts == "" {
			t.Errorf("no created_at: %q", out)
		} else if at, err := time.Parse(time.RFC3339, ts); err != nil || time.Since(at) > time.Hour {
			t.Errorf("created_at %q: %v", ts, err)
		}
		// bob asks by content, with alice named in the body, and with FTS
		// syntax that would widen the search if it reached FTS5.
		for _, script := range []string{
			"osaurus-host agent memory query 'deploy key vault'",
			`curl -sS --unix-socket /run/osaurus-bridge.sock -H 'X-Osaurus-Agent: alice' -d '{"query":"deploy","agent":"alice","agent_id":"alice"}' http://bridge/api/agent/memory/query`,
			`osaurus-host agent memory query '"deploy" OR content:* OR NEAR(deploy key)'`,
			`osaurus-host agent memory query '*'`,
		} {
			out, errOut, code := as(t, "bob", script)
			if code != 0 || strings.Contains(out, "deploy") || strings.Contains(out, "falafel") {
				t.Errorf("bob: %s: %d %q %q", script, code, out, errOut)
			}
		}
		if out, _, _ := as(t, "bob", "osaurus-host --json agent memory query deploy"); strings.TrimSpace(out) != `{"results":[]}` {
			t.Errorf("bob's --json query: %q", out)
		}
		// Hostile syntax from alice is searched as words, not an error.
		if out, errOut, code := as(t, "alice", `osaurus-host agent memory query '") AND NOT deploy NEAR(*'`); code != 0 || !strings.Contains(out, "deploy") {
			t.Errorf("alice's hostile query: %d %q %q", code, out, errOut)
		}
		// The user sees each agent's memory from the host.
		var es []map[string]any
		if out := cli.ok("memory", "list", "--agent", "alice", "--json"); json.Unmarshal([]byte(out), &es) != nil || len(es) != 3 {
			t.Errorf("memory list --agent alice: %q", out)
		}
		if out := cli.ok("memory", "search", "--agent", "bob", "deploy"); strings.TrimSpace(out) != "no match" {
			t.Errorf("memory search --agent bob deploy: %q", out)
		}
	})

	t.Run("sizes are bounded", func(t *testing.T) {
		out, errOut, code := as(t, "alice", `osaurus-host agent memory store "$(head -c 9000 /dev/zero | tr '\0' a)"`)
		if code != 1 || !strings.Contains(errOut, "over the limit of 8192") || !strings.Contains(errOut, "HTTP 413") {
			t.Errorf("a 9000-byte memory: %d %q %q", code, out, errOut)
		}
		out, errOut, code = as(t, "alice", `osaurus-host agent memory store "$(printf 'clear \033[2J')"`)
		if code != 1 || !strings.Contains(errOut, "control character") {
			t.Errorf("a memory with an escape sequence: %d %q %q", code, out, errOut)
		}
		out, errOut, code = as(t, "alice", `osaurus-host events emit big "$(head -c 70000 /dev/zero | tr '\0' a)"`)
		if code != 1 || !strings.Contains(errOut, "payload") || !strings.Contains(errOut, "over the limit") {
			t.Errorf("a 70 kB payload: %d %q %q", code, out, errOut)
		}
		if l, err := h.Memories(ctx, control.MemoryQuery{Agent: "alice"}); err != nil || l.Count != 3 {
			t.Errorf("alice has %d memories (%v), want 3", l.Count, err)
		}
	})

	t.Run("events reach the CLI and alice's MCP session", func(t *testing.T) {
		notes := make(chan *mcp.LoggingMessageParams, 16)
		cmd := exec.Command(te.bin, "mcp", "--agent", "alice")
		cmd.Env = append(os.Environ(), config.HomeEnv+"="+home)
		cmd.Stderr = testLog{t, "stdio server: "}
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
			LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { notes <- r.Params },
		})
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cs, err := c.Connect(cctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if err := cs.SetLoggingLevel(cctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}

		// Follow with the real CLI, as a user would.
		follow := exec.Command(te.bin, "events", "--follow", "--json", "--agent", "alice", "--last", "0")
		follow.Env = cmd.Env
		pipe, err := follow.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { follow.Process.Kill(); follow.Wait() }()
		lines := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(pipe)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()

		if out, errOut, code := as(t, "bob", `osaurus-host events emit bob.only '{"secret":"nope"}'`); code != 0 {
			t.Fatalf("bob emit: %d %q %q", code, out, errOut)
		}
		if out, errOut, code := as(t, "alice", `osaurus-host events emit build.done '{"ok":true,"n":3}' && osaurus-host events emit note 'plain text'`); code != 0 {
			t.Fatalf("alice emit: %d %q %q", code, out, errOut)
		}
		var got []events.Event
		for len(got) < 2 {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("events --follow ended after %v", got)
				}
				var e events.Event
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Fatalf("events --follow printed %q: %v", l, err)
				}
				got = append(got, e)
			case <-time.After(time.Minute):
				t.Fatalf("events --follow: only %v within a minute", got)
			}
		}
		// osaurus-host re-encodes a JSON payload, so its keys come sorted.
		if got[0].Agent != "alice" || got[0].Type != "build.done" || string(got[0].Payload) != `{"n":3,"ok":true}` ||
			got[1].Type != "note" || string(got[1].Payload) != `"plain text"` {
			t.Errorf("followed: %+v", got)
		}

		var types []string
		for len(types) < 2 {
			select {
			case p := <-notes:
				b, _ := json.Marshal(p.Data)
				var d map[string]any
				json.Unmarshal(b, &d)
				if p.Logger != "osaurus-events" {
					t.Errorf("notification from logger %q: %s", p.Logger, b)
				}
				types = append(types, str(d["type"]))
			case <-time.After(time.Minute):
				t.Fatalf("MCP session: only %v within a minute", types)
			}
		}
		if strings.Join(types, ",") != "build.done,note" {
			t.Errorf("alice's MCP session got %v, want build.done,note and never bob's", types)
		}

		out := cli.ok("events", "--json")
		var all []events.Event
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var e events.Event
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("events --json line %q: %v", l, err)
			}
			all = append(all, e)
		}
		if len(all) != 3 || all[0].Agent != "bob" || all[1].Type != "build.done" || all[2].Type != "note" {
			t.Errorf("events --json: %s", out)
		}
		if out := cli.ok("events", "--agent", "bob"); !strings.Contains(out, `bob  bob.only  {"secret":"nope"}`) || strings.Contains(out, "alice") {
			t.Errorf("events --agent bob: %q", out)
		}
	})

	t.Run("routes", func(t *testing.T) {
		for _, tc := range []struct{ req, want string }{
			{`-d '{"content":"route check"}' http://bridge/api/agent/memory/store`, "200"},
			{`-d '{"content":"route check","salience":0.9}' http://bridge/api/agent/memory/store`, "200"},
			{`-d '{}' http://bridge/api/agent/memory/store`, "400"},
			{`-d '{"content":"x","salience":2}' http://bridge/api/agent/memory/store`, "400"},
			{`-d 'not json' http://bridge/api/agent/memory/store`, "400"},
			{`-d '{"query":"route"}' http://bridge/api/agent/memory/query`, "200"},
			{`-d '{"query":""}' http://bridge/api/agent/memory/query`, "400"},
			{`http://bridge/api/agent/memory/query`, "404"},
			{`-d '{"type":"route.check"}' http://bridge/api/events/emit`, "200"},
			{`-d '{"type":"bad type"}' http://bridge/api/events/emit`, "400"},
			{`-d '{"type":"t","payload":{"a":' http://bridge/api/events/emit`, "400"},
			{`-X DELETE http://bridge/api/events/emit`, "404"},
		} {
			out, errOut, _ := as(t, "alice", "curl -s -o /dev/null -w '%{http_code}' --unix-socket /run/osaurus-bridge.sock "+tc.req)
			if out != tc.want {
				t.Errorf("%s: HTTP %s %s, want %s", tc.req, out, errOut, tc.want)
			}
		}
		// root and system users are no agent.
		for _, user := range []string{"", "nobody"} {
			_, errOut, st := sh(t, g, user, "osaurus-host agent memory store x")
			if st.Code != 4 || !strings.Contains(errOut, "not an agent user") {
				t.Errorf("%q storing a memory: exit %d %q, want 4", user, st.Code, errOut)
			}
		}
		// The events quota (8 a minute here) answers 429, exit 5.
		out, errOut, _ := as(t, "bob", `for i in $(seq 12); do osaurus-host events emit tick >/dev/null 2>"$HOME/.err" || { echo rc=$?; cat "$HOME/.err"; break; }; done`)
		if !strings.Contains(out, "rc=5") || !strings.Contains(out, "retry after") {
			t.Errorf("12 events with a quota of 8: %q %q", out, errOut)
		}
		out, _, _ = as(t, "bob", `curl -s -o /dev/null -w '%{http_code}' --unix-socket /run/osaurus-bridge.sock -d '{"type":"tick"}' http://bridge/api/events/emit`)
		if out != "429" {
			t.Errorf("emit over the quota: HTTP %s, want 429", out)
		}
	})
}
