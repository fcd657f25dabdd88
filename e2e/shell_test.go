//go:build linux

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/sandboxpath"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// tmuxTerm is a real terminal (tmux on a socket of the test's own) that
// the tests type into and read the screen of.
type tmuxTerm struct {
	t    *testing.T
	sock string
}

func newTmux(t *testing.T) *tmuxTerm {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed; the shell tests type into a real terminal: sudo apt-get install tmux (or scripts/install-deps.sh test)")
	}
	tm := &tmuxTerm{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	t.Cleanup(func() { exec.Command("tmux", "-S", tm.sock, "kill-server").Run() })
	return tm
}

func (tm *tmuxTerm) run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.sock}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// window opens a window named name running cmd in a shell that prints
// its exit code and stays, so the test can read it.
func (tm *tmuxTerm) window(name string, cmd string) {
	tm.t.Helper()
	script := cmd + `; echo "client-exit=$?"; exec sleep 3600`
	if _, err := os.Stat(tm.sock); err != nil {
		// A first window that waits, so the option holds before any
		// shell starts: no status line. (resize-window makes a window's
		// size manual by itself; setting window-size manual globally
		// crashes tmux 3.3a at the next new-window.)
		tm.run("-f", "/dev/null", "new-session", "-d", "-s", "e2e", "-n", "idle", "-x", "100", "-y", "30", "sleep", "3600")
		tm.run("set-option", "-g", "status", "off")
	}
	tm.run("new-window", "-d", "-t", "e2e:", "-n", name, "sh", "-c", script)
}

func (tm *tmuxTerm) keys(name string, keys ...string) {
	tm.t.Helper()
	tm.run(append([]string{"send-keys", "-t", "e2e:" + name}, keys...)...)
}

// typeLine types a line and Enter.
func (tm *tmuxTerm) typeLine(name, line string) {
	tm.t.Helper()
	tm.keys(name, "-l", line)
	tm.keys(name, "Enter")
}

func (tm *tmuxTerm) screen(name string) string {
	tm.t.Helper()
	return tm.run("capture-pane", "-p", "-J", "-S", "-200", "-t", "e2e:"+name)
}

// waitLine polls the screen until a line matches re, within d.
func (tm *tmuxTerm) waitLine(name string, re string, d time.Duration) string {
	tm.t.Helper()
	rx := regexp.MustCompile(`(?m)^` + re + `\s*$`)
	deadline := time.Now().Add(d)
	for {
		s := tm.screen(name)
		if m := rx.FindString(s); m != "" {
			return strings.TrimSpace(m)
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("window %s: no line matching %q within %s; the screen:\n%s", name, re, d, s)
		}
		time.Sleep(100 * time.Millisecond) // polling the screen, not waiting for an event
	}
}

