//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// pid1Probe runs as the agent. It looks for threads of PID 1 it may
// signal: tgkill with signal 0 and prlimit without a new limit pass the
// very permission checks a SIGQUIT or an RLIMIT_NOFILE of 0 would (the
// kernel compares the caller's uids with the target thread's), so a hit
// is a way to kill PID 1 or cripple it for the rest of the boot; the
// probe reports it instead of doing the damage. /proc hides PID 1's
// tasks from agents (hidepid=2), so it tries every tid up to the newest.
// It runs until the marker file exists or the time is up.
const pid1Probe = `import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
SYS_kill, SYS_tgkill, SYS_prlimit64 = 62, 234, 302
RLIMIT_NOFILE = 7
class rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]
def errno_of(r):
    return 0 if r == 0 else ctypes.get_errno()
deadline, marker = time.time() + float(sys.argv[1]), sys.argv[2]
open(sys.argv[3], "w").close()
found, rounds = set(), 0
while time.time() < deadline and not os.path.exists(marker):
    rounds += 1
    last = int(open("/proc/loadavg").read().split()[-1])  # the last pid handed out
    for tid in range(2, last + 64):
        if libc.syscall(SYS_tgkill, 1, tid, 0) == 0 and tid not in found:
            found.add(tid)
            print("SIGNALLABLE", tid, flush=True)
            r = rlimit()
            if libc.syscall(SYS_prlimit64, tid, RLIMIT_NOFILE, None, ctypes.byref(r)) == 0:
                print("PRLIMIT", tid, r.cur, flush=True)
print("ROUNDS", rounds)
print("KILL1", errno_of(libc.syscall(SYS_kill, 1, 3)))
print("TGKILL1", errno_of(libc.syscall(SYS_tgkill, 1, 1, 3)))
r = rlimit()
print("PRLIMIT1", errno_of(libc.syscall(SYS_prlimit64, 1, RLIMIT_NOFILE, None, ctypes.byref(r))))
`

// pid1Watch runs as root and reports every thread of PID 1 whose real,
// effective or saved uid or gid is the agent's, until the marker exists.
const pid1Watch = `import os, sys, time
uid, gid, marker, started = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
deadline = time.time() + float(sys.argv[5])
open(started, "w").close()
rounds = 0
while time.time() < deadline and not os.path.exists(marker):
    rounds += 1
    for t in os.listdir("/proc/1/task"):
        try:
            lines = open("/proc/1/task/%s/status" % t).read().splitlines()
        except OSError:
            continue
        for l in lines:
            f = l.split()
            if (f[0] == "Uid:" and uid in f[1:4]) or (f[0] == "Gid:" and gid in f[1:4]):
                print("AGENT", t, l, flush=True)
print("ROUNDS", rounds)
`

// callAsync runs a tool in the background; the envelope (or the error)
// arrives on the channel.
func callAsync(s *session, tool string, args any) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			ch <- callResult{err: err}
			return
		}
		e, err := envelope.Parse(res.Content[0].(*mcp.TextContent).Text)
		ch <- callResult{e: e, err: err}
	}()
	return ch
}

type callResult struct {
	e   envelope.Envelope
	err error
}

