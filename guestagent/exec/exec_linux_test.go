//go:build linux

package exec

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"golang.org/x/sys/unix"
)

func TestExecExitCodes(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct {
		name   string
		req    agentproto.ExecRequest
		code   int
		signal int
		stdout string
		stderr string
	}{
		{name: "argv", req: agentproto.ExecRequest{Argv: []string{"echo", "hello", "world"}}, stdout: "hello world\n"},
		{name: "shell", req: agentproto.ExecRequest{Shell: "echo out; echo err >&2; exit 3"}, code: 3, stdout: "out\n", stderr: "err\n"},
		{name: "killed by signal", req: agentproto.ExecRequest{Shell: "kill -TERM $$"}, code: 128 + 15, signal: 15},
		{name: "runs as the user", req: agentproto.ExecRequest{Identity: agentproto.Identity{User: "alice"}, Shell: "id -u; id -g; id -G"},
			stdout: "2345\n2345\n2345 3000\n"},
		{name: "home is the default cwd", req: agentproto.ExecRequest{Identity: agentproto.Identity{User: "alice"}, Argv: []string{"pwd"}},
			stdout: e.home("alice") + "\n"},
		{name: "explicit cwd", req: agentproto.ExecRequest{Argv: []string{"pwd"}, Cwd: "/"}, stdout: "/\n"},
		{name: "clean env plus extras", req: agentproto.ExecRequest{
			Identity: agentproto.Identity{User: "bob"},
			Shell:    `echo "$HOME|$USER|$LOGNAME|$SHELL|$LANG|$PATH|$FOO|${SECRET-unset}"`,
			Env:      []string{"FOO=1", "FOO=2", "LANG=de_DE.UTF-8"},
		}, stdout: e.home("bob") + "|bob|bob|/bin/sh|de_DE.UTF-8|" + BasePath + "|2|unset\n"},
	}
	t.Setenv("SECRET", "agent environment must not leak")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, out, errOut := e.run(t, tc.req)
			if !st.Exited || st.Code != tc.code || st.Signal != tc.signal || st.TimedOut {
				t.Errorf("status = %+v, want code %d signal %d", st, tc.code, tc.signal)
			}
			if out != tc.stdout || errOut != tc.stderr {
				t.Errorf("stdout %q stderr %q, want %q %q", out, errOut, tc.stdout, tc.stderr)
			}
		})
	}
}

func TestExecErrorsBeforeStart(t *testing.T) {
	e := newTestEnv(t)
	mustMkdir(t, filepath.Join(e.base, "private"), 0o700, bobUID)
	tests := []struct {
		name string
		req  agentproto.ExecRequest
		want error
	}{
		{"unknown user", agentproto.ExecRequest{Identity: agentproto.Identity{User: "mallory"}, Argv: []string{"true"}}, agentproto.ErrNoSuchUser},
		{"missing cwd", agentproto.ExecRequest{Argv: []string{"true"}, Cwd: "/nonexistent/dir"}, agentproto.ErrNotFound},
		{"cwd of another user", agentproto.ExecRequest{Identity: agentproto.Identity{User: "alice"}, Argv: []string{"true"}, Cwd: filepath.Join(e.base, "private")}, agentproto.ErrPermission},
		{"binary not in PATH", agentproto.ExecRequest{Argv: []string{"no-such-binary-xyz"}}, agentproto.ErrNotFound},
		{"missing absolute binary", agentproto.ExecRequest{Argv: []string{"/no/such/binary"}}, agentproto.ErrNotFound},
		{"not executable", agentproto.ExecRequest{Argv: []string{e.db.Passwd}}, agentproto.ErrPermission},
		{"argv and shell", agentproto.ExecRequest{Argv: []string{"true"}, Shell: "true"}, agentproto.ErrInvalid},
		{"bad env", agentproto.ExecRequest{Argv: []string{"true"}, Env: []string{"NOEQUALS"}}, agentproto.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newExecIO()
			_, err := e.svc.Exec(context.Background(), &tc.req, x.io())
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if x.pid != 0 {
				t.Fatalf("Started(%d) called for a failed start", x.pid)
			}
		})
	}
}

