package agentproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// Peer is one end of a multiplexed session. Both ends can open calls and
// serve them.
type Peer struct {
	sess *yamux.Session

	mu      sync.Mutex
	cause   error         // why the session ended, once it has
	causeCh chan struct{} // closed when cause is set
	grace   time.Duration // how long a failed call waits to learn the cause
}

func yamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	// Large windows: file bodies of a few MiB should not stall on acks over
	// a slow emulated serial port.
	c.MaxStreamWindowSize = 4 << 20
	c.AcceptBacklog = 1024
	// Under TCG a busy guest can be slow to answer; a keepalive that gives
	// up too early would tear down a healthy session. VM death is detected
	// by the driver watching the hypervisor process, not by keepalives.
	c.KeepAliveInterval = 30 * time.Second
	c.ConnectionWriteTimeout = 2 * time.Minute
	c.StreamOpenTimeout = 2 * time.Minute
	c.Logger = log.New(io.Discard, "", 0)
	c.LogOutput = nil
	return c
}

// NewClientPeer starts the host side of a session over conn.
func NewClientPeer(conn io.ReadWriteCloser) (*Peer, error) {
	s, err := yamux.Client(conn, yamuxConfig())
	if err != nil {
		return nil, fmt.Errorf("agent session: %w", err)
	}
	return &Peer{sess: s, causeCh: make(chan struct{})}, nil
}

// NewServerPeer starts the guest side of a session over conn.
func NewServerPeer(conn io.ReadWriteCloser) (*Peer, error) {
	s, err := yamux.Server(conn, yamuxConfig())
	if err != nil {
		return nil, fmt.Errorf("agent session: %w", err)
	}
	return &Peer{sess: s, causeCh: make(chan struct{})}, nil
}

// Close ends the session. cause (may be nil) is reported by every call that
// was in flight or is made later, so callers learn why, e.g. "the VM died".
func (p *Peer) Close(cause error) {
	p.mu.Lock()
	if p.cause == nil {
		if cause == nil {
			cause = errors.New("closed")
		}
		p.cause = cause
		close(p.causeCh)
	}
	p.mu.Unlock()
	p.sess.Close()
}

// SetCauseGrace makes calls that fail because the connection dropped wait
// up to d for Close to report why. The owner of a VM sets it: the channel
// breaks a moment before the hypervisor's exit is seen, and "the VM died"
// is a better answer than "connection lost".
func (p *Peer) SetCauseGrace(d time.Duration) {
	p.mu.Lock()
	p.grace = d
	p.mu.Unlock()
}

// Streams is how many streams (calls, shells, forwarded connections, in
// either direction) are open now: a session with none is idle.
func (p *Peer) Streams() int { return p.sess.NumStreams() }

// Done is closed when the session ends, for any reason.
func (p *Peer) Done() <-chan struct{} { return p.sess.CloseChan() }

// Err says why the session ended, or nil while it is alive.
func (p *Peer) Err() error {
	select {
	case <-p.sess.CloseChan():
	default:
		return nil
	}
	p.mu.Lock()
	grace := p.grace
	p.mu.Unlock()
	if grace > 0 {
		select {
		case <-p.causeCh:
		case <-time.After(grace):
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cause != nil {
		return fmt.Errorf("%w: %w", ErrSessionEnded, p.cause)
	}
	return fmt.Errorf("%w: connection lost", ErrSessionEnded)
}

// wrap turns transport errors into ErrSessionEnded with the cause once the
// session is gone, so callers see "the VM died" rather than "EOF".
func (p *Peer) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var re *RemoteError
	if errors.As(err, &re) {
		return err
	}
	if serr := p.Err(); serr != nil {
		return fmt.Errorf("agent %s: %w", op, serr)
	}
	if errors.Is(err, yamux.ErrSessionShutdown) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("agent %s: %w: %v", op, ErrSessionEnded, err)
	}
	return fmt.Errorf("agent %s: %w", op, err)
}

type requestEnvelope struct {
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body"`
}

type responseEnvelope struct {
	Body  json.RawMessage `json:"body,omitempty"`
	Error *WireError      `json:"error,omitempty"`
}

// stream is one call's stream with serialised writes.
type stream struct {
	net.Conn
	wmu sync.Mutex
}

func (s *stream) writeFrame(t FrameType, payload []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return WriteFrame(s.Conn, t, payload)
}

func (s *stream) writeJSON(t FrameType, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.writeFrame(t, b)
}

// open starts a call: opens a stream and sends the request. The stream is
// torn down when ctx ends.
func (p *Peer) open(ctx context.Context, op string, req any) (*stream, func(), error) {
	if err := p.Err(); err != nil {
		return nil, nil, fmt.Errorf("agent %s: %w", op, err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("agent %s: encode request: %w", op, err)
	}
	type opened struct {
		s   *yamux.Stream
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := p.sess.OpenStream()
		ch <- opened{s, err}
	}()
	var ys *yamux.Stream
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, nil, p.wrap(op, o.err)
		}
		ys = o.s
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.s != nil {
				o.s.Close()
			}
		}()
		return nil, nil, fmt.Errorf("agent %s: %w", op, ctx.Err())
	}
	s := &stream{Conn: ys}
	stop := context.AfterFunc(ctx, func() {
		// Unblock any reader or writer; the call then returns ctx.Err().
		ys.SetDeadline(time.Now())
		ys.Close()
	})
	release := func() {
		stop()
		ys.Close()
	}
	if err := s.writeJSON(FrameRequest, requestEnvelope{Op: op, Body: body}); err != nil {
		release()
		return nil, nil, p.callErr(ctx, op, err)
	}
	return s, release, nil
}

func (p *Peer) callErr(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("agent %s: %w", op, ctx.Err())
	}
	return p.wrap(op, err)
}

// decodeResponse interprets a Response frame.
func decodeResponse(op string, payload []byte, out any) error {
	var env responseEnvelope
	if err := json.Unmarshal(payload, &env); err != nil {
		return fmt.Errorf("agent %s: %w: bad response: %v", op, ErrProtocol, err)
	}
	if env.Error != nil {
		return &RemoteError{Op: op, Code: env.Error.Code, Message: env.Error.Message}
	}
	if out == nil || len(env.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(env.Body, out); err != nil {
		return fmt.Errorf("agent %s: %w: bad response body: %v", op, ErrProtocol, err)
	}
	return nil
}

// Call makes a unary call: one request, one response.
func (p *Peer) Call(ctx context.Context, op string, req, resp any) error {
	s, release, err := p.open(ctx, op, req)
	if err != nil {
		return err
	}
	defer release()
	t, payload, err := ReadFrame(s)
	if err != nil {
		return p.callErr(ctx, op, err)
	}
	if t != FrameResponse {
		return fmt.Errorf("agent %s: %w: unexpected frame %q", op, ErrProtocol, t)
	}
	return decodeResponse(op, payload, resp)
}
