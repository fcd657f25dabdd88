package hostcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/config"
)

// agent connect writes only into the (temporary) HOME's client file:
// --dry-run writes nothing, --yes writes with a backup, bad input says
// what to pass.
func TestAgentConnect(t *testing.T) {
	data, home := t.TempDir(), t.TempDir()
	t.Setenv(config.HomeEnv, data)
	t.Setenv("HOME", home)
	if _, _, code := run(t, "agent", "add", "alice"); code != ExitOK {
		t.Fatal("add failed")
	}
	file := filepath.Join(home, ".claude.json")
	os.WriteFile(file, []byte(`{"mcpServers": {"other": {"command": "x"}}}`), 0o600)
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		out     string
		written bool
	}{
		{"dry run", []string{"--client", "claude-code", "--dry-run"}, ExitOK, "Adds osaurus-sandbox-alice to " + file, false},
		{"no answer", []string{"--client", "claude-code"}, ExitDeclined, "Kept as they are: other", false},
		{"unknown client", []string{"--client", "zed"}, ExitUsage, "", false},
		{"no client", nil, ExitUsage, "", false},
		{"generic", []string{"--client", "generic"}, ExitOK, `"` + config.HomeEnv + `": "` + data + `"`, false},
		{"yes", []string{"--client", "claude-code", "--yes"}, ExitOK, "wrote " + file + " (the old file is " + file + ".bak-", true},
		{"again", []string{"--client", "claude-code", "--yes"}, ExitOK, "already has osaurus-sandbox-alice", true},
	} {
		out, errOut, code := run(t, append([]string{"agent", "connect", "alice"}, tc.args...)...)
		b, _ := os.ReadFile(file)
		if code != tc.code || !strings.Contains(out, tc.out) || strings.Contains(string(b), "osaurus-sandbox-alice") != tc.written {
			t.Errorf("%s: code %d out %q err %q\nfile %s", tc.name, code, out, errOut, b)
		}
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), `"other"`) || !strings.Contains(string(b), data) {
		t.Fatalf("merged file:\n%s", b)
	}
}

