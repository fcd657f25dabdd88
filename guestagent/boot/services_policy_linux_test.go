//go:build linux

package boot

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/osaurus/osaurus-sandbox/guestagent/exec"
)

// TestNoServiceStarts checks the boot step that stops package scripts
// from starting services: on Debian a policy-rc.d that forbids every
// action replaces whatever was there (a symlink included, never written
// through); elsewhere OpenRC's "booted" mark goes.
func TestNoServiceStarts(t *testing.T) {
	requireRoot(t)
	t.Run("debian", func(t *testing.T) {
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "etc"), 0o755)
		os.MkdirAll(filepath.Join(root, "usr/sbin"), 0o755)
		os.WriteFile(filepath.Join(root, "etc/debian_version"), []byte("12.0\n"), 0o644)
		victim := filepath.Join(root, "victim")
		os.WriteFile(victim, []byte("keep"), 0o644)
		if err := os.Symlink(victim, filepath.Join(root, policyRCD)); err != nil {
			t.Fatal(err)
		}
		if err := noServiceStarts(root); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "keep" {
			t.Fatalf("wrote through the symlink: %q", b)
		}
		p := filepath.Join(root, policyRCD)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
			t.Fatalf("policy-rc.d: %v %v", fi, err)
		}
		// Through a reaper, as the agent runs it (a reaper would take the
		// exit status from under exec.Cmd.Wait).
		testReaper, err := exec.NewReaper()
		if err != nil {
			t.Fatal(err)
		}
		defer testReaper.Close()
		_, ch, err := testReaper.Start(func() (int, error) {
			return syscall.ForkExec(p, []string{p, "cron", "start"}, &syscall.ProcAttr{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if ws := <-ch; !ws.Exited() || ws.ExitStatus() != 101 {
			t.Fatalf("policy-rc.d cron start: %v, want exit 101", ws)
		}
	})
	t.Run("openrc", func(t *testing.T) {
		root := t.TempDir()
		soft := filepath.Join(root, "run/openrc/softlevel")
		os.MkdirAll(filepath.Dir(soft), 0o755)
		os.WriteFile(soft, nil, 0o644)
		if err := noServiceStarts(root); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(soft); !os.IsNotExist(err) {
			t.Fatalf("softlevel still there: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, policyRCD)); !os.IsNotExist(err) {
			t.Fatalf("policy-rc.d written on a non-Debian system: %v", err)
		}
	})
}
