package hostcli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// realBinary builds cmd/osaurus-sandbox once per test run: these tests
// run what a user runs.
func realBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "osaurus-cli-test-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "osaurus-sandbox")
		out, err := exec.Command("go", "build", "-ldflags="+secrets.TestBuildLDFlag, "-o", binPath, "../cmd/osaurus-sandbox").CombinedOutput()
		if err != nil {
			binErr = errors.New(err.Error() + "\n" + string(out))
		}
	})
	if binErr != nil {
		t.Fatalf("build the app: %v", binErr)
	}
	return binPath
}

// binRun runs the binary on a data folder of the test's own, with no
// session bus (the keychain is not available) and caches under the test.
type binRun struct {
	t    *testing.T
	bin  string
	home string
}

func newBinRun(t *testing.T) binRun {
	t.Helper()
	return binRun{t: t, bin: realBinary(t), home: t.TempDir()}
}

func (b binRun) run(stdin string, args ...string) (string, string, int) {
	b.t.Helper()
	cmd := exec.Command(b.bin, args...)
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+b.home, "XDG_CACHE_HOME="+filepath.Join(b.home, ".cache"), "DISPLAY=", "WAYLAND_DISPLAY=")
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return o.String(), e.String(), ee.ExitCode()
	case err != nil:
		b.t.Fatalf("%v: %v", args, err)
	}
	return o.String(), e.String(), 0
}

// TestEveryCommandHasHelp: a command added to Main without a help entry
// fails here.
func TestEveryCommandHasHelp(t *testing.T) {
	for cmd := range (&cli{}).commands() {
		if _, ok := findHelp(cmd); !ok {
			t.Errorf("%s has no help entry in help.go", cmd)
		}
	}
}

// TestHelpOnRealBinary: every command's --help has its one-line
// description, its flags and an example, and exits 0; help TOPIC says
// the same; internal flags are not shown.
func TestHelpOnRealBinary(t *testing.T) {
	b := newBinRun(t)
	for _, h := range helps {
		args := append(strings.Fields(h.name), "--help")
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errOut, code := b.run("", args...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, want := range []string{"osaurus-sandbox " + h.name + ": " + h.summary + "\n", "Usage:\n", "Example:\n  "} {
				if !strings.Contains(out, want) {
					t.Errorf("lacks %q:\n%s", want, out)
				}
			}
			if len(h.flags) > 0 && !strings.Contains(out, "Flags:\n  "+h.flags[0][0]) {
				t.Errorf("lacks its flags:\n%s", out)
			}
			if strings.Contains(out, "--background") {
				t.Errorf("shows the internal flag --background:\n%s", out)
			}
			if topic, _, _ := b.run("", append([]string{"help"}, strings.Fields(h.name)...)...); topic != out {
				t.Errorf("help %s differs from --help:\n%s", h.name, topic)
			}
		})
	}
	for _, tt := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"version"}, ExitOK, "osaurus-sandbox dev\n", ""},
		{[]string{"--version"}, ExitOK, "osaurus-sandbox dev\n", ""},
		{[]string{"help"}, ExitOK, "Day one:", ""},
		{[]string{"--help"}, ExitOK, "Day one:", ""},
		{[]string{"help", "nosuch"}, ExitUsage, "", `no help on "nosuch"`},
		{[]string{"serve", "-h"}, ExitOK, "osaurus-sandbox serve: ", ""},
		{[]string{"exec", "--", "ls", "--help"}, ExitNotRunning, "", "not running"}, // after -- it is the command's
		{[]string{"serve", "--colour"}, ExitUsage, "", "unknown flag --colour"},
		{[]string{"status", "-bogus"}, ExitUsage, "", "unknown flag --bogus"},
		{[]string{"shell", "alice"}, ExitNotRunning, "", "not running"},
		{[]string{"shell", "alice", "--workdir", "/tmp"}, ExitNotRunning, "", "not running"},
		{[]string{"shell", "alice", "bob"}, ExitUsage, "", "usage: osaurus-sandbox shell [AGENT]"},
		{[]string{"exec", "-it", "alice"}, ExitUsage, "", "usage: osaurus-sandbox exec -it"},
		{[]string{"exec", "-it", "alice", "--", "top"}, ExitNotRunning, "", "not running"},
		{[]string{"completion", "tcsh"}, ExitUsage, "", `unknown shell "tcsh"`},
		{[]string{"help", "agent", "connect"}, ExitOK, "osaurus-sandbox agent connect: add the agent to an MCP client's config file", ""},
		{[]string{"agent", "connect", "--help"}, ExitOK, "--client ID", ""},
		{[]string{"help", "agent"}, ExitOK, "osaurus-sandbox agent connect NAME --client claude-desktop|claude-code|cursor|vscode|generic", ""},
		{[]string{"help", "agent", "set"}, ExitOK, "network, projects, diskGB", ""},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, code := b.run("", tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errOut, tt.err) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			if strings.Contains(errOut, "--background") {
				t.Errorf("usage error shows the internal flag:\n%s", errOut)
			}
		})
	}
}

