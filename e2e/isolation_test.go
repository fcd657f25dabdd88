//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// isoEnv is a data dir with a running VM owned by the real binary's
// background owner, whose disk monitor is under test.
type isoEnv struct {
	cliRun
	p config.Paths
}

func startIsoEnv(t testing.TB) isoEnv {
	t.Helper()
	requireGuest(t)
	srv := newSwitchableServer(t)
	p := copyContainer(t)
	e := isoEnv{cliRun: cliRun{t: t, bin: buildCLI(t), home: p.Root}, p: p}
	t.Cleanup(func() { e.run("stop") })
	e.ok("config", "set", "imageManifest", srv.URL+"/manifest.json")
	e.ok("config", "set", "memoryGB", "1")
	e.ok("start")
	return e
}

// agentSession adds (or reuses) an agent with autonomous exec on and
// connects its stdio MCP server.
func (e isoEnv) session(t testing.TB, slug string) *session {
	t.Helper()
	e.ok("agent", "set", slug, "enabled", "true")
	cmd := exec.Command(e.bin, "mcp", "--agent", slug)
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+e.home)
	cmd.Stderr = testLog{t, "stdio " + slug + ": "}
	return newSession(t, "stdio "+slug, &mcp.CommandTransport{Command: cmd})
}

func execOut(t testing.TB, s *session, command string) map[string]any {
	t.Helper()
	return s.ok(t, "sandbox_exec", map[string]any{"command": command})
}

func uidOf(t *testing.T, s *session) int {
	t.Helper()
	r := execOut(t, s, "id -u")
	n, err := strconv.Atoi(strings.TrimSpace(str(r["stdout"])))
	if err != nil {
		t.Fatalf("id -u: %v", r)
	}
	return n
}

type agentJSON struct {
	Slug      string `json:"slug"`
	UID       int    `json:"uid"`
	DiskUsed  int64  `json:"diskUsedBytes"`
	DiskQuota int64  `json:"diskQuotaBytes"`
}

