package agentproto

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// HandleDefault registers h for every op without its own handler.
func (m *Mux) HandleDefault(h HandlerFunc) { m.fallback = h }

// Forward relays an incoming call to p unchanged: the request, then the
// frames in both directions, until the far end finishes. A host process
// that owns the guest session uses it to let other local processes (the
// CLI) talk to the guest through it.
func (p *Peer) Forward(ctx context.Context, c *Call) error {
	return p.ForwardAs(ctx, c, c.Op, json.RawMessage(orNull(c.body)))
}

// ForwardAs relays an incoming call to p as op with request req, which
// the relaying process made (e.g. an exec the owner built for a terminal
// a client asked for): then the frames in both directions, as Forward.
func (p *Peer) ForwardAs(ctx context.Context, c *Call, op string, req any) error {
	s, release, err := p.open(ctx, op, req)
	if err != nil {
		return err
	}
	defer release()
	go func() {
		// caller → far end; the caller's half-close is passed on.
		io.Copy(s, c.s)
		s.Close()
	}()
	// far end → caller, under the call's write lock.
	buf := make([]byte, 64<<10)
	for {
		n, rerr := s.Read(buf)
		if n > 0 {
			c.s.wmu.Lock()
			_, werr := c.s.Write(buf[:n])
			c.s.wmu.Unlock()
			if werr != nil {
				return errResponded
			}
		}
		if rerr == io.EOF {
			return errResponded
		}
		if rerr != nil {
			// The far end died mid-call: tell the caller why, unless frames
			// already started (then the caller sees a cut stream).
			return fmt.Errorf("%w", p.callErr(ctx, op, rerr))
		}
	}
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// Emit sends a progress event (JSON in a Stdout frame) during a call that
// streams events before its Response; see Peer.CallStream.
func (c *Call) Emit(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.s.writeFrame(FrameStdout, b)
}

// CallStream makes a call whose handler emits events (Call.Emit) before
// its final Response. onEvent gets each event's JSON.
func (p *Peer) CallStream(ctx context.Context, op string, req, resp any, onEvent func(json.RawMessage)) error {
	s, release, err := p.open(ctx, op, req)
	if err != nil {
		return err
	}
	defer release()
	for {
		t, payload, err := ReadFrame(s)
		if err != nil {
			return p.callErr(ctx, op, err)
		}
		switch t {
		case FrameStdout:
			if onEvent != nil {
				onEvent(payload)
			}
		case FrameResponse:
			return decodeResponse(op, payload, resp)
		default:
			return fmt.Errorf("agent %s: %w: unexpected frame %q", op, ErrProtocol, t)
		}
	}
}
