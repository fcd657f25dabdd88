//go:build linux

// Package agenttest holds the guest agent packages' test fixtures: account
// files in a temp dir that know root, alice and bob, and helpers to make
// files owned by them and to wait for processes. Only tests import it.
package agenttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"golang.org/x/sys/unix"
)

// Test users. Their uids have no entry in the host's passwd; they exist
// only in the temp account files.
const (
	AliceUID = 2345
	BobUID   = 2346
)

// Accounts is a temp dir with account files (etc/) and homes (home/).
type Accounts struct {
	Base string // world-traversable temp dir
	DB   account.UserDB
}

// Home is user's home directory.
func (a *Accounts) Home(user string) string { return filepath.Join(a.Base, "home", user) }

// NewAccounts makes account files that know root, alice and bob (both
// members of group "devs") and their homes. It needs root (it chowns);
// pkg names the package for the hint.
func NewAccounts(t testing.TB, pkg string) *Accounts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test must run as root (it switches credentials and chowns); run: sudo go test ./guestagent/%s", pkg)
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
	MustMkdir(t, etc, 0o755, 0)
	MustMkdir(t, filepath.Join(base, "home"), 0o755, 0)
	e := &Accounts{Base: base, DB: account.UserDB{
		Passwd:  filepath.Join(etc, "passwd"),
		Group:   filepath.Join(etc, "group"),
		Shadow:  filepath.Join(etc, "shadow"),
		GShadow: filepath.Join(etc, "gshadow"),
	}}
	WriteFile(t, e.DB.Passwd, fmt.Sprintf(`root:x:0:0:root:/root:/bin/sh
# a comment that must survive edits
alice:x:%d:%d::%s:/bin/sh
bob:x:%d:%d::%s:/bin/sh
`, AliceUID, AliceUID, e.Home("alice"), BobUID, BobUID, e.Home("bob")), 0o644)
	WriteFile(t, e.DB.Group, fmt.Sprintf("root:x:0:\nalice:x:%d:\nbob:x:%d:\ndevs:x:3000:alice,bob\n", AliceUID, BobUID), 0o644)
	WriteFile(t, e.DB.Shadow, "root:*:19000:0:99999:7:::\nalice:!:19000:0:99999:7:::\nbob:!:19000:0:99999:7:::\n", 0o640)
	WriteFile(t, e.DB.GShadow, "root:*::\nalice:!::\nbob:!::\ndevs:!::alice,bob\n", 0o640)
	MustMkdir(t, e.Home("alice"), 0o700, AliceUID)
	MustMkdir(t, e.Home("bob"), 0o700, BobUID)
	return e
}

// MustMkdir makes dir (and its parents) owned by uid with mode.
func MustMkdir(t testing.TB, dir string, mode os.FileMode, uid int) {
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

// WriteFile writes data to path with mode.
func WriteFile(t testing.TB, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// OwnerOf is the uid owning path (not following a symlink).
func OwnerOf(t testing.TB, path string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid)
}

// WaitDead waits until pid is gone or a zombie; a bounded wait, not a
// timing assertion.
func WaitDead(t *testing.T, pid int) {
	t.Helper()
	if testwait.Within(10*time.Second, 10*time.Millisecond, func() bool { return !Alive(pid) }) {
		return
	}
	unix.Kill(pid, unix.SIGKILL)
	t.Fatalf("process %d still alive", pid)
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
