//go:build linux

package e2e

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// TestDiskQuotaHomeAndTmp attacks the one bound an agent's disk use has:
// its home (on the host) and its private temporary files (a tmpfs in the
// guest) together stay within its diskGB. Filling /tmp and then writing
// to the home gets the agent blocked with the quota error; filling the
// home and then /tmp stops the /tmp write at what the quota leaves.
func TestDiskQuotaHomeAndTmp(t *testing.T) {
	const quota = 50e6
	e := startIsoEnv(t)
	e.ok("agent", "add", "alice")
	e.ok("agent", "set", "alice", "diskGB", "0.05")
	alice := e.session(t, "alice")
	home := filepath.Join(e.p.AgentHomes(), "alice")
	report := func() diskquota.Report {
		r, err := diskquota.ReadReport(e.p.DiskUsageFile())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// fillTmp writes three times the quota to /tmp and returns what
	// landed there (the whole tmpfs, as the agent's df sees it).
	fillTmp := func(t *testing.T) int64 {
		t.Helper()
		r := execOut(t, alice, "dd if=/dev/zero of=/tmp/fill bs=1M count=150 2>&1; echo rc=$?; df -B1 --output=used /tmp | tail -n 1")
		out := str(r["stdout"])
		if strings.Contains(out, "rc=0") || !strings.Contains(out, "No space left on device") {
			t.Fatalf("150 MB to /tmp with a 50 MB quota did not stop with ENOSPC: %v", r)
		}
		m := regexp.MustCompile(`(?m)^\s*(\d+)\s*$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no df figure: %v", r)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}

	t.Run("tmp then home", func(t *testing.T) {
		// The monitor caps a new agent's /tmp in its first round after
		// the agent was added (until then its /tmp is its whole quota, and
		// an overshoot is caught by the block, as in TestDiskQuota); this
		// subtest is about the cap, which leaves the home at least
		// TmpHeadroom.
		pollTools(t, "alice's /tmp capped below her quota", func() bool {
			r := execOut(t, alice, "df -B1 --output=size /tmp | tail -n 1")
			n, err := strconv.ParseInt(strings.TrimSpace(str(r["stdout"])), 10, 64)
			return err == nil && n <= quota-diskquota.TmpHeadroom
		})
		tmp := fillTmp(t)
		// The round that counts /tmp decides on a block too.
		pollTools(t, "the usage counts /tmp", func() bool { return report().Tmp["alice"] >= tmp-1e6 })
		if b := report().Blocked["alice"]; b != "" {
			t.Fatalf("alice is blocked with /tmp full and her home as it was: /tmp took more than her home left: %s", b)
		}
		// The write may end early: the block kills it.
		alice.call(t, "sandbox_exec", map[string]any{"command": "head -c 3000000 /dev/zero > ~/after-tmp"})
		pollTools(t, "alice blocked for /tmp plus her home", func() bool { return report().Blocked["alice"] != "" })
		w := alice.fails(t, "sandbox_write_file", map[string]any{"path": "more.txt", "content": "x"}, envelope.Rejected)
		if !strings.Contains(w.Message, "disk quota exceeded") || !strings.Contains(w.Message, "temporary files") {
			t.Errorf("the refusal does not name the quota and the temporary files: %s", w.Message)
		}
		files := homeBytes(t, home)
		t.Logf("/tmp %d + home %d = %d bytes, quota %d", tmp, files, tmp+files, int64(quota))
		// The 3 MB written after /tmp was full, and the tmpfs's page
		// rounding.
		if tmp+files > quota+4e6 {
			t.Errorf("alice holds %d bytes in /tmp and her home, over her %d-byte quota by more than the last write", tmp+files, int64(quota))
		}
		// Deleting the home file brings her back under (/tmp took only
		// what her home left).
		alice.ok(t, "sandbox_delete", map[string]any{"path": "after-tmp"})
		pollTools(t, "alice unblocked", func() bool { return report().Blocked["alice"] == "" })
		execOut(t, alice, "rm -f /tmp/fill")
	})

	t.Run("home then tmp", func(t *testing.T) {
		execOut(t, alice, "head -c 40000000 /dev/zero > ~/big")
		// The round that reports the home has capped /tmp already.
		pollTools(t, "the monitor sees alice's home", func() bool { return report().Agents["alice"] >= 40e6 })
		tmp := fillTmp(t)
		files := homeBytes(t, home)
		t.Logf("home %d + /tmp %d = %d bytes, quota %d", files, tmp, tmp+files, int64(quota))
		if tmp+files > quota+1e6 {
			t.Errorf("alice holds %d bytes in her home and /tmp, over her %d-byte quota", tmp+files, int64(quota))
		}
		// `agent list` counts both.
		pollTools(t, "the usage counts /tmp", func() bool {
			r := report()
			return r.Tmp["alice"] >= tmp-1e6 && r.Agents["alice"] >= files+tmp-2e6
		})
		execOut(t, alice, "rm -f /tmp/fill ~/big")
	})

	t.Run("first command after a restart", func(t *testing.T) {
		// A restarted VM forgot the caps; the owner gives them to the new
		// session before any tool can use it, so alice's very first
		// command already finds /tmp capped at what her home leaves.
		execOut(t, alice, "head -c 40000000 /dev/zero > ~/big")
		pollTools(t, "the monitor sees alice's home", func() bool { return report().Agents["alice"] >= 40e6 })
		e.ok("stop")
		// The call starts the VM (and an owner) itself, and runs the
		// moment the VM is up: no monitor round can come in between.
		r := execOut(t, alice, "df -B1 --output=size /tmp | tail -n 1")
		size, err := strconv.ParseInt(strings.TrimSpace(str(r["stdout"])), 10, 64)
		if err != nil {
			t.Fatalf("df: %v", r)
		}
		if left := int64(quota) - homeBytes(t, home); size > left {
			t.Errorf("alice's /tmp is %d bytes at her first command after the restart, over the %d her 40 MB home leaves of her quota", size, left)
		}
		execOut(t, alice, "rm -f ~/big")
	})
}

// homeBytes is what the files under dir take on the host.
func homeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
