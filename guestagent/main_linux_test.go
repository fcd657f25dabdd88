//go:build linux

package guestagent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/exec"
	"github.com/osaurus/osaurus-sandbox/guestagent/internal/agenttest"
	"golang.org/x/sys/unix"
)

// testReaper is the one Reaper of the test process (see exec.Reaper).
var testReaper *exec.Reaper

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "guestagent tests must run as root (they add users, switch credentials and chown); run: sudo go test ./guestagent")
		os.Exit(1)
	}
	// Orphaned grandchildren come back to us and get reaped, like in the
	// VM where the agent is PID 1.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
		os.Exit(1)
	}
	var err error
	if testReaper, err = exec.NewReaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testReaper.Close()
	os.Exit(code)
}

// bg is the context of calls that need no other.
var bg = context.Background()

const (
	aliceUID = agenttest.AliceUID
	bobUID   = agenttest.BobUID
)

var (
	mustMkdir = agenttest.MustMkdir
	writeFile = agenttest.WriteFile
	ownerOf   = agenttest.OwnerOf
	waitDead  = agenttest.WaitDead
)

type testEnv struct {
	svc  *Service
	base string // world-traversable temp dir
	db   account.UserDB
}

func (e *testEnv) home(user string) string { return (&agenttest.Accounts{Base: e.base}).Home(user) }

// newTestEnv builds a Service whose account files live in a temp dir and
// know root, alice and bob (both members of group "devs").
func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	acc := agenttest.NewAccounts(t, "")
	svc, err := NewService(Config{
		AgentVersion: "test",
		Reaper:       testReaper,
		Users:        acc.DB,
		SystemRoot:   acc.Base,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{svc: svc, base: acc.Base, db: acc.DB}
}

// run executes req through the service (so the user's limits apply) and
// fails the test on a call error.
func (e *testEnv) run(t *testing.T, req agentproto.ExecRequest) (agentproto.ExitStatus, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer // each written by one goroutine, read after Exec
	st, err := e.svc.Exec(context.Background(), &req, agentproto.ExecIO{
		Stdout:  &stdout,
		Stderr:  &stderr,
		Started: func(int) error { return nil },
	})
	if err != nil {
		t.Fatalf("exec %v%q: %v", req.Argv, req.Shell, err)
	}
	return st, stdout.String(), stderr.String()
}
