package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/errdefs"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/server"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// These tests check the control protocol between the owner and its
// clients with a stand-in Controller; the real owner over a real VM is
// covered by the e2e package.

// stubCtl answers status and runs tools by calling run.
type stubCtl struct {
	api.Controller // unused methods panic
	run            func(ctx context.Context, tool string) envelope.Envelope
	endTurns       chan string
	quit           func()
}

func (s *stubCtl) Quit(context.Context) error {
	s.quit()
	return nil
}

func (s *stubCtl) Status(context.Context) (api.Status, error) {
	return api.Status{Status: control.Status{State: control.Running}, Owner: "test"}, nil
}

func (s *stubCtl) RunTool(ctx context.Context, agentID, tool string, args json.RawMessage) envelope.Envelope {
	return s.run(ctx, tool)
}

func (s *stubCtl) EndTurn(ctx context.Context, agentID string) error {
	s.endTurns <- agentID
	return nil
}

// serve serves ctl on p's control socket until the returned stop is
// called (or the test ends).
func serve(t *testing.T, p config.Paths, ctl api.Controller) (stop func()) {
	t.Helper()
	ln, err := server.Listen(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); (&server.Server{Ctl: ctl}).Serve(ctx, ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); ln.Close(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func testPaths(t *testing.T) config.Paths {
	// Unix socket paths are short: keep the data dir's path short too.
	dir, err := tempDirShort(t)
	if err != nil {
		t.Fatal(err)
	}
	return config.Paths{Root: dir}
}

func TestListenIsExclusive(t *testing.T) {
	p := testPaths(t)
	stop := serve(t, p, &stubCtl{})
	if _, err := server.Listen(p); !errors.Is(err, api.ErrOwned) {
		t.Fatalf("second Listen: %v, want ErrOwned", err)
	}
	stop()
	ln, err := server.Listen(p)
	if err != nil {
		t.Fatalf("Listen after the owner left: %v", err)
	}
	ln.Close()
}

// Concurrent tool calls of one client run concurrently: each waits until
// all of them are inside the owner at once.
func TestConcurrentToolCalls(t *testing.T) {
	p := testPaths(t)
	const n = 4
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	serve(t, p, &stubCtl{run: func(ctx context.Context, tool string) envelope.Envelope {
		arrived.Done()
		select {
		case <-all:
			return envelope.OK(tool, "done")
		case <-ctx.Done():
			return envelope.Fail(tool, envelope.Timeout, "cancelled")
		}
	}})
	c, err := Dial(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for range n {
		wg.Go(func() {
			if e := c.RunTool(ctx, "a", "sandbox_exec", nil); !e.OK {
				errs <- e.Message
			}
		})
	}
	wg.Wait()
	close(errs)
	for m := range errs {
		t.Error(m)
	}
}

// A client whose owner went away reconnects once, transparently, to the
// next owner; a tool call cut off by the owner's death says it may have
// run instead of repeating it.
func TestReconnect(t *testing.T) {
	p := testPaths(t)
	inside, never := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(never) })
	stop := serve(t, p, &stubCtl{run: func(ctx context.Context, tool string) envelope.Envelope {
		close(inside)
		<-never // a dead owner never answers
		return envelope.Fail(tool, envelope.Timeout, "unreachable")
	}})
	c, err := Dial(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	res := make(chan envelope.Envelope)
	go func() { res <- c.RunTool(ctx, "a", "sandbox_exec", nil) }()
	<-inside
	stop() // the owner dies mid-call
	e := <-res
	if e.OK || e.Kind != envelope.Unavailable || !strings.Contains(e.Message, "may or may not have run") {
		t.Fatalf("cut-off call: %+v", e)
	}

	endTurns := make(chan string, 1)
	serve(t, p, &stubCtl{endTurns: endTurns, run: func(ctx context.Context, tool string) envelope.Envelope {
		return envelope.OK(tool, "second owner")
	}})
	if st, err := c.Status(ctx); err != nil || st.Owner != "test" {
		t.Fatalf("status after the owner changed: %+v %v", st, err)
	}
	if e := c.RunTool(ctx, "a", "sandbox_exec", nil); !e.OK || e.Result != "second owner" {
		t.Fatalf("tool call on the new owner: %+v", e)
	}
	if err := c.EndTurn(ctx, "a"); err != nil || <-endTurns != "a" {
		t.Fatalf("end turn: %v", err)
	}
}

// Without an owner, Dial says so.
func TestDialWithoutOwner(t *testing.T) {
	p := testPaths(t)
	if _, err := Dial(context.Background(), p); !errors.Is(err, api.ErrNoOwner) {
		t.Fatalf("Dial without an owner: %v", err)
	}
}

// The owner exits right after a Quit stopped the VM; when its answer
// loses that race, Quit still reports success, since nothing is left.
func TestQuitWhenTheOwnerExitsFirst(t *testing.T) {
	p := testPaths(t)
	var stop func()
	ctl := &stubCtl{quit: func() { stop() }} // the process ends before answering
	stop = serve(t, p, ctl)
	c, err := Dial(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Quit(context.Background()); err != nil {
		t.Fatalf("Quit: %v", err)
	}
	if _, err := Dial(context.Background(), p); !errors.Is(err, api.ErrNoOwner) {
		t.Fatalf("an owner still answers after Quit: %v", err)
	}
}

// errCtl fails Status with the error last set.
type errCtl struct {
	api.Controller // unused methods panic
	mu             sync.Mutex
	err            error
}

func (s *errCtl) set(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *errCtl) Status(context.Context) (api.Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return api.Status{}, s.err
}

// The control socket is an edge too: an owner's error reaches the client
// as its class with its message, so the CLI and the window translate it
// as they would in the owner.
func TestOwnerErrorsKeepTheirClass(t *testing.T) {
	p := testPaths(t)
	ctl := &errCtl{}
	serve(t, p, ctl)
	ctx := context.Background()
	cl, err := Dial(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, class := range errdefs.Classes { // a package's sentinel of each class
		s := struct {
			Name       string
			Err, Class error
		}{class.Error(), errdefs.Class(class, "a sentinel of "+class.Error()), class}
		ctl.set(fmt.Errorf("owner: %w", s.Err))
		_, err := cl.Status(ctx)
		if !errors.Is(err, s.Class) || !strings.Contains(err.Error(), s.Err.Error()) {
			t.Errorf("%s: the client got %v, want class %v and the owner's message", s.Name, err, s.Class)
		}
	}
}

// agentCtl knows one agent, alice.
type agentCtl struct{ api.Controller }

func (agentCtl) GetAgent(_ context.Context, ref string) (agents.Agent, error) {
	if ref == "alice" || ref == "id-1" {
		return agents.Agent{ID: "id-1", Name: "Alice", Slug: "alice", UID: 2001}, nil
	}
	return agents.Agent{}, fmt.Errorf("%w: %q", agents.ErrNotFound, ref)
}

func (agentCtl) ListAgents(context.Context) (api.AgentList, error) {
	return api.AgentList{Agents: []agents.Agent{{ID: "id-1", Name: "Alice", Slug: "alice", UID: 2001}}, DiskUsed: map[string]int64{"alice": 4096}}, nil
}

// ListAgents crosses the socket whole, disk use included.
func TestListAgents(t *testing.T) {
	p := testPaths(t)
	serve(t, p, agentCtl{})
	ctx := context.Background()
	cl, err := Dial(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	l, err := cl.ListAgents(ctx)
	if err != nil || len(l.Agents) != 1 || l.Agents[0].Slug != "alice" || l.Agents[0].UID != 2001 || l.DiskUsed["alice"] != 4096 {
		t.Fatalf("%+v %v", l, err)
	}
}

// GetAgent crosses the socket whole, and an unknown agent stays a
// not-found error a remote `agent connect` can report as such.
func TestGetAgent(t *testing.T) {
	p := testPaths(t)
	serve(t, p, agentCtl{})
	ctx := context.Background()
	cl, err := Dial(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tt := range []struct {
		ref  string
		slug string // "" for not found
	}{{"alice", "alice"}, {"id-1", "alice"}, {"bob", ""}} {
		a, err := cl.GetAgent(ctx, tt.ref)
		switch {
		case tt.slug == "" && (!errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), `"bob"`)):
			t.Errorf("%s: %v, want a not-found error naming it", tt.ref, err)
		case tt.slug != "" && (err != nil || a.Slug != tt.slug || a.UID != 2001 || a.Name != "Alice"):
			t.Errorf("%s: %+v %v", tt.ref, a, err)
		}
	}
}

// countingDialer reaches a far side with no owner, counting the dials.
type countingDialer struct{ dials atomic.Int32 }

func (d *countingDialer) DialControl(ctx context.Context, spawn bool) (io.ReadWriteCloser, error) {
	d.dials.Add(1)
	return nil, api.ErrNoOwner
}

// A closed client never dials again: a late call of a front end that
// has gone (a window's poll after its session closed) fails, and starts
// no owner on the far side.
func TestClosedClientNeverDials(t *testing.T) {
	d := &countingDialer{}
	c := NewLazyVia(d)
	ctx := context.Background()
	if _, err := c.Status(ctx); !errors.Is(err, api.ErrNoOwner) {
		t.Fatalf("status with no owner: %v", err)
	}
	dials := d.dials.Load()
	if dials == 0 {
		t.Fatal("the open client dialled nothing")
	}
	c.Close()
	if _, err := c.Status(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("status after Close: %v, want ErrClosed", err)
	}
	if e := c.RunTool(ctx, "a", "sandbox_exec", nil); e.OK || !strings.Contains(e.Message, "closed") {
		t.Errorf("tool call after Close: %+v", e)
	}
	if got := d.dials.Load(); got != dials {
		t.Errorf("the closed client dialled %d more times", got-dials)
	}
}
