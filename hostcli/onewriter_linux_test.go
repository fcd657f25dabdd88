package hostcli

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
)

// A client of the owner never holds its databases: while `events
// --follow` of the real binary follows the owner's log, none of its open
// files is events.db or memory.db, and an event the owner adds reaches it.
func TestEventsFollowHoldsNoDatabase(t *testing.T) {
	bin := realBinary(t)
	h, p := runningOwner(t)
	cl, err := client.Dial(context.Background(), p)
	if err != nil {
		t.Fatalf("the owner's control socket: %v", err)
	}
	cl.Close()
	// The check sees an opener: the owner (this process) holds events.db.
	if !holds(openFiles(t, os.Getpid()), p.EventsDB()) {
		t.Fatal("the owner's open files don't show events.db: the check below would see nothing")
	}
	f := newFollower(t, bin, p, "events", "--follow")
	ctx := context.Background()
	h.EmitEvent(ctx, control.EventEmit{Agent: "alice", Type: "first"})
	f.waitFor("first")
	open := openFiles(t, f.cmd.Process.Pid)
	for _, db := range []string{p.EventsDB(), p.MemoryDB()} {
		if holds(open, db) {
			t.Errorf("the CLI holds %s open: %q", db, open)
		}
	}
	h.EmitEvent(ctx, control.EventEmit{Agent: "alice", Type: "second"})
	f.waitFor("second")
}

// follower is a long-running command of the real binary whose output
// lines the test reads as they come.
type follower struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
}

func newFollower(t *testing.T, bin string, p config.Paths, args ...string) *follower {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+p.Root, "XDG_CACHE_HOME="+filepath.Join(p.Root, ".cache"), "DISPLAY=", "WAYLAND_DISPLAY=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &follower{t: t, cmd: cmd, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%v stderr: %s", args, errOut.String())
		}
	})
	return f
}

// waitFor reads lines until one contains s.
func (f *follower) waitFor(s string) {
	f.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-f.lines:
			if !ok {
				f.t.Fatalf("the command ended before printing %q", s)
			}
			if strings.Contains(l, s) {
				return
			}
		case <-deadline:
			f.t.Fatalf("no line with %q in 20s", s)
		}
	}
}

// holds reports whether one of the open files is db or its journal.
func holds(open []string, db string) bool {
	for _, n := range open {
		if strings.HasPrefix(n, db) {
			return true
		}
	}
	return false
}

// openFiles are the files process pid has open now.
func openFiles(t *testing.T, pid int) []string {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			names = append(names, l)
		}
	}
	if len(names) == 0 {
		t.Fatalf("read no open files of pid %d", pid)
	}
	return names
}
