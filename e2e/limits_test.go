//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// TestResourceLimits attacks the guest's cgroups as a hostile agent would,
// on one booted VM: processes that try to outlive their call, a fork bomb
// and an allocation beyond the agent's memory, while another agent keeps
// working and the VM never restarts.
func TestResourceLimits(t *testing.T) {
	// On the shared guest: the limits are per agent. Were an attack to
	// take the guest down, this test fails on it and every later test
	// on the shared guest says an earlier test stopped it.
	te := newToolsEnvCAs(t, false) // no package registry needed
	g := te.m.Agent()
	te.addAgent(t, "Alice", autonomous(100, true))
	te.addAgent(t, "Bob", autonomous(100, false))
	alice := te.http(t, "alice")
	bob := te.http(t, "bob")
	const aliceGroup = "/sys/fs/cgroup/osaurus/user-agent-alice"

	root := func(t *testing.T, script string) string {
		t.Helper()
		out, errOut, st := sh(t, g, "", script)
		if st.Code != 0 {
			t.Fatalf("root %q: %+v %s", script, st, errOut)
		}
		return strings.TrimSpace(out)
	}
	bootID := root(t, "cat /proc/sys/kernel/random/boot_id")
	// aliceProcs counts alice's processes as root sees them (hidepid
	// hides nothing from root).
	aliceProcs := func(t *testing.T) []string {
		t.Helper()
		out, _, _ := sh(t, g, "", "ps -u agent-alice -o pid=,args=")
		var procs []string
		for l := range strings.Lines(out) {
			if l = strings.TrimSpace(l); l != "" {
				procs = append(procs, l)
			}
		}
		return procs
	}
	// bobAnswers checks another agent's command still runs to its end,
	// within the exec's own timeout (the guest kills it after that). How
	// long it takes is logged, not asserted: speed is for benchmarks.
	bobAnswers := func(t *testing.T, during string) {
		t.Helper()
		start := time.Now()
		r := bob.ok(t, "sandbox_exec", map[string]any{"command": "echo alive", "timeout": 120})
		if r["stdout"] != "alive\n" || num(r["exit_code"]) != 0 {
			t.Fatalf("bob during %s: %v", during, r)
		}
		t.Logf("bob's sandbox_exec during %s: %s", during, time.Since(start).Round(10*time.Millisecond))
	}
	bobAnswers(t, "nothing")

	t.Run("calls run in their own group, out of the agent's reach", func(t *testing.T) {
		r := alice.ok(t, "sandbox_exec", map[string]any{"command": "cat /proc/self/cgroup"})
		cg := strings.TrimSpace(str(r["stdout"]))
		if !strings.HasPrefix(cg, "0::/osaurus/user-agent-alice/call-") {
			t.Fatalf("alice's command runs in cgroup %q, want its own call group", cg)
		}
		for _, attack := range []string{
			"echo max > " + aliceGroup + "/pids.max",
			"echo max > " + aliceGroup + "/memory.max",
			"echo $$ > /sys/fs/cgroup/cgroup.procs",
			"echo $$ > " + aliceGroup + "/bg/cgroup.procs",
			"mkdir /sys/fs/cgroup/osaurus/mine",
			"ls " + aliceGroup,
		} {
			r := alice.ok(t, "sandbox_exec", map[string]any{"command": attack})
			if num(r["exit_code"]) == 0 {
				t.Errorf("alice ran %q: %v", attack, r)
			}
		}
		if got := root(t, "cat "+aliceGroup+"/pids.max "+aliceGroup+"/cpu.weight"); got != fmt.Sprintf("%d\n%d", agentproto.DefaultMaxProcesses, agentproto.DefaultCPUWeight) {
			t.Errorf("alice's pids.max and cpu.weight: %q, want the defaults", got)
		}
	})

	t.Run("settings reach the guest on the next call", func(t *testing.T) {
		if _, err := te.reg.Update("alice", func(a *agents.Agent) error {
			a.Resources = agents.Resources{MaxProcesses: 64, MemoryMB: 160, CPUWeight: 50}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		alice.ok(t, "sandbox_exec", map[string]any{"command": "true"})
		got := strings.Fields(root(t, "cd "+aliceGroup+" && cat pids.max memory.max memory.high cpu.weight"))
		high, _ := strconv.Atoi(got[2])
		if len(got) != 4 || got[0] != "64" || got[1] != strconv.Itoa(160<<20) || high >= 160<<20 || high < 100<<20 || got[3] != "50" {
			t.Fatalf("alice's limits in the guest: %v, want pids 64, memory %d with high below it, weight 50", got, 160<<20)
		}
	})

	t.Run("the guest agent never keeps an agent's credentials", func(t *testing.T) {
		// Each file tool runs as the agent on a thread of PID 1; the
		// process's leader thread must stay root, or the agent could
		// signal PID 1 and read its /proc files.
		for i := range 30 {
			alice.ok(t, "sandbox_write_file", map[string]any{"path": fmt.Sprintf("creds-%d.txt", i), "content": "x"})
		}
		if got := root(t, "grep -E '^(Uid|Gid):' /proc/1/status | tr -s '\t ' ' '"); got != "Uid: 0 0 0 0\nGid: 0 0 0 0" {
			t.Fatalf("PID 1's credentials after alice's calls: %q, want root's", got)
		}
	})

	t.Run("nothing a call starts outlives it", func(t *testing.T) {
		r := alice.ok(t, "sandbox_exec", map[string]any{
			"command": "sh -c 'sleep 1000 & setsid sleep 1000 & nohup sleep 1000 >/dev/null 2>&1 &'; " +
				"(trap '' HUP TERM; setsid sleep 1001 &) ; echo started",
		})
		if r["stdout"] != "started\n" {
			t.Fatalf("escape attempt: %v", r)
		}
		if p := aliceProcs(t); len(p) > 0 {
			t.Fatalf("after the call returned alice still has processes: %v", p)
		}
		// The same after a timeout kill.
		e := alice.fails(t, "sandbox_exec", map[string]any{"command": "setsid sleep 1000 & nohup sleep 1000 & sleep 1000", "timeout": 2}, envelope.Timeout)
		t.Logf("timeout: %s", e.Message)
		if p := aliceProcs(t); len(p) > 0 {
			t.Fatalf("after the timeout alice still has processes: %v", p)
		}
		// Emptied call groups are kept for reuse (two at most); none may
		// hold a process.
		if busy := root(t, "for g in "+aliceGroup+"/call-*; do [ -e $g/cgroup.events ] && grep -q 'populated 1' $g/cgroup.events && echo $g; done; true"); busy != "" {
			t.Errorf("call groups that still hold processes after their calls: %s", busy)
		}
		if left := root(t, "ls "+aliceGroup+" | grep -c '^call-' || true"); left != "0" && left != "1" && left != "2" {
			t.Errorf("%s call groups left behind, want at most 2 spares", left)
		}
	})

	t.Run("only background processes survive, and sandbox_process reaches all of them", func(t *testing.T) {
		r := alice.ok(t, "sandbox_exec_background", map[string]any{"command": "setsid sleep 1000 & exec sleep 1002"})
		pid := num(r["pid"])
		if cg := root(t, fmt.Sprintf("cat /proc/%d/cgroup", pid)); !strings.HasPrefix(cg, "0::/osaurus/user-agent-alice/bg/") {
			t.Fatalf("background process in cgroup %q, want alice's background group", cg)
		}
		// A plain call does not survive next to it.
		alice.ok(t, "sandbox_exec", map[string]any{"command": "nohup sleep 1003 >/dev/null 2>&1 &"})
		if got := strings.Join(aliceProcs(t), " "); !strings.Contains(got, "sleep 1000") || !strings.Contains(got, "sleep 1002") || strings.Contains(got, "sleep 1003") {
			t.Fatalf("alice's processes: %s; want the background process and what it started, not the call's", got)
		}
		r = alice.ok(t, "sandbox_process", map[string]any{"action": "kill", "pid": pid})
		if r["running"] != false {
			t.Fatalf("kill: %v", r)
		}
		if p := aliceProcs(t); len(p) > 0 {
			t.Fatalf("after sandbox_process kill alice still has processes: %v", p)
		}
	})

	t.Run("fork bomb", func(t *testing.T) {
		type result struct {
			e   envelope.Envelope
			err error
		}
		done := make(chan result, 1)
		go func() {
			// Not alice.call: it may t.Fatal, which only the test's own
			// goroutine may do.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			res, err := alice.cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_exec",
				Arguments: map[string]any{"command": "f() { f | f & }; f; sleep 1000", "timeout": 40}})
			if err != nil {
				done <- result{err: err}
				return
			}
			e, err := envelope.Parse(res.Content[0].(*mcp.TextContent).Text)
			done <- result{e, err}
		}()
		// Bob's command runs once the bomb has hit alice's process limit.
		waitUntil(t, 3*time.Minute, "alice's fork bomb to reach her process limit", func() bool {
			out, _, _ := sh(t, g, "", "cat "+aliceGroup+"/pids.current")
			n, _ := strconv.Atoi(strings.TrimSpace(out))
			return n >= 60
		})
		bobAnswers(t, "the fork bomb")
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		e := res.e
		if e.OK || e.Kind != envelope.ExecutionError || !strings.Contains(e.Message, "process limit") || !strings.Contains(e.Message, "maxProcesses") {
			t.Fatalf("fork bomb ended with %+v, want an execution_error naming the process limit", e)
		}
		t.Logf("fork bomb: %s", firstLine(e.Message))
		if p := aliceProcs(t); len(p) > 0 {
			t.Fatalf("after the fork bomb alice still has processes: %v", p[:min(len(p), 10)])
		}
	})

	t.Run("allocation beyond memoryMB", func(t *testing.T) {
		// 400 MB in a shell variable, against alice's 160 MB.
		e := alice.fails(t, "sandbox_exec", map[string]any{
			"command": "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo survived ${#x}", "timeout": 300,
		}, envelope.ExecutionError)
		if !strings.Contains(e.Message, "out of memory") || !strings.Contains(e.Message, "memoryMB") {
			t.Fatalf("allocation ended with %q, want the memory limit named", e.Message)
		}
		t.Logf("allocation: %s", firstLine(e.Message))
		bobAnswers(t, "after alice's allocation")
		// Alice herself goes on working.
		if r := alice.ok(t, "sandbox_exec", map[string]any{"command": "echo still here"}); r["stdout"] != "still here\n" {
			t.Fatalf("alice after her allocation: %v", r)
		}
	})

	t.Run("a huge tail_lines on a large file", func(t *testing.T) {
		// 32 million one-byte lines: a tail that kept an offset per line
		// asked for would need 256 MB in the guest agent, which is PID 1
		// and outside every agent's memory limit.
		const lines = 32_000_000
		alice.ok(t, "sandbox_exec", map[string]any{
			"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' '\\n' > many-lines.txt", lines), "timeout": 300,
		})
		// clear_refs 5 resets PID 1's peak resident size, so the peak read
		// afterwards is this read's.
		hwm := func() int {
			t.Helper()
			out := root(t, "grep VmHWM /proc/1/status")
			f := strings.Fields(out)
			kb, err := strconv.Atoi(f[len(f)-2])
			if len(f) != 3 || err != nil {
				t.Fatalf("VmHWM line %q", out)
			}
			return kb
		}
		root(t, "echo 5 > /proc/1/clear_refs")
		before := hwm()
		r := alice.ok(t, "sandbox_read_file", map[string]any{"path": "many-lines.txt", "tail_lines": 1 << 53})
		grew := hwm() - before
		t.Logf("the guest agent's peak grew by %d KiB for a tail of %v lines of %v", grew, r["tail_lines"], r["total_lines"])
		if c := str(r["content"]); len(c) != tools.DefaultMaxChars || strings.Trim(c, "\n") != "" || r["truncated"] != true {
			t.Fatalf("huge tail: %d characters, truncated %v; want the file's last %d newlines, marked truncated", len(c), r["truncated"], tools.DefaultMaxChars)
		}
		// The scan holds one 64 KiB block and the answer; allow the Go
		// runtime's slack on top, far below 256 MB.
		if grew > 48<<10 {
			t.Errorf("the guest agent's peak resident size grew by %d KiB for one read: it allocates in proportion to tail_lines", grew)
		}
		bobAnswers(t, "after alice's huge tail")
	})

	t.Run("usage", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		u, err := g.Usage(ctx, agentproto.UsageRequest{Users: []string{"agent-alice", "agent-nobody"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(u.Users) != 1 || u.Users[0].User != "agent-alice" || u.Users[0].CPUMicros <= 0 || u.Users[0].OOMKills < 1 ||
			u.Users[0].Limits.MemoryMB != 160 {
			t.Fatalf("usage: %+v, want alice's CPU time, an OOM kill and her limits", u)
		}
	})

	t.Run("the VM never restarted", func(t *testing.T) {
		if got := root(t, "cat /proc/sys/kernel/random/boot_id"); got != bootID {
			t.Fatalf("boot id %s, was %s: the VM restarted", got, bootID)
		}
		bobAnswers(t, "the end")
	})
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// waitUntil checks cond, one guest round trip at a time, until it holds;
// it fails the test after limit.
func waitUntil(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, what, limit, 0, cond)
}

// BenchmarkResourceLimits measures what a fork bomb at its process limit
// costs another agent: bob's `echo` while alice's bomb runs, beside the
// same command's normal time in the same run (the tests only log these).
func BenchmarkResourceLimits(b *testing.B) {
	te := newToolsEnvCAs(b, false)
	g := te.m.Agent()
	te.addAgent(b, "Alice", autonomous(100, true))
	te.addAgent(b, "Bob", autonomous(100, false))
	if _, err := te.reg.Update("alice", func(a *agents.Agent) error {
		a.Resources = agents.Resources{MaxProcesses: 64, MemoryMB: 160, CPUWeight: 50}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	alice := te.http(b, "alice")
	bob := te.http(b, "bob")
	const aliceGroup = "/sys/fs/cgroup/osaurus/user-agent-alice"
	bobEcho := func() time.Duration {
		start := time.Now()
		if r := bob.ok(b, "sandbox_exec", map[string]any{"command": "echo alive", "timeout": 120}); r["stdout"] != "alive\n" {
			b.Fatalf("bob: %v", r)
		}
		return time.Since(start)
	}
	var normal, during time.Duration
	for range b.N {
		normal += bobEcho()
		done := make(chan struct{})
		go func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			alice.cs.CallTool(ctx, &mcp.CallToolParams{Name: "sandbox_exec",
				Arguments: map[string]any{"command": "f() { f | f & }; f; sleep 1000", "timeout": 40}})
		}()
		waitUntil(b, 3*time.Minute, "alice's fork bomb to reach her process limit", func() bool {
			out, _, _ := sh(b, g, "", "cat "+aliceGroup+"/pids.current")
			n, _ := strconv.Atoi(strings.TrimSpace(out))
			return n >= 60
		})
		during += bobEcho()
		<-done
	}
	b.ReportMetric(during.Seconds()/float64(b.N), "s-other-exec-during-bomb")
	b.ReportMetric(normal.Seconds()/float64(b.N), "s-other-exec-normal")
}