// TestFreshFolderOnRealBinary: what a newcomer sees before anything is
// provisioned, each case on the real binary.
func TestFreshFolderOnRealBinary(t *testing.T) {
	b := newBinRun(t)
	for _, tt := range []struct {
		name     string
		args     []string
		stdin    string
		code     int
		out, err string
	}{
		{"status says what to do", []string{"status"}, "", ExitOK, "not-provisioned\nnext: nothing is provisioned yet: `osaurus-sandbox start`", ""},
		{"empty events", []string{"events"}, "", ExitOK, "no events yet", ""},
		{"empty console log", []string{"logs"}, "", ExitOK, "the console log is empty", ""},
		{"secret over the limit", []string{"secret", "set", "alice", "BIG"}, strings.Repeat("k", secrets.MaxValueBytes+1), ExitError, "", "is 65537 bytes, more than the 65536 a secret may hold; nothing was stored"},
		{"secret far over the limit", []string{"secret", "set", "alice", "BIG"}, strings.Repeat("k", 10*secrets.MaxValueBytes), ExitError, "", "longer than the 65536 bytes a secret may hold; nothing was stored"},
		{"agent remove without a keychain", []string{"agent", "remove", "alice"}, "", ExitOK, "removed", "marked for removal"},
		{"secret without a keychain is not exit 3", []string{"secret", "set", "alice", "K"}, "v", ExitError, "", "keychain"},
		{"diagnostics --json without a VM", []string{"diagnostics", "--json"}, "", ExitNotRunning, `{"error":"`, "not running"},
		{"autoStart yes, as agent set takes it", []string{"config", "set", "autoStart", "yes"}, "", ExitOK, "saved", ""},
		{"a long bad value is not echoed whole", []string{"config", "set", "accel", strings.Repeat("x", 100000)}, "", ExitError, "", "… (100000 bytes)"},
		{"unknown config key", []string{"config", "get", "cpu"}, "", ExitUsage, "", `unknown key "cpu"; the keys are `},
		{"unknown config key to set", []string{"config", "set", "colour", "red"}, "", ExitUsage, "", `unknown key "colour"`},
		{"unknown config key to reset", []string{"config", "reset", "colour"}, "", ExitUsage, "", `unknown key "colour"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.args[0] == "secret" || tt.args[0] == "agent" {
				b.run("", "agent", "add", "alice")
			}
			out, errOut, code := b.run(tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errOut, tt.err) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
		})
	}

	// diagnostics without a VM: "not running" once, exit 3, and no owner
	// started for it.
	out, errOut, code := b.run("", "diagnostics")
	if code != ExitNotRunning || strings.Count(out+errOut, "not running") != 1 {
		t.Fatalf("diagnostics without a VM: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if out, _, _ := b.run("", "status", "--json"); !strings.Contains(out, `"owner":"none"`) {
		t.Errorf("diagnostics left an owner running: %s", out)
	}
}

// TestConfigRepairOnRealBinary: a hand-edited sandbox.json with an
// unknown key and a bad value doesn't lock out `config`.
func TestConfigRepairOnRealBinary(t *testing.T) {
	b := newBinRun(t)
	path := config.Paths{Root: b.home}.SandboxJSON()
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte("{\n  \"cpus\": 4,\n  \"colour\": \"red\",\n  \"memoryGB\": 64\n}\n"), 0o644)
	steps := []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"config", "get"}, ExitError, "cpus" + strings.Repeat(" ", longestKey()-len("cpus")+1) + "4", `sandbox.json line 3: invalid setting: unknown key "colour"|remove it with ` + "`osaurus-sandbox config reset colour`"},
		{[]string{"config", "get", "cpus"}, ExitError, "4\n", "sandbox.json line 4: invalid setting: memoryGB: 64, allowed 1–8"},
		{[]string{"config", "set", "memoryGB", "4"}, ExitError, "saved", "line 3"},
		{[]string{"config", "reset", "colour"}, ExitOK, "saved", ""},
		{[]string{"config", "get", "memoryGB"}, ExitOK, "4\n", ""},
		{[]string{"config", "set", "inferenceUrl", "http://127.0.0.1:99999/v1"}, ExitError, "", "inferenceUrl: \"http://127.0.0.1:99999/v1\" has a port outside 1–65535"},
		{[]string{"config", "set", "imageManifest", "builtin:debian"}, ExitError, "", "not a built-in image"},
		{[]string{"config", "set", "githubRawUrl", "https://me:tok@raw.example.com/"}, ExitError, "", "carries credentials"},
		{[]string{"config", "reset", "cpus"}, ExitOK, "saved", ""},
		{[]string{"config", "get", "cpus"}, ExitOK, "2\n", ""},
	}
	for _, s := range steps {
		out, errOut, code := b.run("", s.args...)
		if code != s.code || !strings.Contains(out, s.out) || !containsAll(errOut, strings.Split(s.err, "|")...) {
			t.Fatalf("%v: exit %d (want %d)\nstdout: %s\nstderr: %s", s.args, code, s.code, out, errOut)
		}
	}
	if errOut := func() string { _, e, _ := b.run("", "config", "get"); return e }(); errOut != "" {
		t.Errorf("after the repair config get still complains: %s", errOut)
	}
}

// TestConfigDamagedOnRealBinary: a sandbox.json that isn't JSON doesn't
// lock the user out of `config`: get shows the defaults with the file
// and the fix, set names them, reset moves the file aside; status says so.
func TestConfigDamagedOnRealBinary(t *testing.T) {
	b := newBinRun(t)
	path := config.Paths{Root: b.home}.SandboxJSON()
	os.MkdirAll(filepath.Dir(path), 0o755)
	for _, body := range []string{"", "{\n  \"cpus\": 4,\n  good\n}\n"} {
		os.WriteFile(path, []byte(body), 0o644)
		fix := "fix it by hand, or run `osaurus-sandbox config reset` to move it aside (to sandbox.json.damaged-TIME) and start from the defaults"
		steps := []struct {
			args     []string
			code     int
			out, err string
		}{
			{[]string{"config", "get"}, ExitError, "cpus", path + " line |is not valid JSON|" + fix + "|(shown: the defaults"},
			{[]string{"config", "get", "cpus"}, ExitError, "2\n", fix},
			{[]string{"config", "set", "cpus", "4"}, ExitError, "", path + " line |" + fix},
			{[]string{"status"}, ExitOK, "settings: " + path + " line ", ""},
			{[]string{"config", "reset", "cpus"}, ExitOK, "moved " + path + " to " + path + ".damaged-", ""},
			{[]string{"config", "get"}, ExitOK, "cpus", ""},
			{[]string{"config", "set", "cpus", "3"}, ExitOK, "saved", ""},
			{[]string{"config", "reset"}, ExitOK, "moved " + path + " to " + path + ".bak-|every setting is at its default", ""},
			{[]string{"config", "get", "cpus"}, ExitOK, "2\n", ""},
		}
		for _, s := range steps {
			out, errOut, code := b.run("", s.args...)
			if code != s.code || !containsAll(out, strings.Split(s.out, "|")...) || !containsAll(errOut, strings.Split(s.err, "|")...) || strings.Contains(errOut, "EOF") {
				t.Fatalf("%q: %v: exit %d (want %d)\nstdout: %s\nstderr: %s", body, s.args, code, s.code, out, errOut)
			}
		}
		if m, _ := filepath.Glob(path + ".damaged-*"); len(m) == 0 {
			t.Fatal("the damaged file was not kept")
		} else if kept, _ := os.ReadFile(m[0]); string(kept) != body {
			t.Fatalf("the damaged file kept is %q, want %q", kept, body)
		}
		m, _ := filepath.Glob(path + ".*-*")
		for _, f := range m {
			os.Remove(f)
		}
	}
}

// TestCompletionOnRealBinary: the completion scripts load in their shells
// and complete commands, subcommands and setting names.
func TestCompletionOnRealBinary(t *testing.T) {
	b := newBinRun(t)
	script := func(shell string) string {
		out, errOut, code := b.run("", "completion", shell)
		if code != ExitOK {
			t.Fatalf("completion %s: %d %s", shell, code, errOut)
		}
		f := filepath.Join(t.TempDir(), "completion."+shell)
		os.WriteFile(f, []byte(out), 0o644)
		return f
	}
	need := func(shell string) string {
		p, err := exec.LookPath(shell)
		if err != nil {
			t.Fatalf("%s not found: install it (apt-get install %s; `make deps-test`)", shell, shell)
		}
		return p
	}
	t.Run("bash", func(t *testing.T) {
		f := script("bash")
		for _, tt := range []struct{ line, want string }{
			{"osaurus-sandbox dia", "diagnostics"},
			{"osaurus-sandbox agent rem", "remove"},
			{"osaurus-sandbox config set mcpP", "mcpPort"},
			{"osaurus-sandbox completion f", "fish"},
			{"osaurus-sandbox agent conn", "connect"},
			{"osaurus-sandbox agent dis", "disconnect"},
			{"osaurus-sandbox agent connect alice --client claude-c", "claude-code"},
			{"osaurus-sandbox agent disconnect alice --client vs", "vscode"},
		} {
			words := strings.Fields(tt.line)
			prog := ". " + f + "\nCOMP_WORDS=(" + strings.Join(words, " ") + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n_osaurus_sandbox\necho \"${COMPREPLY[*]}\"\n"
			out, err := exec.Command(need("bash"), "-c", prog).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != tt.want {
				t.Errorf("%q completes to %q (%v), want %q", tt.line, out, err, tt.want)
			}
		}
	})
	t.Run("zsh", func(t *testing.T) {
		f := script("zsh")
		// Loaded in an interactive zsh with completion on; the command's
		// completer is registered.
		out, err := exec.Command(need("zsh"), "-f", "-c", "autoload -Uz compinit && compinit -u -D && . "+f+" && print -r -- ${_comps[osaurus-sandbox]}").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "_osaurus_sandbox" {
			t.Errorf("zsh: %q %v", out, err)
		}
		// The completer itself, with compadd and _describe standing in
		// for zsh's: what it offers after `agent` and after --client.
		for _, tt := range []struct{ words, want string }{
			{"osaurus-sandbox agent ''", "connect disconnect"},
			{"osaurus-sandbox agent connect alice --client ''", "claude-desktop claude-code cursor vscode generic"},
		} {
			prog := ". " + f + "\ncompadd() { shift; print -r -- \"$*\" }\n_describe() { }\ncompdef() { }\nwords=(" + tt.words + ")\nCURRENT=${#words}\n_osaurus_sandbox\n"
			out, err := exec.Command(need("zsh"), "-f", "-c", prog).CombinedOutput()
			if err != nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("zsh after %s: %q %v, want %q", tt.words, out, err, tt.want)
			}
		}
	})
	t.Run("fish", func(t *testing.T) {
		f := script("fish")
		out, err := exec.Command(need("fish"), "--no-config", "-c", "source "+f+"; complete -C 'osaurus-sandbox agent re'; complete -C 'osaurus-sandbox config get mcpP'; complete -C 'osaurus-sandbox agent con'; complete -C 'osaurus-sandbox agent connect alice --client vs'").CombinedOutput()
		if err != nil || !containsAll(string(out), "remove", "mcpPort", "connect", "vscode") {
			t.Errorf("fish: %q %v", out, err)
		}
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestMCPStdioOnRealBinary: a line that isn't a JSON-RPC message gets a
// JSON-RPC error (-32700 for text that isn't JSON) and the session goes
// on; no error a client gets names a Go type.
func TestMCPStdioOnRealBinary(t *testing.T) {
	b := newBinRun(t)
	if _, errOut, code := b.run("", "agent", "add", "alice"); code != ExitOK {
		t.Fatal(errOut)
	}
	cmd := exec.Command(b.bin, "mcp", "--agent", "alice")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+b.home, "XDG_CACHE_HOME="+filepath.Join(b.home, ".cache"))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(what string) map[string]any {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the server closed stdout; stderr: %s", what, stderr.String())
			}
			if strings.Contains(l, " Go ") || strings.Contains(l, "Go value") || strings.Contains(l, "mcp.") {
				t.Errorf("%s: a Go type name reached the client: %s", what, l)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%s: not JSON: %s", what, l)
			}
			return m
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: no answer; stderr: %s", what, stderr.String())
		}
		return nil
	}
	send := func(s string) { io.WriteString(stdin, s+"\n") }
	code := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := next("initialize"); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, tt := range []struct {
		line string
		code float64
	}{
		{"this is not JSON", -32700},
		{`{"jsonrpc":"2.0","id":7,"method":`, -32700},
		{`42`, -32600},
		{`{"hello":"world"}`, -32600},
	} {
		send(tt.line)
		if m := next(tt.line); code(m) != tt.code || m["id"] != nil {
			t.Errorf("%q: %v, want error %v with id null", tt.line, m, tt.code)
		}
	}
	// The session goes on.
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if m := next("tools/list"); m["result"] == nil || !strings.Contains(fmt.Sprint(m["result"]), "sandbox_read_file") {
		t.Fatalf("tools/list after the bad lines: %v", m)
	}
	// Params of the wrong type: the SDK's decoder error, without Go types.
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"sandbox_read_file"}`)
	if m := next("tools/call with params a string"); m["error"] == nil {
		t.Errorf("tools/call with bad params: %v", m)
	}
}

// longestKey is the length of the longest setting's name (config get's
// first column).
func longestKey() int {
	n := 0
	for _, k := range config.KeyDocs() {
		n = max(n, len(k[0]))
	}
	return n
}
