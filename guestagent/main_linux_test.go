//go:build linux

package guestagent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"golang.org/x/sys/unix"
)

// testReaper is the one Reaper of the test process (see Reaper).
var testReaper *Reaper

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "guestagent tests must run as root (they switch credentials and chown); run: sudo go test ./guestagent")
		os.Exit(1)
	}
	// Orphaned grandchildren come back to us and get reaped, like in the
	// VM where the agent is PID 1.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
		os.Exit(1)
	}
	var err error
	if testReaper, err = NewReaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testReaper.Close()
	os.Exit(code)
}

// Test users. Their uids have no entry in the host's passwd; they exist
// only in the service's temp account files.
const (
	aliceUID = 2345
	bobUID   = 2346
)

type testEnv struct {
	svc  *Service
	base string // world-traversable temp dir
	db   account.UserDB
}

func (e *testEnv) home(user string) string { return filepath.Join(e.base, "home", user) }

// newTestEnv builds a Service whose account files live in a temp dir and
// know root, alice and bob (both members of group "devs").
func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
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
	e.svc, err = NewService(Config{
		AgentVersion: "test",
		Reaper:       testReaper,
		Users:        e.db,
		SystemRoot:   base,
	})
	if err != nil {
		t.Fatal(err)
	}
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

// execIO is an ExecIO for calling Service.Exec directly.
type execIO struct {
	mu      sync.Mutex
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	pid     int
	first   chan struct{} // closed at the first stdout write
	once    sync.Once
	signals chan int
	stdin   io.Reader
}

func newExecIO() *execIO {
	return &execIO{first: make(chan struct{}), signals: make(chan int, 4)}
}

type ioWriter struct {
	x   *execIO
	buf *bytes.Buffer
	out bool
}

func (w ioWriter) Write(b []byte) (int, error) {
	w.x.mu.Lock()
	defer w.x.mu.Unlock()
	if w.out {
		w.x.once.Do(func() { close(w.x.first) })
	}
	return w.buf.Write(b)
}

func (x *execIO) io() agentproto.ExecIO {
	return agentproto.ExecIO{
		Stdin:   x.stdin,
		Stdout:  ioWriter{x, &x.stdout, true},
		Stderr:  ioWriter{x, &x.stderr, false},
		Signals: x.signals,
		Started: func(pid int) error {
			x.mu.Lock()
			x.pid = pid
			x.mu.Unlock()
			return nil
		},
	}
}

func (x *execIO) out() (string, string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stdout.String(), x.stderr.String()
}

// run executes req and fails the test on a call error.
func (e *testEnv) run(t *testing.T, req agentproto.ExecRequest) (agentproto.ExitStatus, string, string) {
	t.Helper()
	x := newExecIO()
	st, err := e.svc.Exec(context.Background(), &req, x.io())
	if err != nil {
		t.Fatalf("exec %v%q: %v", req.Argv, req.Shell, err)
	}
	o, er := x.out()
	return st, o, er
}

// waitDead waits until pid is gone or a zombie; a bounded wait, not a
// timing assertion.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	if !testwait.Within(10*time.Second, 10*time.Millisecond, func() bool { return !alive(pid) }) {
		unix.Kill(pid, unix.SIGKILL)
		t.Fatalf("process %d still alive", pid)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
