//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// BenchmarkSoak makes many tool calls of every common kind (files,
// search, exec, a background process started, killed and waited for)
// through the real stdio MCP server, and checks that nothing grows with
// them: the guest agent's descriptors, threads, cgroups and mounts, the
// owner's goroutines and descriptors, the stdio server's descriptors.
// Memory growth is reported, not judged (a garbage-collected heap moves).
// Each iteration is one round of 11 calls; `-benchtime 910x` is 10,010
// calls.
func BenchmarkSoak(b *testing.B) {
	ba := newBenchAgent(b, "soak", true)
	calls := 0
	call := func(tool string, args map[string]any) map[string]any {
		calls++
		return ba.mcp.ok(b, tool, args)
	}
	round := func(i int) {
		f := fmt.Sprintf("soak/f-%d.txt", i%5)
		call("sandbox_write_file", map[string]any{"path": f, "content": fmt.Sprintf("line %d\nneedle\n", i)})
		call("sandbox_read_file", map[string]any{"path": f})
		call("sandbox_edit_file", map[string]any{"path": f, "old_string": fmt.Sprintf("line %d", i), "new_string": "edited"})
		call("sandbox_list_directory", map[string]any{"path": "soak"})
		call("sandbox_search_files", map[string]any{"pattern": "needle", "path": "soak"})
		call("sandbox_find_files", map[string]any{"pattern": "*.txt", "path": "soak"})
		call("sandbox_file_info", map[string]any{"path": f})
		call("sandbox_exec", map[string]any{"command": "echo $((6*7)) > /tmp/soak && cat /tmp/soak"})
		bg := call("sandbox_exec_background", map[string]any{"command": "sleep 60"})
		pid := bg["pid"] // a JSON number, passed back as it came
		if pid == nil {
			b.Fatalf("sandbox_exec_background gave no pid: %v", bg)
		}
		call("sandbox_process", map[string]any{"action": "kill", "pid": pid, "force": true})
		call("sandbox_process", map[string]any{"action": "wait", "pid": pid, "timeout": 30})
	}
	// Warm-up: the user, its namespaces, spare cgroups and the servers'
	// pools are made here, not counted as growth.
	for i := range 3 {
		round(i)
	}
	before := soakSnapshot(b, ba)
	calls = 0
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		round(i)
	}
	elapsed := time.Since(start)
	after := soakSnapshot(b, ba)

	b.ReportMetric(float64(elapsed.Milliseconds())/float64(calls), "ms/call")
	b.ReportMetric(float64(calls), "calls")
	for _, k := range soakKeys {
		b.ReportMetric(float64(after[k.name]-before[k.name]), k.name+"-growth")
	}
	b.Logf("%d calls in %v; before %v; after %v", calls, elapsed.Round(time.Millisecond), before, after)
	for _, k := range soakKeys {
		if k.slack >= 0 && after[k.name]-before[k.name] > k.slack {
			b.Errorf("%s grew from %d to %d over %d calls (%s): a leak", k.name, before[k.name], after[k.name], calls, k.what)
		}
	}
}

// soakKeys are what a soak watches; slack -1 is reported only.
var soakKeys = []struct {
	name  string
	slack int64
	what  string
}{
	{"guest-fds", 8, "the guest agent's open descriptors"},
	{"guest-threads", 8, "the guest agent's threads"},
	{"guest-cgroups", 2, "cgroups under the agents' subtree"},
	{"guest-mounts", 2, "mounts in the guest agent's namespace"},
	{"guest-tmp-areas", 0, "private temporary areas"},
	{"guest-rss-kib", -1, "the guest agent's resident memory"},
	{"owner-goroutines", 20, "goroutines of the owner (this process)"},
	{"owner-fds", 8, "the owner's open descriptors"},
	{"mcp-fds", 4, "the stdio server's open descriptors"},
	{"mcp-rss-kib", -1, "the stdio server's resident memory"},
}

// soakSnapshot counts what a leak would grow. Garbage is collected here
// first, so that finalizers close what only they would.
func soakSnapshot(b *testing.B, ba *benchAgent) map[string]int64 {
	runtime.GC()
	probe := `grep -E '^(VmRSS|Threads):' /proc/1/status | awk '{print $2}'
ls /proc/1/fd | wc -l
find /sys/fs/cgroup/osaurus -type d | wc -l
wc -l < /proc/1/mountinfo
ls /run/osaurus-tmp | wc -l`
	out, errOut, st, err := ba.m.Agent().Output(context.Background(), agentproto.ExecRequest{Shell: probe})
	if err != nil || st.Code != 0 {
		b.Fatalf("guest probe: %v %+v %s", err, st, errOut)
	}
	f := strings.Fields(string(out))
	if len(f) != 6 {
		b.Fatalf("guest probe printed %q", out)
	}
	n := make([]int64, len(f))
	for i, s := range f {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			b.Fatalf("guest probe printed %q", out)
		}
	}
	return map[string]int64{
		"guest-rss-kib": n[0], "guest-threads": n[1], "guest-fds": n[2], "guest-cgroups": n[3],
		"guest-mounts": n[4], "guest-tmp-areas": n[5],
		"owner-goroutines": int64(runtime.NumGoroutine()), "owner-fds": countFDs(b, "self"),
		"mcp-fds": countFDs(b, strconv.Itoa(ba.mcpPid)), "mcp-rss-kib": procRSS(ba.mcpPid),
	}
}

func countFDs(b *testing.B, pid string) int64 {
	ents, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		b.Fatal(err)
	}
	return int64(len(ents))
}