// The first output must reach the caller while the process still runs:
// here the process only exits after the test saw its first line.
func TestExecStreamsOutputAndStdin(t *testing.T) {
	e := newTestEnv(t)
	stdinR, stdinW := io.Pipe()
	x := newExecIO()
	x.stdin = stdinR
	type result struct {
		st  agentproto.ExitStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := e.svc.Exec(context.Background(), &agentproto.ExecRequest{
			Identity: agentproto.Identity{User: "alice"},
			Shell:    `echo first; read line; echo "got $line"; cat`,
		}, x.io())
		done <- result{st, err}
	}()
	select {
	case <-x.first:
	case r := <-done:
		t.Fatalf("exec ended before streaming anything: %+v", r)
	case <-time.After(10 * time.Second):
		t.Fatal("no output while the process waits for stdin: output is not streamed")
	}
	if out, _ := x.out(); out != "first\n" {
		t.Fatalf("stdout so far %q", out)
	}
	io.WriteString(stdinW, "hello\nrest of input\n")
	stdinW.Close()
	r := <-done
	if r.err != nil || r.st.Code != 0 {
		t.Fatalf("exec: %+v %v", r.st, r.err)
	}
	if out, _ := x.out(); out != "first\ngot hello\nrest of input\n" {
		t.Fatalf("stdout %q", out)
	}
}

func TestExecTimeoutKillsWholeGroup(t *testing.T) {
	e := newTestEnv(t)
	st, out, _ := e.run(t, agentproto.ExecRequest{
		Identity:      agentproto.Identity{User: "alice"},
		Shell:         "sleep 100 & echo $!; sleep 100",
		TimeoutMillis: 1000,
	})
	if !st.TimedOut || st.Signal != int(syscall.SIGKILL) || st.Code != 137 {
		t.Fatalf("status = %+v, want timed out by SIGKILL", st)
	}
	child, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("background pid %q: %v", out, err)
	}
	waitDead(t, child)
}

// An orphan holding the output pipe must not keep the call open, and
// output written before the leader exited must not be lost.
func TestExecReturnsDespiteOrphanHoldingPipe(t *testing.T) {
	e := newTestEnv(t)
	st, out, _ := e.run(t, agentproto.ExecRequest{Shell: "echo $$; (sleep 100 &) ; echo done"})
	if st.Code != 0 || !strings.HasSuffix(out, "done\n") {
		t.Fatalf("status %+v stdout %q", st, out)
	}
	// Clean up the orphan: it is in the leader's process group.
	pgid, _ := strconv.Atoi(strings.Fields(out)[0])
	unix.Kill(-pgid, unix.SIGKILL)
}

