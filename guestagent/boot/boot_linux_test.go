//go:build linux

package boot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsureHostsEntry(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "hosts")
	if err := ensureHostsEntry(p, "sandbox"); err != nil {
		t.Fatal(err)
	}
	first := readString(t, p)
	if !strings.Contains(first, "127.0.0.1\tlocalhost\n") || !strings.HasSuffix(first, "127.0.1.1\tsandbox\n") {
		t.Fatalf("new hosts:\n%s", first)
	}
	if err := ensureHostsEntry(p, "sandbox"); err != nil || readString(t, p) != first {
		t.Fatalf("second call changed the file: %v\n%s", err, readString(t, p))
	}
	writeFile(t, p, "127.0.0.1 localhost\n# 1.2.3.4 sandbox\n10.0.0.1 other", 0o644)
	ensureHostsEntry(p, "sandbox")
	if got := readString(t, p); got != "127.0.0.1 localhost\n# 1.2.3.4 sandbox\n10.0.0.1 other\n127.0.1.1\tsandbox\n" {
		t.Fatalf("hosts:\n%s", got)
	}
}

func readString(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t testing.TB, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// requireRoot fails t when not run as root: the files boot writes are
// chowned to root, as they must be in the guest.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("run as root: this test writes files owned by root, which needs CAP_CHOWN (sudo go test); the package's other tests need no root")
	}
}
