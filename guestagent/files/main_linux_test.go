//go:build linux

package files

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"golang.org/x/sys/unix"
)

// Test users. Their uids have no entry in the host's passwd; they exist
// only in the service's temp account files.
const (
	aliceUID = 2345
	bobUID   = 2346
)

type testEnv struct {
	svc  *Ops
	base string // world-traversable temp dir
	db   account.UserDB
}

func (e *testEnv) home(user string) string { return filepath.Join(e.base, "home", user) }

// newTestEnv builds a Service whose account files live in a temp dir and
// know root, alice and bob (both members of group "devs").
func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("file operation tests must run as root (they switch credentials and chown); run: sudo go test ./guestagent/files")
	}
	// t.TempDir is 0700: the test users could not enter it.
	base, err := os.MkdirTemp("", "guestagent-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(base, "etc")
	mustMkdir(t, etc, 0o755, 0)
	mustMkdir(t, filepath.Join(base, "home"), 0o755, 0)
	e := &testEnv{base: base, db: account.UserDB{
		Passwd:  filepath.Join(etc, "passwd"),
		Group:   filepath.Join(etc, "group"),
		Shadow:  filepath.Join(etc, "shadow"),
		GShadow: filepath.Join(etc, "gshadow"),
	}}
	writeFile(t, e.db.Passwd, fmt.Sprintf(`root:x:0:0:root:/root:/bin/sh
# a comment that must survive edits
alice:x:%d:%d::%s:/bin/sh
bob:x:%d:%d::%s:/bin/sh
`, aliceUID, aliceUID, e.home("alice"), bobUID, bobUID, e.home("bob")), 0o644)
	writeFile(t, e.db.Group, fmt.Sprintf("root:x:0:\nalice:x:%d:\nbob:x:%d:\ndevs:x:3000:alice,bob\n", aliceUID, bobUID), 0o644)
	writeFile(t, e.db.Shadow, "root:*:19000:0:99999:7:::\nalice:!:19000:0:99999:7:::\nbob:!:19000:0:99999:7:::\n", 0o640)
	writeFile(t, e.db.GShadow, "root:*::\nalice:!::\nbob:!::\ndevs:!::alice,bob\n", 0o640)
	mustMkdir(t, e.home("alice"), 0o700, aliceUID)
	mustMkdir(t, e.home("bob"), 0o700, bobUID)
	e.svc = New(Config{Users: e.db})
	return e
}

func mustMkdir(t testing.TB, dir string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func ownerOf(t testing.TB, path string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid)
}
