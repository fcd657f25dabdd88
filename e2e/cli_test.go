//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// buildCLI compiles the app binary once per test run.
func buildCLI(t testing.TB) string {
	t.Helper()
	cliBuild.once.Do(func() {
		cliBuild.bin = filepath.Join(env.dataDir, "bin", "osaurus-sandbox")
		// Built as a test's child: its keychain entries use the test
		// service name, as this test binary's do.
		cmd := exec.Command("go", "build", "-ldflags="+secrets.TestBuildLDFlag, "-o", cliBuild.bin, "../cmd/osaurus-sandbox")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			cliBuild.err = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if cliBuild.err != nil {
		t.Fatal(cliBuild.err)
	}
	return cliBuild.bin
}

// cliBuild is the CLI binary every test runs, built once per run (a link
// takes seconds on a loaded 2-core machine, and most tests run it).
var cliBuild struct {
	once sync.Once
	bin  string
	err  error
}

type cliRun struct {
	t    testing.TB
	bin  string
	home string
}

func (c cliRun) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+c.home)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("%v: %v", args, err)
	}
	return o.String(), e.String(), code
}

func (c cliRun) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("osaurus-sandbox %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// TestCLIFirstDay is the README's day one: provision, start, diagnostics,
// exec, the quick start (an agent connected to an MCP client makes its
// first tool call), reset keeping the workspace, stop — through the real
// binary and its background owner process.
func TestCLIFirstDay(t *testing.T) {
	requireGuest(t)
	srv := newSwitchableServer(t)
	p := copyContainer(t)
	c := cliRun{t: t, bin: buildCLI(t), home: p.Root}
	t.Cleanup(func() {
		c.run("stop")
		// Belt and braces: nothing of this data dir may outlive the test.
		for _, prog := range []string{"qemu-system", "virtiofsd", "serve --background"} {
			if n := countProcs(p, prog); n != 0 {
				t.Errorf("%d %s processes left after stop", n, prog)
			}
		}
	})

	if _, errOut, code := c.run("config", "set", "cpus", "12"); code != 1 || !strings.Contains(errOut, "cpus: 12, allowed 1–8") {
		t.Fatalf("invalid config: exit %d, %q", code, errOut)
	}
	c.ok("config", "set", "imageManifest", srv.URL+"/manifest.json")
	out := c.ok("config", "set", "memoryGB", "1")
	if !strings.Contains(out, "restart") {
		t.Errorf("memory change does not mention a restart: %q", out)
	}
	if _, _, code := c.run("exec", "--", "true"); code != 3 {
		t.Fatalf("exec before start: exit %d, want 3 (not running)", code)
	}

	c.ok("provision")
	c.ok("start")
	var st struct {
		State string `json:"state"`
		Owner string `json:"owner"`
		Accel string `json:"accel"`
	}
	if err := json.Unmarshal([]byte(c.ok("status", "--json")), &st); err != nil || st.State != "running" || st.Owner != "background" {
		t.Fatalf("status: %+v %v", st, err)
	}

	// The agent-user check runs as each agent that exists (issue 34).
	c.ok("agent", "add", "Diag Carol")
	c.ok("agent", "add", "Diag Dave")
	out, errOut, code := c.run("diagnostics", "--json")
	var rs []diagnostics.Result
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("diagnostics json: %v\n%s\n%s", err, out, errOut)
	}
	agentChecks := map[string]string{}
	for _, r := range rs {
		if strings.HasPrefix(r.Name, "agent-user") {
			agentChecks[r.Name] = r.Detail
		}
	}
	if len(agentChecks) != 2 || !strings.Contains(agentChecks["agent-user:diag-carol"], "as agent-diag-carol (uid ") ||
		!strings.Contains(agentChecks["agent-user:diag-dave"], "as agent-diag-dave (uid ") {
		t.Errorf("agent-user checks: %v, want one as each agent", agentChecks)
	}
	// --agent names one; the text output names its check.
	if out, _, _ := c.run("diagnostics", "--agent", "Diag Dave"); !strings.Contains(out, "agent-user:diag-dave") || strings.Contains(out, "diag-carol") {
		t.Errorf("diagnostics --agent: %s", out)
	}
	for _, r := range rs {
		t.Logf("%-16s %-13s %s", r.Name, r.Outcome, r.Detail)
		if r.Outcome == diagnostics.Fail {
			t.Errorf("diagnostic %s failed: %s (hint: %s)", r.Name, r.Detail, r.Hint)
		}
	}
	if code != 0 {
		t.Errorf("diagnostics exit %d", code)
	}

	if out := c.ok("exec", "--", "sh", "-c", "echo hi from $(hostname) > /workspace/hello.txt; cat /workspace/hello.txt"); out != "hi from sandbox\n" {
		t.Fatalf("exec: %q", out)
	}
	if _, _, code := c.run("exec", "--", "sh", "-c", "exit 7"); code != 7 {
		t.Fatalf("exit code not passed through: %d", code)
	}

	quickStart(t, c)

	// reset asks first; declining changes nothing.
	cmd := exec.Command(c.bin, "reset")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+c.home)
	cmd.Stdin = strings.NewReader("no\n")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 5 {
		t.Fatalf("declined reset: %v", err)
	}
	c.ok("reset", "--yes")
	// The safety net: the state before the reset is a checkpoint.
	if out := c.ok("checkpoint", "list"); !strings.Contains(out, "before reset") {
		t.Errorf("no checkpoint before the reset: %q", out)
	}
	c.ok("start")
	if out := c.ok("exec", "--", "cat", "/workspace/hello.txt"); out != "hi from sandbox\n" {
		t.Fatalf("workspace after reset: %q", out)
	}

	c.ok("stop")
	testwait.Eventually(t, "QEMU to exit after stop", time.Minute, 100*time.Millisecond, func() bool { return countProcs(p, "qemu-system") == 0 })
	if err := json.Unmarshal([]byte(c.ok("status", "--json")), &st); err != nil || st.State != "stopped" {
		t.Fatalf("status after stop: %+v %v", st, err)
	}
}

