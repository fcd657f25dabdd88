package agentproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Call is an incoming call as its handler sees it.
type Call struct {
	Op   string
	body json.RawMessage
	s    *stream
}

// Decode unmarshals the request body into v.
func (c *Call) Decode(v any) error {
	if len(c.body) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		return fmt.Errorf("%w: %s request: %v", ErrInvalid, c.Op, err)
	}
	return nil
}

// Respond sends a successful Response frame.
func (c *Call) Respond(v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.s.writeJSON(FrameResponse, responseEnvelope{Body: body})
}

// Fail sends an error Response frame.
func (c *Call) Fail(err error) error {
	return c.s.writeJSON(FrameResponse, responseEnvelope{Error: ToWire(err)})
}

// WriteFrame sends a raw frame (safe for concurrent use).
func (c *Call) WriteFrame(t FrameType, payload []byte) error { return c.s.writeFrame(t, payload) }

// ReadFrame reads the next frame from the caller.
func (c *Call) ReadFrame() (FrameType, []byte, error) { return ReadFrame(c.s) }

// HandlerFunc serves one call. Returning an error sends it as the Response
// (unless the handler already responded).
type HandlerFunc func(ctx context.Context, c *Call) error

// Mux routes calls by op.
type Mux struct {
	handlers map[string]HandlerFunc
	fallback HandlerFunc
}

// NewMux returns an empty router.
func NewMux() *Mux { return &Mux{handlers: map[string]HandlerFunc{}} }

// Handle registers h for op.
func (m *Mux) Handle(op string, h HandlerFunc) { m.handlers[op] = h }

// Unary adapts a typed request/response function to a HandlerFunc.
func Unary[Req, Resp any](f func(context.Context, *Req) (*Resp, error)) HandlerFunc {
	return func(ctx context.Context, c *Call) error {
		var req Req
		if err := c.Decode(&req); err != nil {
			return err
		}
		resp, err := f(ctx, &req)
		if err != nil {
			return err
		}
		return c.Respond(resp)
	}
}

// Serve accepts calls until the session ends or ctx is cancelled, running
// each in its own goroutine with a ctx that ends with the session.
func (p *Peer) Serve(ctx context.Context, m *Mux) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		ys, err := p.sess.AcceptStream()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return p.wrap("accept", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &stream{Conn: ys}
			defer s.Close()
			m.serveOne(ctx, s)
		}()
	}
}

func (m *Mux) serveOne(ctx context.Context, s *stream) {
	t, payload, err := ReadFrame(s)
	if err != nil {
		return
	}
	call := &Call{s: s}
	if t != FrameRequest {
		call.Fail(fmt.Errorf("%w: first frame %q is not a request", ErrProtocol, t))
		return
	}
	var env requestEnvelope
	if err := json.Unmarshal(payload, &env); err != nil {
		call.Fail(fmt.Errorf("%w: bad request: %v", ErrProtocol, err))
		return
	}
	call.Op, call.body = env.Op, env.Body
	h, ok := m.handlers[env.Op]
	if !ok && m.fallback != nil {
		h, ok = m.fallback, true
	}
	if !ok {
		call.Fail(fmt.Errorf("%w: unknown op %q", ErrUnsupported, env.Op))
		return
	}
	if err := h(ctx, call); err != nil && !errors.Is(err, errResponded) {
		call.Fail(err)
	}
}

// errResponded tells serveOne that the handler already sent its final frame.
var errResponded = errors.New("responded")

// ExecIO is what an exec handler gets to talk to the caller.
type ExecIO struct {
	Stdin   io.Reader // nil unless the request asked for stdin
	Stdout  io.Writer // each Write becomes a Stdout frame
	Stderr  io.Writer
	Signals <-chan int // signals sent by the caller; SIGKILL also when the caller goes away
	// ChildSignals are signals for every process of the call but its
	// leader (SignalFrame.Children).
	ChildSignals <-chan int
	// Resize carries a terminal's new sizes (ExecRequest.Tty).
	Resize <-chan Winsize
	// Started must be called once, right after the process started.
	Started func(pid int) error
}

// ExecFunc runs a process for an exec call.
type ExecFunc func(ctx context.Context, req *ExecRequest, io ExecIO) (ExitStatus, error)

type frameWriter struct {
	s *stream
	t FrameType
}

func (w frameWriter) Write(b []byte) (int, error) {
	for off := 0; off < len(b); {
		n := min(len(b)-off, 256<<10)
		if err := w.s.writeFrame(w.t, b[off:off+n]); err != nil {
			return off, err
		}
		off += n
	}
	return len(b), nil
}

// Exec adapts an ExecFunc to a HandlerFunc, doing the stream plumbing.
func Exec(f ExecFunc) HandlerFunc {
	return func(ctx context.Context, c *Call) error {
		var req ExecRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		sigs, childSigs := make(chan int, 16), make(chan int, 16)
		resize := make(chan Winsize, 16)
		var stdin io.Reader
		pr, pw := io.Pipe()
		if req.Stdin {
			stdin = pr
		}
		var started atomic.Bool
		// The reader runs until the caller closes the stream or it dies.
		// Either way nobody wants the process any more: kill it. (The
		// client ends stdin with StdinEOF and only closes the stream when
		// the call is over, so EOF here means it gave up, e.g. on cancel,
		// where its kill frame may lose the race with the close.)
		go func() {
			defer pw.Close()
			for {
				t, payload, err := c.ReadFrame()
				if err != nil {
					select {
					case sigs <- 9:
					default:
					}
					pw.CloseWithError(io.EOF)
					return
				}
				switch t {
				case FrameStdin:
					if _, err := pw.Write(payload); err != nil {
						// Process closed its stdin; drop the rest.
						continue
					}
				case FrameStdinEOF:
					pw.Close()
				case FrameSignal:
					var sf SignalFrame
					if json.Unmarshal(payload, &sf) == nil && sf.Signal > 0 {
						to := sigs
						if sf.Children {
							to = childSigs
						}
						select {
						case to <- sf.Signal:
						default:
						}
					}
				case FrameResize:
					var ws Winsize
					if json.Unmarshal(payload, &ws) == nil {
						select {
						case resize <- ws:
						default: // a burst of resizes: the next one wins
						}
					}
				}
			}
		}()
		status, err := f(ctx, &req, ExecIO{
			Stdin:        stdin,
			Stdout:       frameWriter{c.s, FrameStdout},
			Stderr:       frameWriter{c.s, FrameStderr},
			Signals:      sigs,
			ChildSignals: childSigs,
			Resize:       resize,
			Started: func(pid int) error {
				started.Store(true)
				return c.Respond(ExecStarted{Pid: pid})
			},
		})
		pr.CloseWithError(io.EOF)
		if err != nil {
			return err // before start: the Response; after: a second Response the client reads as failure
		}
		if !started.Load() {
			return fmt.Errorf("%w: exec handler never reported the start", ErrInternal)
		}
		if err := c.s.writeJSON(FrameExit, status); err != nil {
			return err
		}
		return errResponded
	}
}