func (e isoEnv) show(t testing.TB, slug string) agentJSON {
	t.Helper()
	var a agentJSON
	if err := json.Unmarshal([]byte(e.ok("agent", "show", slug, "--json")), &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// fillToQuota runs a loop that writes until s's agent is over its quota
// and returns how the call ended and how long it ran.
func fillToQuota(t testing.TB, s *session) (envelope.Envelope, time.Duration) {
	t.Helper()
	start := time.Now()
	fill := s.call(t, "sandbox_exec", map[string]any{
		"command": "mkdir -p fill; i=0; while :; do head -c 4000000 /dev/zero > fill/f$i || exit 9; i=$((i+1)); done",
		"timeout": 300})
	return fill, time.Since(start)
}

// BenchmarkDiskQuota measures the disk quota's reaction: how long a
// write loop runs before the quota stops it (the test bound it once was:
// 2 minutes), and another agent's command while the first is blocked,
// beside the same command's normal time in the same run.
func BenchmarkDiskQuota(b *testing.B) {
	e := startIsoEnv(b)
	e.ok("agent", "add", "alice")
	e.ok("agent", "add", "bob")
	e.ok("agent", "set", "alice", "diskGB", "0.05")
	alice := e.session(b, "alice")
	bob := e.session(b, "bob")
	timed := func(f func()) time.Duration { start := time.Now(); f(); return time.Since(start) }
	var normal, fill, blocked time.Duration
	b.ResetTimer()
	for range b.N {
		normal += timed(func() { execOut(b, bob, "echo fine > ok.txt && cat ok.txt") })
		env, took := fillToQuota(b, alice)
		if env.OK {
			b.Fatalf("the filling loop ended with %+v", env)
		}
		fill += took
		blocked += timed(func() { execOut(b, bob, "echo fine > ok.txt && cat ok.txt") })
		alice.ok(b, "sandbox_delete", map[string]any{"path": "fill", "recursive": true})
		pollTools(b, "alice unblocked after deleting", func() bool {
			return alice.call(b, "sandbox_write_file", map[string]any{"path": "after.txt", "content": "x"}).OK
		})
	}
	n := float64(b.N)
	b.ReportMetric(fill.Seconds()/n, "s-to-stop-fill")
	b.ReportMetric(120, "bound-s")
	b.ReportMetric(blocked.Seconds()/n, "s-other-exec-blocked")
	b.ReportMetric(normal.Seconds()/n, "s-other-exec-normal")
}

// TestIdentities attacks uid reuse: a new agent must never get a removed
// agent's uid (and with it the kept home's files), a left-over home is
// never inherited silently, and uids survive a reset of the VM.
func TestIdentities(t *testing.T) {
	e := startIsoEnv(t)
	e.ok("agent", "add", "alice")
	alice := e.session(t, "alice")
	alice.ok(t, "sandbox_write_file", map[string]any{"path": "secret.txt", "content": "alice's secret"})
	aliceUID := uidOf(t, alice)
	if got := e.show(t, "alice").UID; got != aliceUID {
		t.Fatalf("registry uid %d, guest uid %d", got, aliceUID)
	}
	alice.cs.Close()
	if out := e.ok("agent", "remove", "alice"); !strings.Contains(out, "kept its home") {
		t.Fatalf("remove: %s", out)
	}

	// The same name again: the left-over home is not taken silently.
	_, errOut, code := e.run("agent", "add", "alice")
	if code == 0 || !strings.Contains(errOut, "--adopt-home") || !strings.Contains(errOut, "--purge-home") {
		t.Fatalf("add over a kept home: exit %d, %q", code, errOut)
	}

	e.ok("agent", "add", "bob")
	bob := e.session(t, "bob")
	bobUID := uidOf(t, bob)
	if bobUID == aliceUID {
		t.Fatalf("bob got removed alice's uid %d", bobUID)
	}
	steal := bob.ok(t, "sandbox_exec", map[string]any{"command": "cat /workspace/agents/alice/secret.txt; stat -c %u /workspace/agents/alice"})
	if strings.Contains(str(steal["stdout"]), "alice's secret") {
		t.Fatalf("bob read alice's kept file: %v", steal)
	}
	if !strings.Contains(str(steal["stderr"]), "Permission denied") {
		t.Fatalf("bob's read did not fail with permission denied: %v", steal)
	}

	// Adopting gives the files back, under the old uid.
	e.ok("agent", "add", "alice", "--adopt-home")
	alice = e.session(t, "alice")
	if got := uidOf(t, alice); got != aliceUID {
		t.Fatalf("adopting alice: uid %d, want %d", got, aliceUID)
	}
	if r := alice.ok(t, "sandbox_read_file", map[string]any{"path": "secret.txt"}); !strings.Contains(str(r["content"]), "alice's secret") {
		t.Fatalf("alice lost her file: %v", r)
	}
	alice.cs.Close()
	bob.cs.Close()

	// A reset recreates /etc/passwd; the uids come from the registry.
	e.ok("reset", "--yes")
	e.ok("start")
	bob = e.session(t, "bob")
	alice = e.session(t, "alice")
	if got := uidOf(t, bob); got != bobUID {
		t.Fatalf("bob's uid after reset %d, want %d", got, bobUID)
	}
	if got := uidOf(t, alice); got != aliceUID {
		t.Fatalf("alice's uid after reset %d, want %d", got, aliceUID)
	}
	steal = bob.ok(t, "sandbox_exec", map[string]any{"command": "cat /workspace/agents/alice/secret.txt"})
	if strings.Contains(str(steal["stdout"]), "alice's secret") || num(steal["exit_code"]) == 0 {
		t.Fatalf("after reset bob reads alice's file: %v", steal)
	}
	if r := alice.ok(t, "sandbox_read_file", map[string]any{"path": "secret.txt"}); !strings.Contains(str(r["content"]), "alice's secret") {
		t.Fatalf("alice can't read her file after reset: %v", r)
	}
}

// TestDiskQuota attacks the disk: an agent filling its home in a loop is
// stopped within seconds of passing its quota, with a message naming the
// quota and the fix, and can't write or run anything until it is under
// again; another agent goes on working; the host free-space floor stops
// everyone.
func TestDiskQuota(t *testing.T) {
	e := startIsoEnv(t)
	e.ok("agent", "add", "alice")
	e.ok("agent", "add", "bob")
	if _, errOut, code := e.run("agent", "set", "alice", "diskGB", "0.001"); code == 0 || !strings.Contains(errOut, "diskGB") {
		t.Fatalf("diskGB 0.001: exit %d %q", code, errOut)
	}
	e.ok("agent", "set", "alice", "diskGB", "0.05") // 50 MB
	alice := e.session(t, "alice")
	bob := e.session(t, "bob")
	// The loop is stopped by the quota, not by its own timeout (300 s),
	// which would end it with a different envelope. How soon is
	// BenchmarkDiskQuota's figure.
	fill, took := fillToQuota(t, alice)
	if fill.OK || fill.Kind != envelope.Rejected || !strings.Contains(fill.Message, "disk quota exceeded") || !strings.Contains(fill.Message, "diskGB") {
		t.Fatalf("the filling loop ended with %+v, want a rejected envelope naming the quota", fill)
	}
	used := e.show(t, "alice").DiskUsed
	t.Logf("filling loop stopped after %v with %d bytes used (quota 50000000, overshoot %d)", took.Round(time.Millisecond), used, used-50e6)
	// Detection takes one or two monitor rounds; 400 MB is far more than
	// this VM writes to the share in that time.
	if used > 50e6+400e6 {
		t.Errorf("alice reached %d bytes, %d over her quota", used, used-50e6)
	}

	// Blocked: no writes, no commands; the message says what to do.
	w := alice.fails(t, "sandbox_write_file", map[string]any{"path": "more.txt", "content": "x"}, envelope.Rejected)
	if !strings.Contains(w.Message, "agent set alice diskGB") {
		t.Fatalf("write refusal does not name the fix: %s", w.Message)
	}
	alice.fails(t, "sandbox_exec", map[string]any{"command": "true"}, envelope.Rejected)

	// Bob is unaffected: his command runs and writes. (How long it takes
	// beside his normal time is BenchmarkDiskQuota's figure.)
	if r := execOut(t, bob, "echo fine > ok.txt && cat ok.txt"); r["stdout"] != "fine\n" {
		t.Errorf("bob's exec during alice's block: %v", r)
	}

	// Deleting files (still allowed) brings alice back under; she works
	// again within seconds.
	alice.ok(t, "sandbox_delete", map[string]any{"path": "fill", "recursive": true})
	// Polled with writes, not commands: every command attempt, refused
	// or not, counts against maxCommandsPerTurn.
	pollTools(t, "alice unblocked after deleting", func() bool {
		return alice.call(t, "sandbox_write_file", map[string]any{"path": "after.txt", "content": "x"}).OK
	})
	execOut(t, alice, "true")
	// She is unblocked as soon as the owner has counted enough of the
	// deletions to put her under; the rest follow within a round or two.
	pollTools(t, "alice's usage back under 1 MB after deleting", func() bool {
		return e.show(t, "alice").DiskUsed <= 1e6
	})
	var list []agentJSON
	if err := json.Unmarshal([]byte(e.ok("agent", "list", "--json")), &list); err != nil || len(list) != 2 || list[1].DiskUsed <= 0 || list[1].DiskQuota != 10e9 {
		t.Fatalf("agent list --json: %+v %v", list, err)
	}

	// The host free-space floor: above the free space, every agent stops.
	e.ok("config", "set", "hostFreeFloorGB", "100000")
	var refused envelope.Envelope
	pollTools(t, "bob blocked by the floor", func() bool {
		refused = bob.call(t, "sandbox_write_file", map[string]any{"path": "floor.txt", "content": "x"})
		return !refused.OK
	})
	if refused.Kind != envelope.Rejected || !strings.Contains(refused.Message, "hostFreeFloorGB") {
		t.Fatalf("floor refusal: %+v", refused)
	}
	if r := bob.fails(t, "sandbox_exec", map[string]any{"command": "true"}, envelope.Rejected); !strings.Contains(r.Message, "hostFreeFloorGB") {
		t.Fatalf("floor refusal of a command: %+v", r)
	}
	e.ok("config", "set", "hostFreeFloorGB", "2")
	pollTools(t, "bob unblocked", func() bool {
		return bob.call(t, "sandbox_write_file", map[string]any{"path": "floor.txt", "content": "x"}).OK
	})
	execOut(t, bob, "true")
}

// pollTools polls cond (each poll is a real tool call, so they are spaced
// to stay inside the agent's rate window) for up to 30 seconds.
func pollTools(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, what, 30*time.Second, 500*time.Millisecond, cond)
}