// quickStart follows the README's quick start on a running sandbox: add an
// agent, let it run commands, connect it to Claude Code (whose config file
// lives in a home of the test's own), then start the server exactly as
// that file says, as the client would, and make the first tool call.
func quickStart(t *testing.T, c cliRun) {
	t.Helper()
	c.ok("agent", "add", "alice")
	c.ok("agent", "set", "alice", "enabled", "true")
	clientHome := t.TempDir()
	connect := exec.Command(c.bin, "agent", "connect", "alice", "--client", "claude-code", "--yes")
	// The binary under test first on PATH: connect names the osaurus-sandbox
	// on PATH when it runs from a temporary folder, and an installed one
	// elsewhere on this machine must not be the one the client runs.
	connect.Env = append(os.Environ(), config.HomeEnv+"="+c.home, "HOME="+clientHome, "PATH="+filepath.Dir(c.bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := connect.CombinedOutput(); err != nil {
		t.Fatalf("agent connect: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(clientHome, ".claude.json"))
	if err != nil {
		t.Fatalf("agent connect wrote no client config: %v", err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || len(cfg.MCPServers) != 1 {
		t.Fatalf("client config: %v\n%s", err, raw)
	}
	for name, e := range cfg.MCPServers {
		// Only what the entry says: the data folder must come from its env
		// block, as for a client started from anywhere.
		cmd := exec.Command(e.Command, e.Args...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, config.HomeEnv+"=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		for k, v := range e.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = testLog{t, "stdio server: "}
		s := newSession(t, "client entry "+name, &mcp.CommandTransport{Command: cmd})
		r := s.ok(t, "sandbox_exec", map[string]any{"command": "whoami"})
		if got := strings.TrimSpace(str(r["stdout"])); got != "agent-alice" {
			t.Fatalf("first tool call ran as %q, want agent-alice: %v", got, r)
		}
		s.cs.Close() // the client quits; the sandbox goes on
	}
}