// The config names the installed binary, not the temporary one that ran
// connect (a test binary, like `go run`'s, lives in a temporary folder),
// and says so; without an installed one it warns and says to install.
func TestConnectNamesInstalledBinary(t *testing.T) {
	data, home := t.TempDir(), t.TempDir()
	t.Setenv(config.HomeEnv, data)
	t.Setenv("HOME", home)
	t.Setenv("PATH", t.TempDir())
	run(t, "agent", "add", "alice")
	_, errOut, code := run(t, "agent", "connect", "alice", "--client", "cursor", "--dry-run")
	if code != ExitOK || !strings.Contains(errOut, "warning: this osaurus-sandbox runs from") || !strings.Contains(errOut, "a temporary folder") || !strings.Contains(errOut, "run `make install`") {
		t.Fatalf("no warning without an installed binary: %d %q", code, errOut)
	}
	bin := filepath.Join(home, ".local", "bin")
	os.MkdirAll(bin, 0o755)
	installed := filepath.Join(bin, "osaurus-sandbox")
	os.WriteFile(installed, []byte("#!/bin/sh\n"), 0o755)
	t.Setenv("PATH", bin)
	out, errOut, code := run(t, "agent", "connect", "alice", "--client", "cursor", "--yes")
	if code != ExitOK || !strings.Contains(errOut, "the config names the installed "+installed) {
		t.Fatalf("connect with an installed binary: %d %q %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".cursor", "mcp.json")); !strings.Contains(string(b), `"command": "`+installed+`"`) {
		t.Fatalf("the config doesn't name %s:\n%s", installed, b)
	}
}

// disconnect takes the entry out of every client file that has it,
// keeping the rest; remove offers the same, and without an answer leaves
// the files and says how to do it later.
func TestAgentDisconnect(t *testing.T) {
	data, home := t.TempDir(), t.TempDir()
	t.Setenv(config.HomeEnv, data)
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	for _, n := range []string{"alice", "bob"} {
		run(t, "agent", "add", n)
		for _, cl := range []string{"claude-code", "cursor"} {
			if _, errOut, code := run(t, "agent", "connect", n, "--client", cl, "--yes"); code != ExitOK {
				t.Fatalf("connect %s %s: %s", n, cl, errOut)
			}
		}
	}
	claude, cursor := filepath.Join(home, ".claude.json"), filepath.Join(home, ".cursor", "mcp.json")
	has := func(file, server string) bool {
		b, _ := os.ReadFile(file)
		return strings.Contains(string(b), `"`+server+`"`)
	}

	for _, tt := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		out    string
		claude bool // alice's entry is left in .claude.json
		cursor bool
	}{
		{"unknown client", "", []string{"agent", "disconnect", "alice", "--client", "zed"}, ExitUsage, "", true, true},
		{"declined", "", []string{"agent", "disconnect", "alice", "--client", "cursor"}, ExitDeclined, "Removes osaurus-sandbox-alice from " + cursor, true, true},
		{"one client", "", []string{"agent", "disconnect", "alice", "--client", "cursor", "--yes"}, ExitOK, "wrote " + cursor, true, false},
		{"every client", "yes\n", []string{"agent", "disconnect", "alice"}, ExitOK, "wrote " + claude, false, false},
		{"again", "", []string{"agent", "disconnect", "alice"}, ExitOK, "no client config file has osaurus-sandbox-alice", false, false},
	} {
		out, errOut, code := runStdin(t, tt.stdin, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.out) || has(claude, "osaurus-sandbox-alice") != tt.claude || has(cursor, "osaurus-sandbox-alice") != tt.cursor {
			t.Fatalf("%s: %d\nstdout: %s\nstderr: %s", tt.name, code, out, errOut)
		}
		if !has(claude, "osaurus-sandbox-bob") || !has(cursor, "osaurus-sandbox-bob") {
			t.Fatalf("%s: bob's entries went too", tt.name)
		}
	}

	// remove without an answer: the files stay, with the way to clean up.
	_, errOut, code := runStdin(t, "", "agent", "remove", "bob")
	if code != ExitOK || !strings.Contains(errOut, "osaurus-sandbox-bob is still in Claude Code ("+claude+"), Cursor ("+cursor+")") || !strings.Contains(errOut, "`osaurus-sandbox agent disconnect bob` removes them later") || !has(claude, "osaurus-sandbox-bob") {
		t.Fatalf("remove, not answered: %d %q", code, errOut)
	}
	// The slug of a removed agent still disconnects.
	if out, errOut, code := run(t, "agent", "disconnect", "bob", "--yes"); code != ExitOK || has(claude, "osaurus-sandbox-bob") || has(cursor, "osaurus-sandbox-bob") {
		t.Fatalf("disconnect of a removed agent: %d %q %q", code, out, errOut)
	}
	// remove --yes takes the entries out too.
	run(t, "agent", "add", "carol")
	run(t, "agent", "connect", "carol", "--client", "cursor", "--yes")
	if out, errOut, code := run(t, "agent", "remove", "carol", "--yes"); code != ExitOK || has(cursor, "osaurus-sandbox-carol") || !strings.Contains(out, "wrote "+cursor) {
		t.Fatalf("remove --yes: %d %q %q", code, out, errOut)
	}
}

