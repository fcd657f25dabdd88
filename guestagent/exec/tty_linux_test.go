//go:build linux

package exec

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// ttyCall runs req on a terminal in the background; keys go to stdin.
type ttyCall struct {
	x      *execIO
	keys   *io.PipeWriter
	resize chan agentproto.Winsize
	done   chan agentproto.ExitStatus
}

func startTTY(t *testing.T, e *testEnv, req agentproto.ExecRequest) *ttyCall {
	t.Helper()
	r, w := io.Pipe()
	c := &ttyCall{x: newExecIO(), keys: w, resize: make(chan agentproto.Winsize, 1), done: make(chan agentproto.ExitStatus, 1)}
	c.x.stdin = r
	eio := c.x.io()
	eio.Resize = c.resize
	go func() {
		st, err := e.svc.Exec(context.Background(), &req, eio)
		if err != nil {
			t.Error(err)
		}
		w.Close()
		c.done <- st
	}()
	t.Cleanup(func() { w.Close() })
	return c
}

// waitOut polls the terminal's output for want.
func (c *ttyCall) waitOut(t *testing.T, want string, poke func()) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := c.x.out()
		if strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the terminal's output: %q", want, out)
		}
		if poke != nil {
			poke()
		}
		time.Sleep(50 * time.Millisecond) // polling the output
	}
}

// A process on a terminal has it as its controlling terminal, sees the
// size the caller gives and its changes, and its exit code is the
// call's; what its session still runs ends with it.
func TestExecTTYSizeExitAndCleanup(t *testing.T) {
	e := newTestEnv(t)
	c := startTTY(t, e, agentproto.ExecRequest{
		Identity: agentproto.Identity{User: "alice"},
		Tty:      &agentproto.Winsize{Rows: 30, Cols: 100},
		Shell:    `tty; while read x; do stty size; [ "$x" = q ] && break; done; sleep 100 & echo bg=$!; exit 7`,
	})
	c.waitOut(t, "/dev/pts/", nil)
	io.WriteString(c.keys, "\n")
	c.waitOut(t, "30 100", nil)
	c.resize <- agentproto.Winsize{Rows: 41, Cols: 132}
	c.waitOut(t, "41 132", func() { io.WriteString(c.keys, "\n") })
	io.WriteString(c.keys, "q\n")
	st := <-c.done
	if st.Code != 7 {
		t.Fatalf("status %+v, want exit code 7", st)
	}
	out, _ := c.x.out()
	i := strings.Index(out, "bg=")
	if i < 0 {
		t.Fatalf("no background pid in %q", out)
	}
	bg, err := strconv.Atoi(strings.Fields(out[i+3:])[0])
	if err != nil {
		t.Fatal(err)
	}
	waitDead(t, bg)
}

// Ctrl-C typed at an interactive shell stops its foreground job, not the
// shell.
func TestExecTTYCtrlCReachesForegroundJob(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Fatal("bash is not installed: apt-get install bash")
	}
	e := newTestEnv(t)
	c := startTTY(t, e, agentproto.ExecRequest{
		Identity: agentproto.Identity{User: "alice"},
		Tty:      &agentproto.Winsize{Rows: 24, Cols: 80},
		Argv:     []string{"/bin/bash", "--norc", "--noprofile", "-i"},
		Env:      []string{"PS1=$ "},
	})
	io.WriteString(c.keys, "echo $((6*7))-ready\n")
	c.waitOut(t, "42-ready", nil)
	io.WriteString(c.keys, "sleep 100\n")
	waitProc(t, "sleep\x00100\x00")
	started := time.Now()
	io.WriteString(c.keys, "\x03")
	io.WriteString(c.keys, "echo alive-$((1+1)); exit 3\n")
	c.waitOut(t, "alive-2", nil)
	if st := <-c.done; st.Code != 3 {
		t.Fatalf("status %+v, want the shell's exit 3", st)
	}
	if d := time.Since(started); d > 30*time.Second {
		t.Fatalf("Ctrl-C took %s", d)
	}
}

// waitProc polls /proc until a process's command line is cmdline.
func waitProc(t *testing.T, cmdline string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == cmdline {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process %q", cmdline)
		}
		time.Sleep(20 * time.Millisecond) // polling /proc
	}
}
