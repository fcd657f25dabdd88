package agentproto

import (
	"context"
	"fmt"
	"net"
	"time"
)

// OpBridge is the one call the guest opens to the host: it carries one
// connection to the host API bridge. After the Request (a BridgeRequest)
// the host answers with a Response; from then on the stream is a plain
// byte pipe carrying HTTP/1.1 in both directions until either side closes.
const OpBridge = "bridge"

// BridgeRequest is the identity of the process that connected to the
// guest's bridge socket, as the guest agent read it from the kernel
// (SO_PEERCRED), never from the caller.
type BridgeRequest struct {
	UID int `json:"uid"`
	// User is the Linux user name of UID, empty when it has none.
	User string `json:"user,omitempty"`
	// Agent is the agent name when User is an agent's user
	// ("agent-<name>"); empty for root and system users.
	Agent string `json:"agent,omitempty"`
	// Plugin is the plugin whose command connected, read from the
	// network namespace the caller runs in (each plugin of an agent has
	// its own): the host gives it only the secrets its recipe declares.
	Plugin string `json:"plugin,omitempty"`
	// Unattributed: the caller runs in a network namespace the guest did
	// not make (one it created itself), so whether it is the agent's own
	// process or a plugin's can't be told; the host gives it no secrets.
	Unattributed bool `json:"unattributed,omitempty"`
}

// OpenConn opens a call whose stream turns into a raw byte pipe once the
// far end accepted it (see Call.Accept). The caller closes the conn.
func (p *Peer) OpenConn(ctx context.Context, op string, req any) (net.Conn, error) {
	// ctx bounds only the opening: the pipe lives until Close, so the
	// stream is opened without ctx's teardown and ctx instead cuts the
	// wait for the answer.
	s, release, err := p.open(context.WithoutCancel(ctx), op, req)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { s.SetDeadline(time.Now()) })
	t, payload, err := ReadFrame(s)
	if !stop() {
		release()
		return nil, fmt.Errorf("agent %s: %w", op, ctx.Err())
	}
	if err != nil {
		release()
		return nil, p.callErr(ctx, op, err)
	}
	if t != FrameResponse {
		release()
		return nil, fmt.Errorf("agent %s: %w: unexpected frame %q", op, ErrProtocol, t)
	}
	if err := decodeResponse(op, payload, nil); err != nil {
		release()
		return nil, err
	}
	return &releasingConn{Conn: s.Conn, release: release}, nil
}

type releasingConn struct {
	net.Conn
	release func()
}

func (c *releasingConn) Close() error {
	c.release()
	return nil
}

// Accept answers the call with success and hands over its stream as a raw
// byte pipe. The handler must return ErrHijacked after it is done with
// the conn (serving ends the stream when the handler returns).
func (c *Call) Accept() (net.Conn, error) {
	if err := c.Respond(Empty{}); err != nil {
		return nil, err
	}
	return c.s.Conn, nil
}

// ErrHijacked tells the server that a handler answered the call itself
// (with Accept) and the stream needs nothing more.
var ErrHijacked = errResponded