// TestShellInTerminal drives `osaurus-sandbox shell` in a real terminal:
// a prompt as the agent's user in its namespaces, cd, the window's size
// following a resize, Ctrl-C reaching the foreground job, exit codes,
// another agent's home shut, the owner's labelled root shell, and no
// process left in the guest when the client is killed.
func TestShellInTerminal(t *testing.T) {
	tm := newTmux(t)
	te := newToolsEnvCAs(t, false)
	te.addAgent(t, "alice", autonomous(100, false))
	bob := te.addAgent(t, "bob", autonomous(100, false))
	// bob's user and home exist, with a file of his.
	bs := te.http(t, "bob")
	bs.ok(t, "sandbox_write_file", map[string]any{"path": "secret.txt", "content": "bob's\n"})
	as := te.http(t, "alice")
	ns := as.ok(t, "sandbox_exec", map[string]any{"command": "echo $(readlink /proc/self/ns/net) $(readlink /proc/self/ns/mnt)"})
	toolNS := strings.TrimSpace(str(ns["stdout"]))

	cli := "env " + config.HomeEnv + "=" + te.home + " " + te.bin
	const slow = 3 * time.Minute
	tm.window("alice", cli+" shell alice")
	tm.typeLine("alice", "whoami")
	tm.waitLine("alice", "agent-alice", slow)
	tm.typeLine("alice", "cd /workspace/shared && pwd")
	tm.waitLine("alice", "/workspace/shared", time.Minute)

	// The namespaces its tool calls get.
	tm.typeLine("alice", "echo ns: $(readlink /proc/self/ns/net) $(readlink /proc/self/ns/mnt)")
	tm.waitLine("alice", regexp.QuoteMeta("ns: "+toolNS), time.Minute)

	// The terminal's size follows the window.
	size := strings.TrimSpace(tm.run("display-message", "-p", "-t", "e2e:alice", "#{pane_height} #{pane_width}"))
	tm.typeLine("alice", "echo size: $(stty size)")
	tm.waitLine("alice", "size: "+size, time.Minute)
	tm.run("resize-window", "-t", "e2e:alice", "-x", "132", "-y", "41")
	size2 := strings.TrimSpace(tm.run("display-message", "-p", "-t", "e2e:alice", "#{pane_height} #{pane_width}"))
	if size2 == size {
		t.Fatalf("tmux did not resize the window: still %s", size)
	}
	tm.typeLine("alice", "echo size2: $(stty size)")
	tm.waitLine("alice", "size2: "+size2, time.Minute)

	// Ctrl-C stops the foreground job, and the shell lives on: the line
	// comes long before sleep's 100 s were up.
	tm.typeLine("alice", "sleep 100")
	started := time.Now()
	// The shell must have started sleep before the Ctrl-C is sent, or bash
	// drops it as a key typed ahead: wait until sleep runs.
	g := te.m.Agent()
	waitGuest(t, g, running("sleep 10[0]"), time.Minute)
	tm.keys("alice", "C-c")
	tm.typeLine("alice", "echo alive-$((40+2))")
	tm.waitLine("alice", "alive-42", time.Minute)
	if d := time.Since(started); d > 90*time.Second {
		t.Fatalf("Ctrl-C did not stop sleep 100: the shell answered after %s", d)
	}

	// Another agent's home is shut to it.
	bobHome := sandboxpath.AgentHome(bob.Slug)
	tm.typeLine("alice", "cat "+bobHome+"/secret.txt; echo read-rc=$?")
	tm.waitLine("alice", "read-rc=1", time.Minute)
	if strings.Contains(tm.screen("alice"), "bob's") {
		t.Fatal("alice's shell read bob's file")
	}

	// exit N is the client's exit code.
	tm.typeLine("alice", "exit 7")
	tm.waitLine("alice", "client-exit=7", time.Minute)

	// The owner's root shell, labelled as such.
	tm.window("root", cli+" shell")
	tm.waitLine("root", ".*ROOT shell in the VM.*", slow)
	tm.typeLine("root", "echo me=$(whoami)")
	tm.waitLine("root", "me=root", time.Minute)
	tm.typeLine("root", "exit")
	tm.waitLine("root", "client-exit=0", time.Minute)

	// A killed client leaves nothing behind: not the foreground job, not
	// a background one.
	tm.window("kill", cli+" shell alice")
	tm.typeLine("kill", "sleep 4243 & sleep 4242")
	waitGuest(t, g, running("sleep 424[2]"), slow)
	pid := strings.TrimSpace(tm.run("display-message", "-p", "-t", "e2e:kill", "#{pane_pid}"))
	out, err := exec.Command("pgrep", "-P", pid, "-f", "shell alice").Output()
	if err != nil {
		t.Fatalf("finding the shell client under pane %s: %v", pid, err)
	}
	cpid, _ := strconv.Atoi(strings.Fields(string(out))[0])
	if err := syscallKill(cpid); err != nil {
		t.Fatal(err)
	}
	// The killed client left the terminal raw: its line may not start
	// at the left.
	tm.waitLine("kill", ".*client-exit=137", time.Minute)
	waitGuest(t, g, gone("sleep 424[23]"), time.Minute)
}

// running is a guest shell test that a process's command line (its
// words joined by spaces) matches the pattern. The pattern must not match
// the shell line itself (write a digit as [4]).
func running(pattern string) string {
	return "pgrep -f '" + pattern + "' >/dev/null"
}

// gone is the opposite of running; it fails without pgrep, rather than
// pass for a missing program.
func gone(pattern string) string {
	return "command -v pgrep >/dev/null && ! " + running(pattern)
}

