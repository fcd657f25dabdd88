package diskquota

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
)

// Round blocks the agent over its quota, and every agent under the floor,
// with messages naming the limit and the fix; the usage file is written.
func TestMonitorRound(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	reg, err := agents.Open(filepath.Join(dir, "agents.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"alice", "bob"} {
		if _, err := reg.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Update("alice", func(a *agents.Agent) error { a.DiskGB = 0.01; return nil }); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "agents", "alice", "big"), 12e6)
	write(t, filepath.Join(ws, "agents", "bob", "small"), 1e6)
	free := int64(100e9)
	tr := NewTracker(filepath.Join(ws, "agents"), ws)
	defer tr.Close()
	m := &Monitor{Tracker: tr, Registry: reg, UsageFile: filepath.Join(dir, "usage.json"),
		Free: func() (int64, error) { return free, nil }, Floor: func() int64 { return 2e9 }}

	r := m.Round(context.Background())
	if len(r.Blocked) != 1 || !strings.Contains(r.Blocked["alice"], "diskGB 0.01") || !strings.Contains(r.Blocked["alice"], "agent set alice diskGB") {
		t.Fatalf("blocked = %v", r.Blocked)
	}
	if r.Agents["alice"] < 12e6 || r.Agents["bob"] < 1e6 || r.Agents["bob"] > 2e6 {
		t.Fatalf("usage = %v", r.Agents)
	}
	if got, err := ReadReport(m.UsageFile); err != nil || got.Agents["alice"] != r.Agents["alice"] {
		t.Fatalf("usage file: %+v %v", got, err)
	}

	free = 1e9
	r = m.Round(context.Background())
	if len(r.Blocked) != 2 || !strings.Contains(r.Blocked["bob"], "hostFreeFloorGB") {
		t.Fatalf("under the floor: blocked = %v", r.Blocked)
	}
}
