//go:build linux

package exec

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/internal/agenttest"
	"golang.org/x/sys/unix"
)

// testReaper is the one Reaper of the test process (see Reaper). Neither
// it nor the subreaper needs root; the tests that start processes as the
// test users do (newTestEnv says so).
var testReaper *Reaper

func TestMain(m *testing.M) {
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

const (
	aliceUID = agenttest.AliceUID
	bobUID   = agenttest.BobUID
)

var (
	mustMkdir = agenttest.MustMkdir
	writeFile = agenttest.WriteFile
	ownerOf   = agenttest.OwnerOf
	waitDead  = agenttest.WaitDead
	alive     = agenttest.Alive
)

type testEnv struct {
	svc  *Processes
	base string // world-traversable temp dir
	db   account.UserDB
}

func (e *testEnv) home(user string) string { return (&agenttest.Accounts{Base: e.base}).Home(user) }

// newTestEnv builds Processes whose account files live in a temp dir and
// know root, alice and bob. It needs root.
func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	acc := agenttest.NewAccounts(t, "exec")
	svc, err := New(Config{Reaper: testReaper, Users: acc.DB, SystemRoot: acc.Base})
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{svc: svc, base: acc.Base, db: acc.DB}
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
