//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/internal/scriptedmodel"
	"github.com/osaurus/osaurus-sandbox/internal/testkeyring"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// hostSecret is alice's secret: a quote, an ampersand and angle brackets,
// so JSON (envelopes, event payloads, task records) escapes it and a
// scrubber that only looks at the encoded text misses it.
const hostSecret = `Zq7XkW9v"Pq2m&Tr4L<x>`

// secretPieces returns the pieces of hostSecret (5+ characters, the
// parts around the quote included) found in s, raw or JSON-escaped.
func secretPieces(s string) []string {
	var out []string
	esc, _ := json.Marshal(hostSecret)
	for _, v := range []string{hostSecret, strings.Trim(string(esc), `"`)} {
		for n := len(v); n >= 5; n-- {
			for i := 0; i+n <= len(v); i++ {
				if strings.Contains(s, v[i:i+n]) {
					return append(out, v[i:i+n])
				}
			}
		}
	}
	return out
}

// controlChars returns the control characters (but tab and newline) in s.
func controlChars(s string) []rune {
	var out []rune
	for _, c := range s {
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 && c <= 0x9f {
			out = append(out, c)
		}
	}
	return out
}

// TestHostSec attacks the host side as an agent would on the real guest,
// with the bridge, the agent runner and the stores wired as in the app
// (host.NewBridge), a real keyring and a scripted model server on
// loopback: its secret must not leak through a failure, its writes must
// not grow the host's stores past their bounds, and its text must reach
// the user's terminal inert.
func TestHostSec(t *testing.T) {
	testkeyring.Start(t)
	m := sharedGuest(t)
	g := m.Agent()
	home := t.TempDir()
	paths := config.Paths{Root: home}
	reg := openAgents(t, paths.AgentsJSON())
	model := scriptedmodel.Start(t, "127.0.0.1:0")
	cli := cliRun{t: t, bin: buildCLI(t), home: home}
	cli.ok("config", "set", "inferenceUrl", model.URL)
	cli.ok("config", "set", "inferenceModel", "scripted-7b")
	guest := func(context.Context) (*agentproto.Client, error) { return g, nil }
	sec := secrets.NewKeychain()
	mem, err := memory.Open(context.Background(), paths.MemoryDB(), memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	ev, err := events.Open(context.Background(), paths.EventsDB(), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	br := host.NewBridge(&host.ToolHost{Paths: paths, Registry: reg, Memory: mem, Env: tools.NewEnv(tools.Options{
		Guest: guest, Agents: reg, Redactor: sec,
	})}, host.BridgeOptions{Secrets: sec, Events: ev, Logf: t.Logf})
	t.Cleanup(func() { br.Close() })
	attachBridge(t, m, br)

	alice, err := reg.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	if alice, err = reg.Update(alice.ID, func(a *agents.Agent) error { autonomous(100, false)(&a.AutonomousExec); return nil }); err != nil {
		t.Fatal(err)
	}
	// The tools as an MCP client of alice gets them in the app.
	env := tools.NewEnv(tools.Options{Guest: guest, Agents: reg, Redactor: sec})
	ts := env.Toolset(alice)
	call := func(name string, args map[string]any) envelope.Envelope {
		t.Helper()
		b, _ := json.Marshal(args)
		return ts.Run(context.Background(), name, b)
	}
	if e := call("sandbox_list_directory", map[string]any{}); e.IsError() {
		t.Fatalf("creating alice's user: %s", e.JSON())
	}
	cmd := exec.Command(cli.bin, "secret", "set", "alice", "TOKEN")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+home)
	cmd.Stdin = strings.NewReader(hostSecret)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("secret set: %v\n%s", err, out)
	}
	hostSh := func(script string) (string, string, int) {
		t.Helper()
		out, errOut, st := sh(t, g, "agent-alice", script)
		return out, errOut, st.Code
	}
	if out, errOut, code := hostSh(`test "$(osaurus-host secrets get TOKEN)" = '` + strings.ReplaceAll(hostSecret, `'`, `'\''`) + `' && echo same`); code != 0 || out != "same\n" {
		t.Fatalf("alice can't read her secret: %d %q %q", code, out, errOut)
	}

	t.Run("a secret does not leak through failures", func(t *testing.T) {
		get := `v=$(osaurus-host secrets get TOKEN); `
		// The timeout message keeps the last 2000 characters of stdout:
		// the secret straddles that cut, 7 characters before it.
		straddle := get + `python3 -c 'import sys; v=sys.argv[1]; sys.stdout.write("a"*5000 + v + "b"*(2000-(len(v)-7))); sys.stdout.flush()' "$v"; sleep 30`
		for _, tc := range []struct {
			name string
			tool string
			args map[string]any
			kind envelope.Kind
		}{
			{"exec timed out", "sandbox_exec", map[string]any{"command": get + `echo "token=$v"; echo "$v" >&2; sleep 30`, "timeout": 1}, envelope.Timeout},
			{"exec timed out, secret cut by the message", "sandbox_exec", map[string]any{"command": straddle, "timeout": 2}, envelope.Timeout},
			{"exec in a missing directory named after it", "sandbox_exec", map[string]any{"command": "true", "cwd": hostSecret}, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := call(tc.tool, tc.args)
				if e.OK || tc.kind != "" && e.Kind != tc.kind {
					t.Fatalf("%s: %s, want a %s failure", tc.tool, e.JSON(), tc.kind)
				}
				if p := secretPieces(e.JSON() + e.Message + e.Field + e.Expected); p != nil {
					t.Errorf("the envelope shows %q of the secret:\n%s", p, e.JSON())
				}
			})
		}
		t.Run("install failed", func(t *testing.T) {
			// A pip that prints the index URL holding the token, as pip does
			// with a private index, and fails.
			if _, errOut, code := hostSh(`mkdir -p ~/.venv/bin && printf '#!/bin/sh\nv=$(osaurus-host secrets get TOKEN)\necho "Looking in indexes: https://u:$v@pypi.example/simple"\necho "ERROR: 401 $v" >&2\nexit 1\n' > ~/.venv/bin/pip && chmod +x ~/.venv/bin/pip`); code != 0 {
				t.Fatalf("writing the pip: %s", errOut)
			}
			e := call("sandbox_pip_install", map[string]any{"packages": []string{"requests"}})
			if e.OK || e.Kind != envelope.ExecutionError || !strings.Contains(e.Message, "[REDACTED:TOKEN]") {
				t.Fatalf("pip install: %s, want a failure showing the redaction", e.JSON())
			}
			if p := secretPieces(e.JSON() + e.Message); p != nil {
				t.Errorf("the envelope shows %q of the secret:\n%s", p, e.JSON())
			}
		})
		t.Run("a task whose tools fail", func(t *testing.T) {
			model.Play(
				scriptedmodel.Turn{Content: "checking", Calls: []scriptedmodel.Call{
					{Name: "sandbox_exec", Args: mustJSON(map[string]any{"command": get + `echo "$v"; sleep 30`, "timeout": 1})},
					{Name: "sandbox_pip_install", Args: `{"packages":["requests"]}`},
				}},
				scriptedmodel.Turn{Content: "Both failed."},
			)
			out, errOut, code := hostSh(fmt.Sprintf(`osaurus-host agent dispatch %s "use the token" --wait`, alice.ID))
			if code != 0 || out != "Both failed.\n" {
				t.Fatalf("dispatch: %d %q %q", code, out, errOut)
			}
			reqs := model.Requests()
			last := reqs[len(reqs)-1]
			if n := len(last.Messages); n < 5 || last.Messages[n-1].Role != "tool" || !strings.Contains(last.Messages[n-2].Content, "REDACTED:TOKEN") {
				t.Fatalf("the model did not get the failed tools' results: %+v", last.Messages)
			}
			for i, r := range reqs {
				b, _ := json.Marshal(r)
				if p := secretPieces(string(b)); p != nil {
					t.Errorf("model request %d shows %q of the secret", i, p)
				}
			}
			recs, _ := filepath.Glob(filepath.Join(home, "tasks", "*.json"))
			if len(recs) == 0 {
				t.Fatal("no task record")
			}
			for _, f := range recs {
				b, _ := os.ReadFile(f)
				if p := secretPieces(string(b)); p != nil {
					t.Errorf("task record %s shows %q of the secret", filepath.Base(f), p)
				}
			}
			for _, args := range [][]string{{"task", "list", "--agent", "alice", "--json"}, {"task", "list", "--agent", "alice"}} {
				if out := cli.ok(args...); secretPieces(out) != nil {
					t.Errorf("%v shows the secret: %q", args, out)
				}
			}
		})
		t.Run("log and event lines", func(t *testing.T) {
			if out, errOut, code := hostSh(get + `osaurus-host log warn "key $v" && osaurus-host events emit leak "$(python3 -c 'import json,sys; print(json.dumps({"token": sys.argv[1], sys.argv[1]: 1}))' "$v")"`); code != 0 {
				t.Fatalf("log and emit: %d %q %q", code, out, errOut)
			}
			for _, args := range [][]string{{"logs", "--agent", "alice"}, {"events", "--agent", "alice"}, {"events", "--agent", "alice", "--json"}} {
				out := cli.ok(args...)
				if p := secretPieces(out); p != nil || !strings.Contains(out, "REDACTED:TOKEN") {
					t.Errorf("%v shows %q of the secret: %q", args, p, out)
				}
			}
		})
	})

	t.Run("host stores are bounded per agent", func(t *testing.T) {
		// 64 KiB values until the config is full: 15 fit in 1 MiB.
		out, errOut, _ := hostSh(`v=$(head -c 65536 /dev/zero | tr '\0' v); for i in $(seq 40); do osaurus-host config set big$i "$v" 2>"$HOME/.err" || { echo "rc=$? at $i"; cat "$HOME/.err"; break; }; done`)
		if !strings.Contains(out, fmt.Sprintf("rc=1 at %d", bridge.MaxConfigBytes/bridge.MaxConfigValue)) || !strings.Contains(out, "HTTP 507") || !strings.Contains(out, "MaxConfigBytes") {
			t.Errorf("flooding config: %q %q, want 507 naming MaxConfigBytes at value %d", out, errOut, bridge.MaxConfigBytes/bridge.MaxConfigValue)
		}
		if st, err := os.Stat(filepath.Join(home, "bridge", "config", "alice.json")); err != nil || st.Size() > bridge.MaxConfigBytes+64<<10 {
			t.Errorf("alice's config file on the host: %v %v, want at most about %d bytes", st, err, bridge.MaxConfigBytes)
		}
		for _, tc := range []struct{ script, limit string }{
			{`osaurus-host config set one "$(head -c 65537 /dev/zero | tr '\0' v)"`, "MaxConfigValue"},
			{`osaurus-host agent memory store "$(head -c 9000 /dev/zero | tr '\0' m)"`, "memory.MaxContent"},
			{`osaurus-host events emit big "$(python3 -c 'print("e"*70000)')"`, "events.MaxPayload"},
			{`osaurus-host log "$(head -c 17000 /dev/zero | tr '\0' l)"`, "MaxLogLine"},
		} {
			out, errOut, code := hostSh(tc.script)
			if code != 1 || !strings.Contains(errOut, "HTTP 413") || !strings.Contains(errOut, tc.limit) {
				t.Errorf("%.60s: %d %q %q, want 413 naming %s", tc.script, code, out, errOut, tc.limit)
			}
		}
		if _, errOut, code := hostSh(`for i in 1 2 3; do osaurus-host agent memory store "note $i" || exit 1; done`); code != 0 {
			t.Fatalf("memory store: %s", errOut)
		}
		out = cli.ok("agent", "show", "alice")
		for _, want := range []string{
			fmt.Sprintf("config:             %d of %d keys", bridge.MaxConfigBytes/bridge.MaxConfigValue-1, bridge.MaxConfigKeys),
			"memories:           3 of 5000", "task records:       1 of 100", "events:             1 of 10000",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("agent show lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("agent text reaches the terminal inert", func(t *testing.T) {
		// Set the title, clear the screen, return the carriage, and a C1 CSI.
		if out, errOut, code := hostSh(`osaurus-host log "$(printf 'ok\033]0;pwned\007\033[2J\033[1;1Hall good\r\302\2332J')" && osaurus-host events emit esc "$(printf '{"m":"\302\2332J\342\200\256x"}')"`); code != 0 {
			t.Fatalf("log: %d %q %q", code, out, errOut)
		}
		for _, args := range [][]string{{"logs", "--agent", "alice"}, {"events", "--agent", "alice"}} {
			out := cli.ok(args...)
			if cs := controlChars(out); len(cs) > 0 || strings.ContainsRune(out, 0x202e) {
				t.Errorf("%v prints control characters %q: %q", args, cs, out)
			}
		}
		if out := cli.ok("logs", "--agent", "alice"); !strings.Contains(out, `ok\x1b]0;pwned\x07`) {
			t.Errorf("logs --agent does not show the escape as text: %q", out)
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
