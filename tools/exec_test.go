package tools

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

func TestExec(t *testing.T) {
	t.Run("request and result", func(t *testing.T) {
		h := newHarness(t)
		h.guest.exec = printer("hi\n", "warn\n", agentproto.ExitStatus{Code: 3})
		e := h.call("sandbox_exec", map[string]any{"command": "echo hi; echo warn >&2; exit 3"})
		r := ok(t, e)
		if r["stdout"] != "hi\n" || r["stderr"] != "warn\n" || r["exit_code"] != jsonNum(3) || r["cwd"] != "/workspace/agents/bob" || len(e.Warnings) != 0 {
			t.Fatalf("result %v warnings %q", r, e.Warnings)
		}
		req := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest)
		if req.Shell != "echo hi; echo warn >&2; exit 3" || req.Cwd != "/workspace/agents/bob" || req.TimeoutMillis != 30_000 {
			t.Fatalf("request %+v", req)
		}
	})
	t.Run("timeout bounds", func(t *testing.T) {
		h := newHarness(t)
		e := h.call("sandbox_exec", map[string]any{"command": "true", "timeout": 900, "cwd": "/workspace/shared"})
		ok(t, e)
		if req := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest); req.TimeoutMillis != 300_000 || req.Cwd != "/workspace/shared" {
			t.Fatalf("request %+v", req)
		}
		if len(e.Warnings) != 2 || e.Warnings[0] != "timeout 900 is over the maximum; used 300" {
			t.Fatalf("warnings %q", e.Warnings)
		}
	})
	t.Run("empty output", func(t *testing.T) {
		h := newHarness(t)
		e := h.call("sandbox_exec", map[string]any{"command": "true"})
		ok(t, e)
		if len(e.Warnings) != 1 || e.Warnings[0] != "the command printed nothing (exit code 0)" {
			t.Fatalf("warnings %q", e.Warnings)
		}
		h.guest.exec = printer("", "", agentproto.ExitStatus{Code: 1})
		if e = h.call("sandbox_exec", map[string]any{"command": "false"}); e.Warnings[0] != "the command printed nothing and failed with exit code 1" {
			t.Fatalf("warnings %q", e.Warnings)
		}
	})
	t.Run("SIGPIPE", func(t *testing.T) {
		h := newHarness(t)
		h.guest.exec = printer("y\n", "", agentproto.ExitStatus{Code: 141, Signal: 13})
		e := h.call("sandbox_exec", map[string]any{"command": "yes"})
		if ok(t, e); len(e.Warnings) != 1 || !strings.Contains(e.Warnings[0], "SIGPIPE") {
			t.Fatalf("warnings %q", e.Warnings)
		}
	})
	t.Run("timed out", func(t *testing.T) {
		h := newHarness(t)
		h.guest.exec = printer("started\n", "", agentproto.ExitStatus{Code: 137, Signal: 9, TimedOut: true})
		e := h.call("sandbox_exec", map[string]any{"command": "sleep 99", "timeout": 2})
		failed(t, e, envelope.Timeout, "")
		if !strings.Contains(e.Message, "still running after 2s") || !strings.Contains(e.Message, "stdout: started") {
			t.Fatal(e.Message)
		}
	})
	t.Run("missing cwd", func(t *testing.T) {
		h := newHarness(t)
		h.call("sandbox_list_directory", nil)
		h.guest.fail[agentproto.OpExec] = fmt.Errorf("working directory: %w", notFound("/workspace/agents/bob/nope"))
		failed(t, h.call("sandbox_exec", map[string]any{"command": "ls", "cwd": "nope"}), envelope.NotFound, "cwd")
	})
	t.Run("cwd through a symlink out of the home", func(t *testing.T) {
		h := newHarness(t)
		h.call("sandbox_list_directory", nil)
		h.guest.fail[agentproto.OpExec] = fmt.Errorf("working directory: %w: openat etc", agentproto.ErrEscape)
		failed(t, h.call("sandbox_exec", map[string]any{"command": "ls", "cwd": "etc"}), envelope.Rejected, "")
	})
}

