package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/host/api/server"
)

// fakeTerminalGuest serves exec the way a guest runs a terminal: it
// echoes the keys, says each new size, exits on "x" with code 7, and
// records what it was asked and the signals it got.
type fakeTerminalGuest struct {
	mu   sync.Mutex
	req  agentproto.ExecRequest
	sigs []int
	gone chan struct{} // closed when the exec handler returned
}

func (f *fakeTerminalGuest) client(t *testing.T) *agentproto.Client {
	host, guest := net.Pipe()
	sp, err := agentproto.NewServerPeer(guest)
	if err != nil {
		t.Fatal(err)
	}
	m := agentproto.NewMux()
	m.Handle(agentproto.OpExec, agentproto.Exec(func(ctx context.Context, req *agentproto.ExecRequest, eio agentproto.ExecIO) (agentproto.ExitStatus, error) {
		defer close(f.gone)
		f.mu.Lock()
		f.req = *req
		f.mu.Unlock()
		eio.Started(42)
		keys := make(chan []byte)
		go func() {
			buf := make([]byte, 64)
			for {
				n, err := eio.Stdin.Read(buf)
				if err != nil {
					close(keys)
					return
				}
				keys <- append([]byte(nil), buf[:n]...)
			}
		}()
		for {
			select {
			case k, ok := <-keys:
				if !ok {
					keys = nil
					continue
				}
				eio.Stdout.Write(k)
				if strings.Contains(string(k), "x") {
					return agentproto.ExitStatus{Exited: true, Code: 7}, nil
				}
			case ws := <-eio.Resize:
				fmt.Fprintf(eio.Stdout, "[size %dx%d]", ws.Rows, ws.Cols)
			case s := <-eio.Signals:
				f.mu.Lock()
				f.sigs = append(f.sigs, s)
				f.mu.Unlock()
				if s == 9 {
					return agentproto.ExitStatus{Exited: true, Code: 137, Signal: 9}, nil
				}
			}
		}
	}))
	go sp.Serve(context.Background(), m)
	cp, err := agentproto.NewClientPeer(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close(nil); sp.Close(nil) })
	return &agentproto.Client{Peer: cp}
}

// serveShell serves the control socket with terminals on g; build is the
// owner's request for a client's.
func serveShell(t *testing.T, g *agentproto.Client) (*Client, chan control.ShellRequest) {
	p := testPaths(t)
	ln, err := server.Listen(p)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan control.ShellRequest, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&server.Server{Ctl: &stubCtl{}, Shell: func(_ context.Context, req control.ShellRequest) (*agentproto.Client, agentproto.ExecRequest, error) {
			asked <- req
			return g, agentproto.ExecRequest{Identity: agentproto.Identity{User: "agent-" + req.Agent}, Shell: "login", Tty: &req.Size, Network: "none"}, nil
		}}).Serve(ctx, ln)
	}()
	t.Cleanup(func() { cancel(); ln.Close(); <-done })
	c, err := Dial(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, asked
}

// A terminal crosses the owner whole: the owner's request (not the
// client's) reaches the guest, keys and resizes go in, output and the
// exit code come back.
func TestShellRelayedThroughOwner(t *testing.T) {
	f := &fakeTerminalGuest{gone: make(chan struct{})}
	c, asked := serveShell(t, f.client(t))
	keys, typing := io.Pipe()
	resize := make(chan agentproto.Winsize, 1)
	out := &syncBuf{}
	type result struct {
		st  agentproto.ExitStatus
		err error
	}
	res := make(chan result, 1)
	go func() {
		st, err := c.Shell(context.Background(), control.ShellRequest{Agent: "alice", Size: agentproto.Winsize{Rows: 30, Cols: 100}}, keys, out, resize)
		res <- result{st, err}
	}()
	if r := <-asked; r.Agent != "alice" || r.Size.Rows != 30 {
		t.Fatalf("the owner was asked %+v", r)
	}
	io.WriteString(typing, "ls\r")
	waitFor(t, out, "ls\r")
	resize <- agentproto.Winsize{Rows: 41, Cols: 132}
	waitFor(t, out, "[size 41x132]")
	io.WriteString(typing, "x")
	r := <-res
	if r.err != nil || r.st.Code != 7 {
		t.Fatalf("Shell = %+v, %v; want exit code 7", r.st, r.err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.req.User != "agent-alice" || f.req.Network != "none" || f.req.Tty == nil || f.req.Tty.Rows != 30 || !f.req.Stdin {
		t.Fatalf("the guest ran %+v", f.req)
	}
}

// A client that goes away mid-terminal has the guest kill it.
func TestShellClientGoneKills(t *testing.T) {
	f := &fakeTerminalGuest{gone: make(chan struct{})}
	c, _ := serveShell(t, f.client(t))
	keys, typing := io.Pipe()
	defer typing.Close()
	out := &syncBuf{}
	go c.Shell(context.Background(), control.ShellRequest{Agent: "alice"}, keys, out, nil)
	io.WriteString(typing, "hello")
	waitFor(t, out, "hello")
	c.Close() // the connection drops, as when the client is killed
	select {
	case <-f.gone:
	case <-time.After(30 * time.Second):
		t.Fatal("the guest's terminal outlived its client")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sigs) == 0 || f.sigs[len(f.sigs)-1] != 9 {
		t.Fatalf("signals %v, want SIGKILL", f.sigs)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, b *syncBuf, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %q", want, b.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the output
	}
}
