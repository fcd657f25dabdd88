//go:build linux

package account

import (
	"os"
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
		want int64
	}{
		{"no limits from the host", nil, agentproto.DefaultMemoryMB << 20 / 2},
		// Decimal MB, as diskGB is: the host adds the area to the home
		// in bytes.
		{"disk quota below half the memory", &agentproto.Limits{MemoryMB: 1024, DiskMB: 100}, 100e6},
		{"disk quota above half the memory", &agentproto.Limits{MemoryMB: 1024, DiskMB: 10000}, 512 << 20},
		{"no disk quota sent", &agentproto.Limits{MemoryMB: 256}, 128 << 20},
		{"tiny quota", &agentproto.Limits{DiskMB: 1}, 1 << 20},
	} {
		if got := tmpSize(c.lim); got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.want)
		}
	}
}

// TestTmpCap checks the host's cap: it lowers the area's size, never
// under the floor, and no cap leaves the full size.
func TestTmpCap(t *testing.T) {
	page := int64(os.Getpagesize())
	for _, c := range []struct {
		name            string
		full, cap, want int64
	}{
		{"no cap", 50 << 20, 0, 50 << 20},
		{"cap under the quota (the home holds the rest)", 50 << 20, 10 << 20, 10 << 20},
		{"cap over the size", 50 << 20, 80 << 20, 50 << 20},
		{"cap under the floor", 50 << 20, 1, 1 << 20},
		// The kernel rounds a size up to pages: rounded down here, the
		// area never passes what the quota leaves.
		{"a size in no whole pages", 50e6, 0, 50e6 / page * page},
		{"a cap in no whole pages", 50e6, 10e6 + 1, 10e6 / page * page},
	} {
		if got := capped(c.full, c.cap); got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.want)
		}
	}
}