// Through a remote context, agent connect asks the far side's owner for
// the agent (never this machine's registry) and writes nothing when it
// can't; disconnect by slug needs no far side. ssh is a stand-in that
// records its calls and fails as an unreachable host does; the real ssh
// and far side are e2e's TestRemoteContext.
func TestAgentConnectThroughContext(t *testing.T) {
	data, home, bin := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv(config.HomeEnv, data)
	t.Setenv("HOME", home)
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("OSAURUS_SANDBOX_CONTEXT", "")
	calls := filepath.Join(bin, "calls")
	os.WriteFile(filepath.Join(bin, "ssh"), []byte("#!/bin/sh\necho \"$*\" >> "+calls+"\necho 'ssh: connect to host box port 22: Connection refused' >&2\nexit 255\n"), 0o755)
	if _, errOut, code := run(t, "agent", "add", "alice"); code != ExitOK {
		t.Fatal(errOut)
	}
	if _, errOut, code := run(t, "context", "add", "box", "ssh://me@box"); code != 3 || !strings.Contains(errOut, "Connection refused") {
		t.Fatalf("context add with an unreachable host: %d %s", code, errOut)
	}
	os.Remove(calls)
	file := filepath.Join(home, ".cursor", "mcp.json")
	write := func(args string) {
		os.MkdirAll(filepath.Dir(file), 0o700)
		os.WriteFile(file, []byte(`{"mcpServers": {"osaurus-sandbox-alice": {"command": "x", "args": `+args+`}}}`), 0o600)
	}
	for _, tt := range []struct {
		name  string
		env   string // OSAURUS_SANDBOX_CONTEXT
		args  []string
		code  int
		out   string // in stdout, or stderr when code != 0
		args2 string // alice's entry's args afterwards ("" none)
		ssh   bool   // ssh ran
	}{
		{"--context box: the far side's owner is asked, and unreachable", "", []string{"--context", "box", "agent", "connect", "alice", "--client", "cursor", "--yes"}, 3, "Connection refused", "", true},
		{"the environment chooses box", "box", []string{"agent", "connect", "alice", "--client", "cursor", "--yes"}, 3, "Connection refused", "", true},
		{"--context local wins over the environment", "box", []string{"--context", "local", "agent", "connect", "alice", "--client", "cursor", "--yes"}, ExitOK, "wrote " + file, `["mcp","--agent","alice"]`, false},
		{"an unknown client is refused before ssh runs", "box", []string{"agent", "connect", "alice", "--client", "zed"}, ExitUsage, "unknown MCP client", `["mcp","--agent","alice"]`, false},
		{"disconnect by slug needs no far side", "box", []string{"agent", "disconnect", "alice", "--client", "cursor", "--yes"}, ExitOK, "Removes osaurus-sandbox-alice", "", false},
		{"disconnect by name asks the far side", "", []string{"--context", "box", "agent", "disconnect", "Alice Smith", "--yes"}, 3, "Connection refused", "", true},
		{"agent list asks the far side", "box", []string{"agent", "list"}, 3, "Connection refused", "", true},
		{"serve through a context is refused: it serves this machine", "box", []string{"serve"}, ExitError, "serve runs the owner of this machine's sandbox, not another's (context box is chosen): run `serve` on that machine (ssh ... osaurus-sandbox serve)", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "disconnect by slug needs no far side" {
				write(`["--context","box","mcp","--agent","alice"]`)
			}
			os.Remove(calls)
			t.Setenv("OSAURUS_SANDBOX_CONTEXT", tt.env)
			out, errOut, code := run(t, tt.args...)
			text := out
			if code != ExitOK {
				text = errOut
			}
			var f struct {
				MCPServers map[string]struct {
					Args []string `json:"args"`
				} `json:"mcpServers"`
			}
			b, _ := os.ReadFile(file)
			json.Unmarshal(b, &f)
			got := ""
			if e, ok := f.MCPServers["osaurus-sandbox-alice"]; ok {
				a, _ := json.Marshal(e.Args)
				got = string(a)
			}
			_, err := os.Stat(calls)
			if code != tt.code || !strings.Contains(text, tt.out) || got != tt.args2 || (err == nil) != tt.ssh {
				t.Fatalf("exit %d (want %d), ssh ran %v\nstdout: %s\nstderr: %s\nfile: %s", code, tt.code, err == nil, out, errOut, b)
			}
		})
	}
}
