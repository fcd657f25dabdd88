package agentproto

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// TestForwardRelaysCalls runs client → relay → guest, the path the CLI
// takes through the process that owns the VM.
func TestForwardRelaysCalls(t *testing.T) {
	guestMux := NewMux()
	guestMux.Handle(OpExec, Exec(func(ctx context.Context, req *ExecRequest, eio ExecIO) (ExitStatus, error) {
		eio.Started(3)
		io.Copy(eio.Stdout, eio.Stdin)
		io.WriteString(eio.Stderr, "done")
		return ExitStatus{Exited: true, Code: 5}, nil
	}))
	guestMux.Handle(OpStat, Unary(func(_ context.Context, r *PathRequest) (*FileInfo, error) {
		return nil, ErrNotFound
	}))
	toGuest := pair(t, guestMux) // relay's session with the guest

	relay := NewMux()
	relay.HandleDefault(toGuest.Peer.Forward)
	relay.Handle("ctl.count", func(ctx context.Context, c *Call) error {
		for i := range 3 {
			c.Emit(map[string]int{"n": i})
		}
		return c.Respond(map[string]string{"ok": "yes"})
	})
	a, b := net.Pipe()
	rs, _ := NewServerPeer(b)
	go rs.Serve(context.Background(), relay)
	cp, _ := NewClientPeer(a)
	t.Cleanup(func() { cp.Close(nil); rs.Close(nil) })
	c := &Client{Peer: cp}

	var out, errOut bytes.Buffer
	st, err := c.Exec(context.Background(), ExecRequest{Shell: "cat"}, strings.NewReader("through the relay"), &out, &errOut)
	if err != nil || st.Code != 5 || out.String() != "through the relay" || errOut.String() != "done" {
		t.Fatalf("exec via relay: %v %+v %q %q", err, st, out.String(), errOut.String())
	}
	if _, err := c.Stat(context.Background(), PathRequest{Path: "/x"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("error through relay: %v", err)
	}
	var events []json.RawMessage
	var resp map[string]string
	if err := cp.CallStream(context.Background(), "ctl.count", nil, &resp, func(e json.RawMessage) { events = append(events, e) }); err != nil {
		t.Fatal(err)
	}
	if len(events) != 3 || resp["ok"] != "yes" {
		t.Fatalf("events %s resp %v", events, resp)
	}
}
