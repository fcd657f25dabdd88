package agentproto

import (
	"context"
	"fmt"
	"io"
	"net"
)

// OpPortDial connects to a TCP port an agent listens on in its own network
// namespace (on its loopback), for a preview the host relays
// (sandbox_expose_port). After the Response the stream carries the
// connection's bytes both ways.
const OpPortDial = "net.port_dial"

// MinorPortDial is the protocol minor version that added OpPortDial. An
// older guest answers it "unknown op", so the host asks first.
const MinorPortDial = 8

// Speaks reports whether the guest's protocol has minor version minor:
// the host checks it before an op added by that minor.
func (c *Client) Speaks(minor int) bool {
	return c.Info.Major == VersionMajor && c.Info.Minor >= minor
}

// PortDialRequest names the agent's user and its port.
type PortDialRequest struct {
	User string `json:"user"`
	Port int    `json:"port"`
}

// PortDialService is implemented by a guest that relays previews.
type PortDialService interface {
	PortDial(context.Context, *PortDialRequest) (net.Conn, error)
}

// portDialHandler answers, then splices the stream and the connection.
func portDialHandler(f func(context.Context, *PortDialRequest) (net.Conn, error)) HandlerFunc {
	return func(ctx context.Context, c *Call) error {
		var req PortDialRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		conn, err := f(ctx, &req)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := c.Respond(Empty{}); err != nil {
			return errResponded
		}
		done := make(chan struct{})
		go func() {
			io.Copy(conn, c.s.Conn)
			if tc, ok := conn.(interface{ CloseWrite() error }); ok {
				tc.CloseWrite()
			}
			close(done)
		}()
		io.Copy(c.s.Conn, conn)
		c.s.Conn.Close()
		<-done
		return errResponded
	}
}

// DialPort connects to port on user's loopback in the guest. Closing the
// result ends the connection.
// A guest older than MinorPortDial gets no call: the error wraps
// ErrUnsupported and names both versions.
func (c *Client) DialPort(ctx context.Context, user string, port int) (io.ReadWriteCloser, error) {
	if !c.Speaks(MinorPortDial) {
		return nil, fmt.Errorf("agent %s: %w: the guest agent speaks protocol %d.%d, and port relaying needs %d.%d",
			OpPortDial, ErrUnsupported, c.Info.Major, c.Info.Minor, VersionMajor, MinorPortDial)
	}
	s, release, err := c.Peer.open(context.WithoutCancel(ctx), OpPortDial, PortDialRequest{User: user, Port: port})
	if err != nil {
		return nil, err
	}
	t, payload, err := ReadFrame(s)
	if err != nil {
		release()
		return nil, c.Peer.callErr(ctx, OpPortDial, err)
	}
	if t != FrameResponse {
		release()
		return nil, fmt.Errorf("agent %s: %w: unexpected frame %q", OpPortDial, ErrProtocol, t)
	}
	if err := decodeResponse(OpPortDial, payload, &Empty{}); err != nil {
		release()
		return nil, err
	}
	return portConn{s, release}, nil
}

type portConn struct {
	*stream
	release func()
}

func (p portConn) Close() error { p.release(); return nil }