func TestExecSignalsGoToGroup(t *testing.T) {
	e := newTestEnv(t)
	x := newExecIO()
	done := make(chan agentproto.ExitStatus, 1)
	go func() {
		st, err := e.svc.Exec(context.Background(), &agentproto.ExecRequest{
			Shell: "trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
		}, x.io())
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	<-x.first
	x.signals <- int(syscall.SIGTERM)
	st := <-done
	if out, _ := x.out(); st.Code != 7 || !strings.Contains(out, "got TERM") {
		t.Fatalf("status %+v stdout %q", st, out)
	}
}

func TestExecContextCancelKills(t *testing.T) {
	e := newTestEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	x := newExecIO()
	done := make(chan agentproto.ExitStatus, 1)
	go func() {
		st, _ := e.svc.Exec(ctx, &agentproto.ExecRequest{Shell: "echo up; sleep 100"}, x.io())
		done <- st
	}()
	<-x.first
	cancel()
	if st := <-done; st.Signal != int(syscall.SIGKILL) {
		t.Fatalf("status %+v, want SIGKILL", st)
	}
}

func TestExecBeneathRoot(t *testing.T) {
	e := newTestEnv(t)
	ws := filepath.Join(e.base, "ws")
	mustMkdir(t, filepath.Join(ws, "sub"), 0o755, aliceUID)
	if err := os.Symlink("/etc", filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	id := agentproto.Identity{User: "alice", Root: ws}
	if _, out, _ := e.run(t, agentproto.ExecRequest{Identity: id, Argv: []string{"pwd"}}); out != ws+"\n" {
		t.Fatalf("default cwd beneath root = %q, want %q", out, ws)
	}
	if _, out, _ := e.run(t, agentproto.ExecRequest{Identity: id, Argv: []string{"pwd"}, Cwd: "sub"}); out != filepath.Join(ws, "sub")+"\n" {
		t.Fatalf("cwd = %q", out)
	}
	// A symlink that stays beneath the root is followed, to its real path.
	if err := os.Symlink("sub", filepath.Join(ws, "in")); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := e.run(t, agentproto.ExecRequest{Identity: id, Argv: []string{"pwd"}, Cwd: "in"}); out != filepath.Join(ws, "sub")+"\n" {
		t.Fatalf("cwd through a symlink beneath root = %q", out)
	}
	if err := os.WriteFile(filepath.Join(ws, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "sub"), filepath.Join(ws, "abs")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cwd  string
		want error
	}{
		{"out", agentproto.ErrEscape},           // symlink out of the root
		{"abs", agentproto.ErrEscape},           // absolute symlink, even to inside
		{"../", agentproto.ErrEscape},           // dot-dot
		{"sub/../../etc", agentproto.ErrEscape}, // dot-dot further down
		{"/etc", agentproto.ErrEscape},          // absolute, outside
		{"file", agentproto.ErrNotDir},
		{"missing", agentproto.ErrNotFound},
	} {
		x := newExecIO()
		_, err := e.svc.Exec(context.Background(), &agentproto.ExecRequest{Identity: id, Argv: []string{"pwd"}, Cwd: tc.cwd}, x.io())
		if !errors.Is(err, tc.want) {
			t.Errorf("cwd %q beneath root: err = %v, want %v", tc.cwd, err, tc.want)
		}
	}
}

func TestBackgroundWaitAndSignal(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	alice := agentproto.Identity{User: "alice"}
	bob := agentproto.Identity{User: "bob"}

	// Quick job: output lands in the default log, owned by the user.
	bg, err := e.svc.StartBackground(ctx, &agentproto.StartBackgroundRequest{
		ExecRequest: agentproto.ExecRequest{Identity: alice, Shell: "echo to-log; echo err-to-log >&2; exit 4"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(bg.LogPath, filepath.Join(e.home("alice"), ".sandbox", "logs")+"/") {
		t.Fatalf("log path %q", bg.LogPath)
	}
	st, err := e.svc.Wait(ctx, &agentproto.WaitRequest{Identity: alice, Pid: bg.Pid, TimeoutMillis: 10000})
	if err != nil || !st.Exited || st.Code != 4 {
		t.Fatalf("wait = %+v, %v", st, err)
	}
	log, _ := os.ReadFile(bg.LogPath)
	if string(log) != "to-log\nerr-to-log\n" {
		t.Fatalf("log = %q", log)
	}
	if fi, _ := os.Stat(bg.LogPath); ownerOf(t, bg.LogPath) != aliceUID || fi.Mode().Perm() != 0o600 {
		t.Fatalf("log file owner %d mode %v", ownerOf(t, bg.LogPath), fi.Mode())
	}

	// Long job in its own session.
	bg, err = e.svc.StartBackground(ctx, &agentproto.StartBackgroundRequest{
		ExecRequest: agentproto.ExecRequest{Identity: alice, Argv: []string{"sleep", "100"}},
		LogPath:     filepath.Join(e.home("alice"), "sleep.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Kill(bg.Pid, unix.SIGKILL)
	if sid, _ := unix.Getsid(bg.Pid); sid != bg.Pid {
		t.Errorf("session id %d, want its own session %d", sid, bg.Pid)
	}
	if st, err := e.svc.Wait(ctx, &agentproto.WaitRequest{Identity: alice, Pid: bg.Pid}); err != nil || st.Exited {
		t.Fatalf("poll = %+v, %v; want still running", st, err)
	}
	if _, err := e.svc.Wait(ctx, &agentproto.WaitRequest{Identity: bob, Pid: bg.Pid}); !errors.Is(err, agentproto.ErrPermission) {
		t.Fatalf("bob waits for alice's process: err = %v, want ErrPermission", err)
	}
	_, err = e.svc.Signal(ctx, &agentproto.SignalRequest{Identity: bob, Pid: bg.Pid, Signal: int(syscall.SIGKILL)})
	if !errors.Is(err, agentproto.ErrPermission) {
		t.Fatalf("bob signals alice's process: err = %v, want ErrPermission", err)
	}
	if !alive(bg.Pid) {
		t.Fatal("bob's refused signal killed the process anyway")
	}
	if _, err := e.svc.Signal(ctx, &agentproto.SignalRequest{Identity: alice, Pid: bg.Pid, Signal: int(syscall.SIGTERM), Group: true}); err != nil {
		t.Fatal(err)
	}
	st, err = e.svc.Wait(ctx, &agentproto.WaitRequest{Pid: bg.Pid, TimeoutMillis: 10000}) // root may wait for anyone
	if err != nil || !st.Exited || st.Signal != int(syscall.SIGTERM) {
		t.Fatalf("wait after SIGTERM = %+v, %v", st, err)
	}
	// A timeout kills the background process group.
	bg, err = e.svc.StartBackground(ctx, &agentproto.StartBackgroundRequest{
		ExecRequest: agentproto.ExecRequest{Identity: alice, Shell: "sleep 100 & echo $! > child.pid; sleep 100", TimeoutMillis: 1500},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err = e.svc.Wait(ctx, &agentproto.WaitRequest{Identity: alice, Pid: bg.Pid, TimeoutMillis: 10000})
	if err != nil || !st.TimedOut || st.Signal != int(syscall.SIGKILL) {
		t.Fatalf("wait after background timeout = %+v, %v", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(e.home("alice"), "child.pid")); err == nil {
		child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		waitDead(t, child)
	} else {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		req  agentproto.SignalRequest
		want error
	}{
		{agentproto.SignalRequest{Pid: 1, Signal: 15}, agentproto.ErrInvalid},
		{agentproto.SignalRequest{Pid: 0, Signal: 15}, agentproto.ErrInvalid},
		{agentproto.SignalRequest{Pid: 99999999, Signal: 15}, agentproto.ErrNotFound},
	} {
		if _, err := e.svc.Signal(ctx, &tc.req); !errors.Is(err, tc.want) {
			t.Errorf("signal %+v: err = %v, want %v", tc.req, err, tc.want)
		}
	}
	if _, err := e.svc.Wait(ctx, &agentproto.WaitRequest{Pid: 99999999}); !errors.Is(err, agentproto.ErrNotFound) {
		t.Errorf("wait for unknown pid: %v", err)
	}
}

// Statuses of processes that exit immediately must never be lost, even
// when the exit beats the registration.
func TestReaperDeliversEveryStatus(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := i % 7
			pid, ch, err := testReaper.Start(func() (int, error) {
				return syscall.ForkExec("/bin/sh", []string{"sh", "-c", "exit " + strconv.Itoa(code)}, &syscall.ProcAttr{})
			})
			if err != nil {
				t.Error(err)
				return
			}
			select {
			case ws := <-ch:
				if ws.ExitStatus() != code {
					t.Errorf("pid %d: exit %d, want %d", pid, ws.ExitStatus(), code)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("pid %d: status never delivered", pid)
			}
		}()
	}
	wg.Wait()
}

func TestSecondReaperRefused(t *testing.T) {
	if _, err := NewReaper(); err == nil {
		t.Fatal("a second Reaper started; it would steal exit statuses")
	}
}

func BenchmarkExecTrue(b *testing.B) {
	e := &testEnv{}
	var err error
	e.svc, err = New(Config{Reaper: testReaper})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		x := newExecIO()
		if _, err := e.svc.Exec(context.Background(), &agentproto.ExecRequest{Argv: []string{"true"}, Cwd: "/"}, x.io()); err != nil {
			b.Fatal(err)
		}
	}
}
