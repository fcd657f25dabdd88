//go:build linux

package account

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/guestagent/osthread"
)

// In a namespace made like an agent's, readOnlyRoot leaves nothing of the
// root mount writable (a world-writable directory a package made there
// included, even to root), keeps the agent's area on that mount
// writable, does not make writable a link named as an area, and leaves
// the namespace it was made from as it was.
func TestReadOnlyRootKeepsAgentAreas(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes mount namespaces: run it as root (sudo go test -run TestReadOnlyRoot ./guestagent/account/)")
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	var (
		crash  = filepath.Join(root, "var", "crash")
		home   = filepath.Join(root, "home", "alice")
		ws     = filepath.Join(root, "workspace")
		wsHome = filepath.Join(ws, "agents", "alice")
		shared = filepath.Join(ws, "shared")
	)
	got, err := osthread.Throwaway(func() (map[string]error, error) {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return nil, err
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return nil, err
		}
		// A root disk of its own, with what packages and accounts put there.
		if err := unix.Mount("test-root", root, "tmpfs", 0, "size=4m"); err != nil {
			return nil, err
		}
		for _, d := range []string{crash, home, wsHome, shared} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
		if err := os.Chmod(crash, 0o1777); err != nil {
			return nil, err
		}
		if err := os.Symlink(crash, filepath.Join(root, "linked")); err != nil {
			return nil, err
		}
		// A home inside /workspace is named before /workspace, as the
		// agent's areas are.
		if err := readOnlyRoot(root, []string{wsHome, home, ws, filepath.Join(root, "linked"), filepath.Join(root, "missing"), ""}); err != nil {
			return nil, err
		}
		errs := map[string]error{}
		for _, p := range []string{filepath.Join(crash, "f"), filepath.Join(root, "f"), filepath.Join(root, "linked", "g"), filepath.Join(home, "f")} {
			errs[p] = os.WriteFile(p, []byte("x"), 0o600)
		}
		errs["mkdir"] = os.Mkdir(filepath.Join(crash, "d"), 0o755)
		// A file moves from a home inside /workspace to /workspace/shared
		// by rename, as sandbox_move does: one mount, not two.
		if err := os.WriteFile(filepath.Join(wsHome, "m"), []byte("x"), 0o600); err != nil {
			errs["write in the workspace home"] = err
		} else {
			errs["rename home to shared"] = os.Rename(filepath.Join(wsHome, "m"), filepath.Join(shared, "m"))
		}
		return errs, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, err := range got {
		want := unix.EROFS
		if p == filepath.Join(home, "f") || p == "rename home to shared" || p == "write in the workspace home" {
			if err != nil {
				t.Errorf("the agent's area %s: %v, want it writable", p, err)
			}
			continue
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want EROFS", p, err)
		}
	}
	if isMountPoint(root) {
		t.Error("the test root is mounted in the test's own namespace: the agent's namespace leaked into it")
	}
}
