package bridge

import (
	"context"
	"net"
	"sync"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// callerKey is the context key of the relayed connection's identity.
type callerKey struct{}

// Caller is who sent a request, as the guest agent read it from the kernel.
type Caller = agentproto.BridgeRequest

// CallerOf returns the identity of the connection a request came on.
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// WithCaller is ctx carrying c as the caller, as the requests of a
// relayed connection carry it: for serving Handler directly (tests).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// relayedConn is one guest connection with the identity the guest agent
// attached to it. Close tells the agentproto handler that the HTTP server
// is done with the stream.
type relayedConn struct {
	net.Conn
	caller Caller
	once   sync.Once
	done   chan struct{}
}

func (c *relayedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}

// relayAddr names relayed connections in server logs.
type relayAddr struct{}

func (relayAddr) Network() string { return "agentproto" }
func (relayAddr) String() string  { return "guest-bridge" }

func (c *relayedConn) LocalAddr() net.Addr  { return relayAddr{} }
func (c *relayedConn) RemoteAddr() net.Addr { return relayAddr{} }

// listener feeds relayed connections to an http.Server.
type listener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newListener() *listener {
	return &listener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *listener) Addr() net.Addr { return relayAddr{} }

// offer hands c to the server, or fails when the server is closed.
func (l *listener) offer(ctx context.Context, c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	case <-ctx.Done():
		return false
	}
}