func TestExecOutputCaps(t *testing.T) {
	h := newHarness(t)
	head := strings.Repeat("H", 30_000)
	tail := strings.Repeat("T", 40_000)
	stdout := head + strings.Repeat("m", 1_000_000) + tail
	stderr := strings.Repeat("e", 12_000) + "last words"
	h.guest.exec = printer(stdout, stderr, agentproto.ExitStatus{})
	e := h.call("sandbox_exec", map[string]any{"command": "big"})
	r := ok(t, e)
	out := r["stdout"].(string)
	if !strings.HasPrefix(out, strings.Repeat("H", StdoutCap*2/5)+"\n\n[... ") || !strings.HasSuffix(out, "...]\n\n"+strings.Repeat("T", StdoutCap*3/5)) {
		t.Fatalf("stdout keeps %d head and %d tail characters: %q...%q", StdoutCap*2/5, StdoutCap*3/5, out[:40], out[len(out)-40:])
	}
	if len(out) > StdoutCap+100 {
		t.Fatalf("stdout is %d characters, over the cap", len(out))
	}
	errText := r["stderr"].(string)
	if len(errText) > StderrCap+100 || !strings.HasSuffix(errText, "last words") {
		t.Fatalf("stderr %d characters ending %q", len(errText), errText[len(errText)-20:])
	}
	if len(e.Warnings) != 2 || !strings.HasPrefix(e.Warnings[0], "stdout was 1070000 bytes; kept the first 20000 and the last 30000 characters") ||
		!strings.HasPrefix(e.Warnings[1], "stderr was 12010 bytes; kept the first 4000 and the last 6000 characters") {
		t.Fatalf("warnings %q", e.Warnings)
	}
}

func TestBackgroundAndProcess(t *testing.T) {
	h := newHarness(t)
	r := ok(t, h.call("sandbox_exec_background", map[string]any{"command": "python3 -m http.server", "cwd": "/workspace/shared"}))
	if r["pid"] != jsonNum(4242) || r["log_file"] != "/workspace/agents/bob/.sandbox/logs/4242.log" || r["background"] != true || r["cwd"] != "/workspace/shared" {
		t.Fatalf("result %v", r)
	}
	mv := h.guest.last(t, agentproto.OpMove).(agentproto.MoveRequest)
	if mv.Dst != "/workspace/agents/bob/.sandbox/logs/4242.log" || !mv.Overwrite || mv.Root != "/workspace/agents/bob" {
		t.Fatalf("log rename %+v", mv)
	}
	h.guest.put("/workspace/agents/bob/.sandbox/logs/4242.log", strings.Repeat("serving\n", 100))

	h.guest.wait[4242] = agentproto.ExitStatus{}
	r = ok(t, h.call("sandbox_process", map[string]any{"action": "poll", "pid": 4242, "tail_lines": 2}))
	if r["running"] != true || r["log_tail"] != "serving\nserving\n" || r["exit_code"] != nil {
		t.Fatalf("poll %v", r)
	}
	if w := h.guest.last(t, agentproto.OpWait).(agentproto.WaitRequest); w.TimeoutMillis != 0 || w.User != "agent-bob" {
		t.Fatalf("poll waits: %+v", w)
	}
	e := h.call("sandbox_process", map[string]any{"action": "wait", "pid": 4242})
	if r = ok(t, e); r["running"] != true || len(e.Warnings) != 1 || e.Warnings[0] != "still running after 1m0s" {
		t.Fatalf("wait %v %q", r, e.Warnings)
	}
	if w := h.guest.last(t, agentproto.OpWait).(agentproto.WaitRequest); w.TimeoutMillis != 60_000 {
		t.Fatalf("wait default: %+v", w)
	}

	h.guest.wait[4242] = agentproto.ExitStatus{Exited: true, Code: 143, Signal: 15}
	r = ok(t, h.call("sandbox_process", map[string]any{"action": "kill", "pid": 4242}))
	sig := h.guest.last(t, agentproto.OpSignal).(agentproto.SignalRequest)
	if sig.Signal != 15 || !sig.Group || sig.Pid != 4242 || sig.User != "agent-bob" {
		t.Fatalf("kill sends %+v", sig)
	}
	if r["running"] != false || r["exit_code"] != jsonNum(143) || r["signal"] != jsonNum(15) {
		t.Fatalf("kill %v", r)
	}
	ok(t, h.call("sandbox_process", map[string]any{"action": "kill", "pid": 4242, "force": true}))
	if sig := h.guest.last(t, agentproto.OpSignal).(agentproto.SignalRequest); sig.Signal != 9 {
		t.Fatalf("force sends %d", sig.Signal)
	}

	// Another agent's process: the guest refuses by uid.
	h.guest.fail[agentproto.OpSignal] = fmt.Errorf("signal 77: %w", agentproto.ErrPermission)
	e = h.call("sandbox_process", map[string]any{"action": "kill", "pid": 77})
	failed(t, e, envelope.Rejected, "")
	if e.Message != "process 77 is not yours; you can only manage processes you started" {
		t.Fatal(e.Message)
	}
	h.guest.fail[agentproto.OpWait] = fmt.Errorf("%w: process 77 belongs to another user", agentproto.ErrPermission)
	failed(t, h.call("sandbox_process", map[string]any{"action": "poll", "pid": 77}), envelope.Rejected, "")
	delete(h.guest.fail, agentproto.OpWait)
	failed(t, h.call("sandbox_process", map[string]any{"action": "wait", "pid": 999}), envelope.NotFound, "")
	failed(t, h.call("sandbox_process", map[string]any{"action": "poll", "pid": 1}), envelope.InvalidArgs, "pid")
}