// waitGuest polls a root shell line in the guest until it succeeds.
func waitGuest(t *testing.T, g *agentproto.Client, line string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, errOut, st, err := g.Output(ctx, agentproto.ExecRequest{Shell: line})
		cancel()
		if err == nil && st.Code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("guest: %q did not succeed within %s: %v %+v %s %s", line, d, err, st, out, errOut)
		}
		time.Sleep(200 * time.Millisecond) // polling the guest's state
	}
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// TestShellSessions: sandbox_exec with a session keeps the directory and
// variables between calls, a timed-out command leaves the session usable,
// and two agents' sessions of one name are apart.
func TestShellSessions(t *testing.T) {
	te := newToolsEnvCAs(t, false)
	te.addAgent(t, "alice", autonomous(100, false))
	te.addAgent(t, "bob", autonomous(100, false))
	a, b := te.http(t, "alice"), te.stdio(t, "bob")
	a.ok(t, "sandbox_exec", map[string]any{"session": "s", "command": "cd /workspace/shared && export X=1"})
	r := a.ok(t, "sandbox_exec", map[string]any{"session": "s", "command": "pwd; echo $X"})
	if got := str(r["stdout"]); got != "/workspace/shared\n1\n" {
		t.Fatalf("session: stdout %q, want the directory and variable of the call before", got)
	}
	if str(r["cwd"]) != "/workspace/shared" {
		t.Fatalf("session: cwd %q", r["cwd"])
	}
	// stderr and the exit code per call.
	r = a.ok(t, "sandbox_exec", map[string]any{"session": "s", "command": "echo out; echo err >&2; false"})
	if str(r["stdout"]) != "out\n" || str(r["stderr"]) != "err\n" || num(r["exit_code"]) != 1 {
		t.Fatalf("session: %v", r)
	}
	// A timed-out command goes; the session stays.
	a.fails(t, "sandbox_exec", map[string]any{"session": "s", "command": "sleep 100", "timeout": 2}, envelope.Timeout)
	r = a.ok(t, "sandbox_exec", map[string]any{"session": "s", "command": "echo $X; pwd"})
	if got := str(r["stdout"]); got != "1\n/workspace/shared\n" {
		t.Fatalf("session after a timeout: stdout %q", got)
	}
	// bob's session "s" is his own.
	r = b.ok(t, "sandbox_exec", map[string]any{"session": "s", "command": "echo ${X:-unset}; whoami"})
	if got := str(r["stdout"]); !strings.HasPrefix(got, "unset\nagent-") || strings.Contains(got, "alice") {
		t.Fatalf("bob's session: stdout %q", got)
	}
	// exit ends it; the next call starts afresh.
	r = a.ok(t, "sandbox_exec", map[string]any{"session": "s", "command": "exit 3"})
	if num(r["exit_code"]) != 3 {
		t.Fatalf("exit 3: %v", r)
	}
	r = a.ok(t, "sandbox_exec", map[string]any{"session": "s", "command": "echo ${X:-unset}"})
	if str(r["stdout"]) != "unset\n" {
		t.Fatalf("a new session after exit: %v", r)
	}
	// A script runs in the session's environment.
	a.ok(t, "sandbox_write_file", map[string]any{"path": "x.sh", "content": "echo script-X=$X\n"})
	a.ok(t, "sandbox_exec", map[string]any{"session": "s", "command": "export X=5"})
	r = a.ok(t, "sandbox_run_script", map[string]any{"session": "s", "path": "x.sh"})
	if str(r["stdout"]) != "script-X=5\n" {
		t.Fatalf("script in session: %v", r)
	}
	// Nothing of the closed session is left running.
	a.ok(t, "sandbox_exec", map[string]any{"session": "s", "command": "sleep 4343 &", "close_session": true})
	waitGuest(t, te.m.Agent(), gone("sleep 434[3]"), time.Minute)
}

// BenchmarkSessionExec measures a command's round trip in a shell session
// against a plain sandbox_exec, in one run over MCP HTTP on the shared
// guest.
func BenchmarkSessionExec(b *testing.B) {
	te := newToolsEnvCAs(b, false)
	te.addAgent(b, "alice", autonomous(100, false))
	s := te.http(b, "alice")
	s.ok(b, "sandbox_exec", map[string]any{"session": "bench", "command": "true"})
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"plain", map[string]any{"command": "true"}},
		{"session", map[string]any{"session": "bench", "command": "true"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				s.ok(b, "sandbox_exec", c.args)
			}
		})
	}
}
