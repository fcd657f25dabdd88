package tools

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// localShell runs the guest's exec of a session as a local process: the
// host's side of sessions (markers, timeouts, bounds) against a real sh.
// ChildSignals reach the shell's children, as the guest's cgroup does.
func localShell(t *testing.T) func(req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
	return func(req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
		if len(req.Argv) == 0 || req.Argv[0] != "/bin/sh" {
			return agentproto.ExitStatus{Exited: true}, nil
		}
		cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
		cmd.Dir = t.TempDir()
		cmd.Stdout, cmd.Stderr = eio.Stdout, eio.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		// Not cmd.Stdin: Wait would wait for the session's stdin to end.
		in, err := cmd.StdinPipe()
		if err != nil {
			return agentproto.ExitStatus{}, err
		}
		if err := cmd.Start(); err != nil {
			return agentproto.ExitStatus{}, err
		}
		go io.Copy(in, eio.Stdin)
		pid := cmd.Process.Pid
		done := make(chan struct{})
		go func() {
			for {
				select {
				case sig := <-eio.ChildSignals:
					exec.Command("pkill", "-"+strconv.Itoa(sig), "-P", strconv.Itoa(pid)).Run()
				case sig := <-eio.Signals:
					syscall.Kill(-pid, syscall.Signal(sig))
				case <-done:
					return
				}
			}
		}()
		cmd.Wait()
		close(done)
		syscall.Kill(-pid, syscall.SIGKILL)
		st := agentproto.ExitStatus{Exited: true, Code: cmd.ProcessState.ExitCode()}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.Signal, st.Code = int(ws.Signal()), 128+int(ws.Signal())
		}
		return st, nil
	}
}

func TestSessions(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Redactor = valueRedactor{"TOKEN": "s3cr3t-value"} })
	h.guest.exec = localShell(t)
	run := func(ts *Toolset, args map[string]any) envelope.Envelope {
		t.Helper()
		h.ts = ts
		return h.call("sandbox_exec", args)
	}
	bob, alice := h.ts, h.env.Toolset(testAgent("alice", true, false))
	t.Cleanup(func() { h.env.CloseSessions(bob.agent.ID); h.env.CloseSessions(alice.agent.ID) })

	ok(t, run(bob, map[string]any{"session": "s", "command": "cd /tmp && export X=1 && f() { echo fn-$1; }"}))
	r := ok(t, run(bob, map[string]any{"session": "s", "command": "pwd; echo $X; f 2"}))
	if r["stdout"] != "/tmp\n1\nfn-2\n" || r["cwd"] != "/tmp" {
		t.Fatalf("the directory, variables and functions did not carry over: %v", r)
	}
	r = ok(t, run(bob, map[string]any{"session": "s", "command": "echo out; echo err >&2; (exit 4)"}))
	if r["stdout"] != "out\n" || r["stderr"] != "err\n" || r["exit_code"] != jsonNum(4) {
		t.Fatalf("streams and exit code per call: %v", r)
	}
	// Output without a newline, and a forged marker, stay output.
	r = ok(t, run(bob, map[string]any{"session": "s", "command": `printf 'no-newline'; printf '\036OSB00 0 /\036'`}))
	if r["stdout"] != "no-newline\x1eOSB00 0 /\x1e" {
		t.Fatalf("stdout %q", r["stdout"])
	}
	// Secrets are scrubbed from what a session returns.
	r = ok(t, run(bob, map[string]any{"session": "s", "command": "echo s3cr3t-value"}))
	if strings.Contains(fmt.Sprint(r), "s3cr3t-value") {
		t.Fatalf("a secret came back: %v", r)
	}
	// A timed-out command goes, the session stays.
	e := run(bob, map[string]any{"session": "s", "command": "sleep 100", "timeout": 1})
	if e.OK || e.Kind != envelope.Timeout || !strings.Contains(e.Message, "session's shell lives on") {
		t.Fatalf("timeout: %+v", e)
	}
	r = ok(t, run(bob, map[string]any{"session": "s", "command": "echo $X; pwd"}))
	if r["stdout"] != "1\n/tmp\n" {
		t.Fatalf("after a timeout: %v", r)
	}
	// Another agent's session of the same name is its own.
	r = ok(t, run(alice, map[string]any{"session": "s", "command": "echo ${X:-unset}"}))
	if r["stdout"] != "unset\n" {
		t.Fatalf("alice's session s: %v", r)
	}
	// A script runs in the session.
	h.guest.put("/workspace/agents/bob/x.sh", "echo hi\n")
	h.ts = bob
	ok(t, h.call("sandbox_run_script", map[string]any{"session": "s", "path": "x.sh"}))
	// exit ends it; the next call starts afresh.
	e = run(bob, map[string]any{"session": "s", "command": "exit 3"})
	if r := ok(t, e); r["exit_code"] != jsonNum(3) || !strings.Contains(strings.Join(e.Warnings, " "), "ended shell session") {
		t.Fatalf("exit 3: %v %q", r, e.Warnings)
	}
	r = ok(t, run(bob, map[string]any{"session": "s", "command": "echo ${X:-unset}"}))
	if r["stdout"] != "unset\n" {
		t.Fatalf("a new session after exit: %v", r)
	}
	ok(t, run(bob, map[string]any{"session": "s", "command": "true", "close_session": true}))
	if n := h.env.Sessions(bob.agent.ID); n != 0 {
		t.Fatalf("%d sessions after close_session", n)
	}
	// Bounded per agent.
	for i := range MaxSessions {
		ok(t, run(bob, map[string]any{"session": "b" + strconv.Itoa(i), "command": "true"}))
	}
	if e := run(bob, map[string]any{"session": "one-more", "command": "true"}); e.OK || e.Kind != envelope.Rejected {
		t.Fatalf("session %d: %+v", MaxSessions+1, e)
	}
	for _, bad := range []string{"-x", "a b", strings.Repeat("a", 65), "../x"} {
		if e := run(bob, map[string]any{"session": bad, "command": "true"}); e.OK || e.Kind != envelope.InvalidArgs {
			t.Fatalf("session %q: %+v", bad, e)
		}
	}
	if e := run(bob, map[string]any{"command": "true", "close_session": true}); e.OK || e.Kind != envelope.InvalidArgs {
		t.Fatalf("close_session without session: %+v", e)
	}
	h.env.CloseSessions(bob.agent.ID)
	if n := h.env.Sessions(bob.agent.ID); n != 0 {
		t.Fatalf("%d sessions after CloseSessions", n)
	}
}

// The end marker is found however the output is cut into frames.
func TestMarkSinkAnySplit(t *testing.T) {
	const mark = "\x1eOSBabc "
	stream := "line1\nhalf \x1eOSBab" + mark + "7 /tmp\x1etrailing"
	for cut := 1; cut < len(stream); cut++ {
		var out bytes.Buffer
		m := newMarkSink(&out, mark)
		m.write([]byte(stream[:cut]))
		m.write([]byte(stream[cut:]))
		select {
		case <-m.found:
		default:
			t.Fatalf("cut %d: no marker", cut)
		}
		if out.String() != "line1\nhalf \x1eOSBab" || m.trailer != "7 /tmp" {
			t.Fatalf("cut %d: output %q trailer %q", cut, out.String(), m.trailer)
		}
	}
}