func TestRunScript(t *testing.T) {
	h := newHarness(t)
	h.guest.put("/workspace/agents/bob/s.py", "print('hi')\n")
	h.guest.put("/workspace/agents/bob/tool", "#!/usr/bin/env -S node --no-warnings\nconsole.log(1)\n")
	h.guest.put("/workspace/agents/bob/notes.txt", "hello\n")
	h.guest.exec = func(req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
		eio.Stdout.Write([]byte("out1\n"))
		eio.Stderr.Write([]byte("err1\n"))
		eio.Stdout.Write([]byte("out2\n"))
		return agentproto.ExitStatus{Exited: true}, nil
	}
	r := ok(t, h.call("sandbox_run_script", map[string]any{"path": "s.py", "args": []string{"--n", "3"}}))
	if r["language"] != "python" || r["combined"] != "out1\nerr1\nout2\n" || r["stdout"] != "out1\nout2\n" || r["stderr"] != "err1\n" {
		t.Fatalf("result %v", r)
	}
	req := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest)
	if fmt.Sprint(req.Argv) != "[python3 /workspace/agents/bob/s.py --n 3]" || req.TimeoutMillis != 60_000 || req.Cwd != "/workspace/agents/bob" {
		t.Fatalf("request %+v", req)
	}
	r = ok(t, h.call("sandbox_run_script", map[string]any{"path": "tool"}))
	if r["language"] != "node" {
		t.Fatalf("shebang: %v", r["language"])
	}
	failed(t, h.call("sandbox_run_script", map[string]any{"path": "notes.txt"}), envelope.InvalidArgs, "path")
	failed(t, h.call("sandbox_run_script", map[string]any{"path": "missing.py"}), envelope.NotFound, "")

	h.guest.fail[agentproto.OpExec] = fmt.Errorf("%w: exec node: executable file not found in $PATH", agentproto.ErrNotFound)
	e := h.call("sandbox_run_script", map[string]any{"path": "tool"})
	failed(t, e, envelope.ExecutionError, "")
	if !strings.Contains(e.Message, `sandbox_install {"packages": ["nodejs"]}`) {
		t.Fatal(e.Message)
	}
}

