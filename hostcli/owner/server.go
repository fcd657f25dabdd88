package owner

import (
	"context"
	"encoding/json"
	"errors"
	"net"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// Control operations besides the lifecycle ones. Every other op is relayed
// to the guest agent, so a client uses an ordinary agentproto.Client for
// exec and files.
const (
	OpStatus      = "ctl.status"
	OpWatch       = "ctl.watch" // a stream of Status events until cancelled
	OpDiagnostics = "ctl.diagnostics"
	OpQuit        = "ctl.quit" // stop the VM and end the owner process
	OpTool        = "ctl.tool" // run a tool in the owner (ToolRequest)
	OpEndTurn     = "ctl.endturn"
)

// ToolRequest is OpTool's request.
type ToolRequest struct {
	Agent string          `json:"agent"` // id
	Tool  string          `json:"tool"`
	Args  json.RawMessage `json:"args,omitempty"`
}

// ToolReply is OpTool's answer: the envelope's JSON.
type ToolReply struct {
	Envelope string `json:"envelope"`
}

// EndTurnRequest is OpEndTurn's request.
type EndTurnRequest struct {
	Agent string `json:"agent"`
}

// Server answers control calls with a Controller (the owner's Local).
type Server struct {
	Ctl Controller
}

// Serve accepts clients until ctx ends or ln is closed. Each connection
// is one multiplexed session: a client's calls run concurrently.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	mux := s.mux()
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			peer, err := agentproto.NewServerPeer(conn)
			if err != nil {
				conn.Close()
				return
			}
			defer peer.Close(nil)
			// Stopping the server disconnects its clients, as the
			// owner's exit would.
			go func() {
				select {
				case <-ctx.Done():
					peer.Close(errors.New("the owner stopped serving"))
				case <-peer.Done():
				}
			}()
			peer.Serve(ctx, mux)
		}()
	}
}

func (s *Server) mux() *agentproto.Mux {
	m := agentproto.NewMux()
	m.Handle(OpStatus, func(ctx context.Context, c *agentproto.Call) error {
		st, err := s.Ctl.Status(ctx)
		if err != nil {
			return err
		}
		return c.Respond(st)
	})
	m.Handle(OpWatch, func(ctx context.Context, c *agentproto.Call) error {
		// The current status first, then every change until the client
		// cancels (ctx ends) or goes away.
		events := make(chan Status, 64)
		cancel := s.Ctl.Subscribe(func(st Status) {
			select {
			case events <- st:
			default: // a slow watcher misses an intermediate state, not the last
			}
		})
		defer cancel()
		st, err := s.Ctl.Status(ctx)
		if err != nil {
			return err
		}
		if err := c.Emit(st); err != nil {
			return err
		}
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case st := <-events:
				if err := c.Emit(st); err != nil {
					return err
				}
			}
		}
	})
	for _, op := range []Op{OpProvision, OpStart, OpStop, OpReset, OpRemove} {
		m.Handle(string(op), func(ctx context.Context, c *agentproto.Call) error {
			st, err := s.Ctl.Lifecycle(ctx, op, func(st sandbox.Status) { c.Emit(st) })
			if err != nil {
				return err
			}
			return c.Respond(st)
		})
	}
	m.Handle(OpQuit, func(ctx context.Context, c *agentproto.Call) error {
		if err := s.Ctl.Quit(ctx); err != nil {
			return err
		}
		return c.Respond(agentproto.Empty{})
	})
	m.Handle(OpDiagnostics, func(ctx context.Context, c *agentproto.Call) error {
		rs, err := s.Ctl.Diagnostics(ctx, func(r diagnostics.Result) { c.Emit(r) })
		if err != nil {
			return err
		}
		return c.Respond(rs)
	})
	m.Handle(OpTool, agentproto.Unary(func(ctx context.Context, req *ToolRequest) (*ToolReply, error) {
		return &ToolReply{Envelope: s.Ctl.RunTool(ctx, req.Agent, req.Tool, req.Args).JSON()}, nil
	}))
	m.Handle(OpEndTurn, agentproto.Unary(func(ctx context.Context, req *EndTurnRequest) (*agentproto.Empty, error) {
		return &agentproto.Empty{}, s.Ctl.EndTurn(ctx, req.Agent)
	}))
	m.HandleDefault(func(ctx context.Context, c *agentproto.Call) error {
		g, err := s.Ctl.Guest(ctx)
		if err != nil {
			return err
		}
		return g.Peer.Forward(ctx, c)
	})
	return m
}