// TestPID1 attacks the guest agent, which is PID 1 (its death panics the
// kernel and ends every agent's work), as a hostile agent would: through
// the threads that run its file tools, with a file operation that would
// keep PID 1 busy for minutes, with signals, and with a FUSE mount that
// would hang a PID-1 thread.
func TestPID1(t *testing.T) {
	// On the shared guest: the limits are per agent. Were an attack to
	// take the guest down, this test fails on it and every later test
	// on the shared guest says an earlier test stopped it.
	te := newToolsEnvCAs(t, false) // no package registry needed
	g := te.m.Agent()
	te.addAgent(t, "Alice", autonomous(100, false))
	alice := te.http(t, "alice")
	root := func(t *testing.T, script string) string {
		t.Helper()
		out, errOut, st := sh(t, g, "", script)
		if st.Code != 0 {
			t.Fatalf("root %q: %+v %s", script, st, errOut)
		}
		return strings.TrimSpace(out)
	}
	bootID := root(t, "cat /proc/sys/kernel/random/boot_id")
	alive := func(t *testing.T, after string) {
		t.Helper()
		if got := root(t, "cat /proc/sys/kernel/random/boot_id"); got != bootID {
			t.Fatalf("the guest rebooted after %s (PID 1 died)", after)
		}
		if r := alice.ok(t, "sandbox_exec", map[string]any{"command": "echo alive"}); r["stdout"] != "alive\n" {
			t.Fatalf("alice after %s: %v", after, r)
		}
	}
	ids := strings.Fields(str(alice.ok(t, "sandbox_exec", map[string]any{"command": "id -u; id -g"})["stdout"]))
	if len(ids) != 2 {
		t.Fatalf("alice's ids: %v", ids)
	}
	uid, gid := ids[0], ids[1]

	t.Run("no thread of PID 1 carries the agent's ids", func(t *testing.T) {
		const marker, watchStarted = "/run/pid1-e2e-done", "/run/pid1-e2e-watching"
		root(t, "rm -f "+marker+" "+watchStarted)
		alice.ok(t, "sandbox_write_file", map[string]any{"path": "probe.py", "content": pid1Probe})
		// 32 GiB of holes: no disk, but a line scan that reads it all keeps
		// a PID-1 thread busy for minutes.
		alice.ok(t, "sandbox_exec", map[string]any{"command": "rm -f probe-started && truncate -s 32G sparse.bin && truncate -s 16M under.bin"})

		type out struct {
			stdout string
			err    error
		}
		watch := make(chan out, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			o, _, _, err := g.Output(ctx, agentproto.ExecRequest{Shell: fmt.Sprintf("python3 -c '%s' %s %s %s %s 400", pid1Watch, uid, gid, marker, watchStarted)})
			watch <- out{string(o), err}
		}()
		probe := callAsync(alice, "sandbox_exec", map[string]any{"command": "python3 probe.py 280 " + marker + " probe-started", "timeout": 300})
		pollTools(t, "the root watcher and alice's probe to start", func() bool {
			_, _, st := sh(t, g, "", "test -e "+watchStarted+" && test -e ~agent-alice/probe-started")
			return st.Code == 0
		})

		// The slow operation: a tail of a file of holes (before the limits,
		// it kept a thread of PID 1 busy for minutes).
		tailDone := callAsync(alice, "sandbox_read_file", map[string]any{"path": "sparse.bin", "tail_lines": 10})
		// A slow one within the limits (16 MiB of holes), which may still
		// meet the time limit on an emulated CPU.
		if e := alice.call(t, "sandbox_read_file", map[string]any{"path": "under.bin", "tail_lines": 10}); !e.OK && !strings.Contains(e.Message, "scan time limit") {
			t.Errorf("tail_lines on 16 MiB of holes: %+v, want a result or the scan time limit", e)
		}
		// Many short ones, each on a thread of its own.
		for i := range 30 {
			p := fmt.Sprintf("f-%d.txt", i)
			alice.ok(t, "sandbox_write_file", map[string]any{"path": p, "content": "x\n"})
			alice.ok(t, "sandbox_read_file", map[string]any{"path": p, "tail_lines": 1})
			alice.ok(t, "sandbox_list_directory", map[string]any{"path": "."})
		}
		root(t, "touch "+marker)
		w := <-watch
		p := <-probe
		if w.err != nil || p.err != nil {
			t.Fatalf("watcher: %v; probe: %v", w.err, p.err)
		}
		t.Logf("root watcher: %s", lastLine(w.stdout))
		if !strings.Contains(w.stdout, "ROUNDS") {
			t.Fatalf("the root watcher did not run: %q", w.stdout)
		}
		if strings.Contains(w.stdout, "AGENT") {
			t.Errorf("threads of PID 1 ran with alice's uid %s or gid %s as real, effective or saved id:\n%s", uid, gid, w.stdout)
		}
		pr, _ := p.e.Result.(map[string]any)
		so := str(pr["stdout"])
		t.Logf("alice's probe: %q", so)
		if !p.e.OK || !strings.Contains(so, "ROUNDS") {
			t.Fatalf("alice's probe did not run: %+v", p.e)
		}
		if strings.Contains(so, "SIGNALLABLE") || strings.Contains(so, "PRLIMIT ") {
			t.Errorf("alice could signal threads of PID 1 or change its limits:\n%s", so)
		}
		for _, want := range []string{"KILL1 1\n", "TGKILL1 1\n", "PRLIMIT1 1\n"} { // 1 is EPERM
			if !strings.Contains(so, want) {
				t.Errorf("alice's kill/tgkill/prlimit on PID 1: want %q (EPERM) in %q", want, so)
			}
		}

		// A line scan is bounded: the tail ends with an error naming the
		// limit, not after reading 32 GiB in PID 1.
		td := <-tailDone
		if td.err != nil {
			t.Fatalf("tail_lines on 32 GiB of holes: %v", td.err)
		}
		tail := td.e
		t.Logf("tail_lines on 32 GiB of holes: ok %v, %s: %s", tail.OK, tail.Kind, tail.Message)
		if tail.OK || !strings.Contains(tail.Message, "line-scan limit") {
			t.Errorf("tail_lines on 32 GiB of holes: %+v, want an error naming the line-scan limit", tail)
		}
		alive(t, "alice's attack on PID 1's threads")
	})

	t.Run("agents can't make FUSE mounts", func(t *testing.T) {
		// A FUSE file system whose daemon never answers hangs whoever
		// looks inside: a PID-1 thread serving a file tool, were it in an
		// agent's home. Without /dev/fuse (and a setuid helper that opens it
		// as root) no agent can mount one.
		r := alice.ok(t, "sandbox_exec", map[string]any{"command": `python3 -c '
import os
try:
    os.close(os.open("/dev/fuse", os.O_RDWR)); print("OPENED")
except OSError as e:
    print("REFUSED", e)
'`})
		if so := str(r["stdout"]); !strings.HasPrefix(so, "REFUSED") {
			t.Errorf("alice opened /dev/fuse: %q", so)
		}
		if got := root(t, "ls -l /dev/fuse 2>&1; find / -xdev -perm /6000 -name 'fusermount*' 2>/dev/null; true"); !strings.Contains(got, "No such file") || strings.Contains(got, "fusermount") {
			t.Errorf("/dev/fuse and setuid fusermount: %q, want neither", got)
		}
		alive(t, "alice's FUSE attempt")
	})

	t.Run("PID 1 survives every catchable signal", func(t *testing.T) {
		// Sent by root, who may signal PID 1 at all: a package script, say.
		// The Go runtime's default for SIGQUIT, SIGABRT, a SIGSEGV sent by
		// kill and others is to die, which panics the kernel.
		for _, sig := range []string{"QUIT", "ABRT", "SEGV", "BUS", "FPE", "ILL", "TRAP", "SYS", "STKFLT",
			"TERM", "INT", "HUP", "USR1", "USR2", "PIPE", "ALRM", "VTALRM", "XCPU", "XFSZ", "PWR", "IO",
			"PROF", "URG", "WINCH", "CONT", "TSTP", "TTIN", "TTOU", "RTMIN", "RTMAX"} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, errOut, st, err := g.Output(ctx, agentproto.ExecRequest{Argv: []string{"python3", "-c", "import os, signal, sys; os.kill(1, signal.Signals['SIG' + sys.argv[1]])", sig}})
			cancel()
			if err != nil || st.Code != 0 {
				t.Fatalf("kill(1, SIG%s): %v %+v %s", sig, err, st, errOut)
			}
			ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
			out, _, _, err := g.Output(ctx, agentproto.ExecRequest{Shell: "cat /proc/sys/kernel/random/boot_id"})
			cancel()
			if err != nil || strings.TrimSpace(string(out)) != bootID {
				t.Fatalf("PID 1 died of SIG%s: %v (console: %s)", sig, err, consoleTail())
			}
		}
		alive(t, "signals to PID 1")
	})
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
