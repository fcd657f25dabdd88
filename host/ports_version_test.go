package host

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
)

// portGuest is a guest agent that speaks protocol minor and relays ports
// (every other op is left out: nil Service panics if called).
type portGuest struct {
	agentproto.Service
	minor int
	dials atomic.Int32
}

func (g *portGuest) Hello(context.Context, *agentproto.HelloRequest) (*agentproto.HelloResponse, error) {
	return &agentproto.HelloResponse{Major: agentproto.VersionMajor, Minor: g.minor}, nil
}

func (g *portGuest) PortDial(context.Context, *agentproto.PortDialRequest) (net.Conn, error) {
	g.dials.Add(1)
	a, b := net.Pipe()
	go func() { b.Close() }()
	return a, nil
}

func (g *portGuest) connect(t *testing.T) *agentproto.Client {
	t.Helper()
	host, guest := net.Pipe()
	sp, err := agentproto.NewServerPeer(guest)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sp.Serve(ctx, agentproto.ServiceMux(g)) }()
	cp, err := agentproto.NewClientPeer(host)
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentproto.Handshake(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close(nil); sp.Close(nil); cancel(); <-done })
	return c
}

// A guest agent from before net.port_dial gets no dial: the preview is
// refused with the fix (restart or reset the VM), not the guest's
// "unknown op". A current guest is dialled and the preview opens.
func TestExposeNeedsPortDialGuest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		minor int
		want  []string // in the error; none: success
	}{
		{"guest before port_dial", agentproto.MinorPortDial - 1,
			[]string{"older guest agent", "protocol 2.7", "need 2.8", "restart the VM", "osaurus-sandbox stop", "osaurus-sandbox reset"}},
		{"current guest", agentproto.VersionMinor, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &portGuest{minor: tc.minor}
			c := g.connect(t)
			p := &Ports{Guest: func(context.Context) (*agentproto.Client, error) { return c, nil }}
			t.Cleanup(func() { p.Close("", 0) })
			a := agents.Agent{ID: "a1", Name: "Alice", Slug: "alice"}
			url, err := p.Expose(context.Background(), a, 8000)
			if tc.want == nil {
				if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") || g.dials.Load() != 1 {
					t.Fatalf("url %q, err %v, %d dials; want a preview after one dial", url, err, g.dials.Load())
				}
				return
			}
			if err == nil {
				t.Fatalf("exposed %s on a minor-%d guest", url, tc.minor)
			}
			if !errors.Is(err, agentproto.ErrUnsupported) || strings.Contains(err.Error(), "unknown op") {
				t.Fatalf("error %v: want ErrUnsupported, not the guest's unknown op", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if n := g.dials.Load(); n != 0 {
				t.Fatalf("%d dials reached an old guest", n)
			}
			if len(p.List()) != 0 {
				t.Fatal("a preview was listed")
			}
		})
	}
}

// The client refuses the op itself too, for callers other than Expose
// (the relay of an open preview).
func TestDialPortChecksVersion(t *testing.T) {
	g := &portGuest{minor: agentproto.MinorPortDial - 1}
	c := g.connect(t)
	if _, err := c.DialPort(context.Background(), "agent-a1", 8000); !errors.Is(err, agentproto.ErrUnsupported) || !strings.Contains(err.Error(), "2.7") {
		t.Fatalf("DialPort on a minor-7 guest: %v", err)
	}
	if g.dials.Load() != 0 {
		t.Fatal("the dial reached the guest")
	}
}