func TestDetectLanguage(t *testing.T) {
	tests := []struct {
		file, first string
		lang        string
	}{
		{"a.py", "", "python"},
		{"a.sh", "", "sh"},
		{"a.sh", "#!/bin/bash -e", "bash"},
		{"a.bash", "", "bash"},
		{"a.js", "", "node"},
		{"a.mjs", "", "node"},
		{"run", "#!/usr/bin/env python3", "python"},
		{"run", "#!/usr/bin/python3.11", "python"},
		{"run", "#!/usr/bin/env -S node --x", "node"},
		{"run", "#! /bin/sh", "sh"},
		{"a.py", "#!/bin/bash", "bash"}, // the #! line wins
		{"run", "#!/usr/bin/perl", ""},
		{"a.rb", "", ""},
		{"Makefile", "all:", ""},
	}
	for _, tt := range tests {
		if got, _ := detectLanguage(tt.file, []byte(tt.first)); got != tt.lang {
			t.Errorf("detectLanguage(%q, %q) = %q, want %q", tt.file, tt.first, got, tt.lang)
		}
	}
}

func TestCapture(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		max    int
		want   string
		cut    bool
	}{
		{"fits", []string{"hello ", "world"}, 20, "hello world", false},
		{"exactly the cap", []string{"0123456789"}, 10, "0123456789", false},
		{"head and tail", []string{"0123456789", "abcdefghij"}, 10, "0123\n\n[... 10 bytes omitted of 20 ...]\n\nefghij", true},
		{"many small writes", strings.Split(strings.Repeat("x", 1000)+"END", ""), 10, "xxxx\n\n[... 993 bytes omitted of 1003 ...]\n\nxxxEND", true},
		{"multibyte", []string{strings.Repeat("é", 30)}, 10, "éééé\n\n[... 40 bytes omitted of 60 ...]\n\néééééé", true},
		{"invalid utf-8", []string{"ok\xff"}, 10, "ok\ufffd", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(tt.max)
			for _, w := range tt.writes {
				c.Write([]byte(w))
			}
			got, cut := c.Text()
			if got != tt.want || cut != tt.cut {
				t.Fatalf("Text() = %q, %v\nwant     %q, %v", got, cut, tt.want, tt.cut)
			}
		})
	}
}

func BenchmarkCaptureWrite(b *testing.B) {
	chunk := []byte(strings.Repeat("x", 32<<10))
	c := newCapture(StdoutCap)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		c.Write(chunk)
	}
}

// TestExecCarriesNetworkPolicy: every process an agent starts carries its
// network policy, read from the registry at that moment, so a change the
// owner made (from the CLI or the window) holds from the next command;
// root's installs carry none (they run in the VM's own network).
func TestExecCarriesNetworkPolicy(t *testing.T) {
	reg, err := agents.Open(filepath.Join(t.TempDir(), agents.FileName))
	if err != nil {
		t.Fatal(err)
	}
	a, err := reg.Add("Bob")
	if err != nil {
		t.Fatal(err)
	}
	if a, err = reg.Update(a.ID, func(a *agents.Agent) error {
		a.AutonomousExec.Enabled, a.AutonomousExec.BackgroundProcesses = true, true
		return a.AutonomousExec.SetNetwork("example.com")
	}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *Options) { o.Agents = reg })
	h.ts = h.env.Toolset(a) // a snapshot: the registry is what counts

	ok(t, h.call("sandbox_exec", map[string]any{"command": "true"}))
	if req := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest); req.Network != "example.com" {
		t.Fatalf("exec carries network %q, want example.com", req.Network)
	}
	// The owner changes the setting (for `agent set`): the registry the
	// tools read is its own, no file is re-read.
	if _, err := reg.Update("bob", func(a *agents.Agent) error { return a.AutonomousExec.SetNetwork("none") }); err != nil {
		t.Fatal(err)
	}
	ok(t, h.call("sandbox_exec", map[string]any{"command": "true"}))
	if req := h.guest.last(t, agentproto.OpExec).(agentproto.ExecRequest); req.Network != "none" {
		t.Fatalf("next exec carries network %q, want none", req.Network)
	}
	ok(t, h.call("sandbox_exec_background", map[string]any{"command": "sleep 1"}))
	if req := h.guest.last(t, agentproto.OpStartBg).(agentproto.StartBackgroundRequest); req.Network != "none" {
		t.Fatalf("background start carries network %q, want none", req.Network)
	}
}
