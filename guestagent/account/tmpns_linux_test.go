//go:build linux

package account

import (
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// TestTmpSize checks how big an agent's temporary directories are: its
// disk quota, never more than half its memory (tmpfs pages are charged
// to it), never less than a floor.
func TestTmpSize(t *testing.T) {
	for _, c := range []struct {
		name string
		lim  *agentproto.Limits
		want int
	}{
		{"no limits from the host", nil, agentproto.DefaultMemoryMB / 2},
		{"disk quota below half the memory", &agentproto.Limits{MemoryMB: 1024, DiskMB: 100}, 100},
		{"disk quota above half the memory", &agentproto.Limits{MemoryMB: 1024, DiskMB: 10000}, 512},
		{"no disk quota sent", &agentproto.Limits{MemoryMB: 256}, 128},
		{"tiny quota", &agentproto.Limits{DiskMB: 1}, 1},
	} {
		if got := tmpSizeMB(c.lim); got != c.want {
			t.Errorf("%s: %d MB, want %d", c.name, got, c.want)
		}
	}
}
