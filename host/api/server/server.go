// Package server is the owner's side of the control socket: it answers
// the control protocol (agentproto/control) with an api.Controller, the
// owner's host.Host.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// Server answers control calls with the owner's Controller.
type Server struct {
	Ctl api.Controller
	// Guest relays the guest operations control.Relayed lists to the
	// running VM's agent; without it they are refused.
	Guest func(ctx context.Context) (*agentproto.Client, error)
	// Shell builds the exec of a terminal (control.OpShell) and says which
	// guest runs it; without it terminals are refused.
	Shell func(ctx context.Context, req control.ShellRequest) (*agentproto.Client, agentproto.ExecRequest, error)
	// ProvideSecrets serves a front end that offers its machine's secrets
	// (control.OpSecretsProvide) on conn until it goes; without it the
	// offer is refused.
	ProvideSecrets func(ctx context.Context, conn net.Conn) error
	// InUse, when set, is called as a client connects; what it returns is
	// called as it goes (a background owner exits only when unused).
	InUse func() (done func())
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
			if s.InUse != nil {
				defer s.InUse()()
			}
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
	s.agentOps(m)
	s.dataOps(m)
	s.agentCheckpointOps(m)
	m.Handle(control.OpStatus, func(ctx context.Context, c *agentproto.Call) error {
		st, err := s.Ctl.Status(ctx)
		if err != nil {
			return err
		}
		return c.Respond(st)
	})
	m.Handle(control.OpWatch, func(ctx context.Context, c *agentproto.Call) error {
		// The current status first, then every change until the client
		// cancels (ctx ends) or goes away.
		events := make(chan api.Status, 64)
		cancel := s.Ctl.Subscribe(func(st api.Status) {
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
	for _, op := range []api.Op{api.OpProvision, api.OpStart, api.OpStop, api.OpReset, api.OpRemove, api.OpSuspend, api.OpResume} {
		m.Handle(string(op), func(ctx context.Context, c *agentproto.Call) error {
			st, err := s.Ctl.Lifecycle(ctx, op, func(st control.Status) { c.Emit(st) })
			if err != nil {
				return err
			}
			return c.Respond(st)
		})
	}
	m.Handle(control.OpQuit, func(ctx context.Context, c *agentproto.Call) error {
		if err := s.Ctl.Quit(ctx); err != nil {
			return err
		}
		return c.Respond(agentproto.Empty{})
	})
	m.Handle(control.OpDiagnostics, func(ctx context.Context, c *agentproto.Call) error {
		var req control.DiagnosticsRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		rs, err := s.Ctl.Diagnostics(ctx, req.Agent, func(r diagnostics.Result) { c.Emit(r) })
		if err != nil {
			return err
		}
		return c.Respond(rs)
	})
	m.Handle(control.OpTool, agentproto.Unary(func(ctx context.Context, req *control.ToolRequest) (*control.ToolReply, error) {
		return &control.ToolReply{Envelope: s.Ctl.RunTool(ctx, req.Agent, req.Tool, req.Args).JSONBytes()}, nil
	}))
	m.Handle(control.OpEndTurn, agentproto.Unary(func(ctx context.Context, req *control.EndTurnRequest) (*agentproto.Empty, error) {
		return &agentproto.Empty{}, s.Ctl.EndTurn(ctx, req.Agent)
	}))
	m.Handle(control.OpRemoveAgent, agentproto.Unary(func(ctx context.Context, req *api.RemoveAgentRequest) (*api.RemoveAgentResult, error) {
		r, err := s.Ctl.RemoveAgent(ctx, *req)
		return &r, err
	}))
	if pc, ok := s.Ctl.(api.PortCloser); ok {
		m.Handle(control.OpClosePorts, agentproto.Unary(func(ctx context.Context, req *api.ClosePortsRequest) (*api.ClosePortsResult, error) {
			r, err := pc.ClosePorts(ctx, *req)
			return &r, err
		}))
	}
	if cp, ok := s.Ctl.(api.Checkpointer); ok {
		m.Handle(control.OpCheckpointCreate, agentproto.Unary(func(ctx context.Context, req *api.CheckpointRequest) (*checkpoint.Meta, error) {
			r, err := cp.CreateCheckpoint(ctx, *req)
			return &r, err
		}))
		m.Handle(control.OpCheckpointList, agentproto.Unary(func(ctx context.Context, _ *agentproto.Empty) (*api.CheckpointList, error) {
			r, err := cp.ListCheckpoints(ctx)
			return &r, err
		}))
		m.Handle(control.OpCheckpointRestore, agentproto.Unary(func(ctx context.Context, req *api.CheckpointRequest) (*api.RestoreResult, error) {
			r, err := cp.RestoreCheckpoint(ctx, *req)
			return &r, err
		}))
		m.Handle(control.OpCheckpointRemove, agentproto.Unary(func(ctx context.Context, req *api.CheckpointRequest) (*agentproto.Empty, error) {
			return &agentproto.Empty{}, cp.RemoveCheckpoint(ctx, *req)
		}))
	}
	m.Handle(control.OpPluginInstall, func(ctx context.Context, c *agentproto.Call) error {
		var req api.PluginInstallRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		if err := s.Ctl.InstallPlugin(ctx, req, func(st tools.InstallStep) { c.Emit(st) }); err != nil {
			return err
		}
		return c.Respond(agentproto.Empty{})
	})
	m.Handle(control.OpPluginUninstall, agentproto.Unary(func(ctx context.Context, req *api.PluginUninstallRequest) (*control.UninstallReply, error) {
		deferred, err := s.Ctl.UninstallPlugin(ctx, *req)
		if err != nil {
			return nil, err
		}
		r := &control.UninstallReply{}
		if deferred != nil {
			r.Deferred = deferred.Error()
		}
		return r, nil
	}))
	m.Handle(control.OpPluginUninstallAll, func(ctx context.Context, c *agentproto.Call) error {
		var req control.PluginRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		if err := s.Ctl.UninstallPluginEverywhere(ctx, req.Plugin, func(line string) { c.Emit(line) }); err != nil {
			return err
		}
		return c.Respond(agentproto.Empty{})
	})
	m.Handle(control.OpShell, func(ctx context.Context, c *agentproto.Call) error {
		if s.Shell == nil {
			return fmt.Errorf("%w: this owner offers no terminals", agentproto.ErrUnsupported)
		}
		var req control.ShellRequest
		if err := c.Decode(&req); err != nil {
			return err
		}
		g, er, err := s.Shell(ctx, req)
		if err != nil {
			return err
		}
		er.Stdin = true // the client's keys
		return g.Peer.ForwardAs(ctx, c, agentproto.OpExec, er)
	})
	m.Handle(control.OpSecretsProvide, func(ctx context.Context, c *agentproto.Call) error {
		if s.ProvideSecrets == nil {
			return fmt.Errorf("%w: this owner takes no secrets from its clients", agentproto.ErrUnsupported)
		}
		conn, err := c.Accept()
		if err != nil {
			return err
		}
		s.ProvideSecrets(ctx, conn)
		return agentproto.ErrHijacked
	})
	m.HandleDefault(func(ctx context.Context, c *agentproto.Call) error {
		if !control.Relayed[c.Op] || s.Guest == nil {
			return fmt.Errorf("%w: %q is not an operation of the control socket", agentproto.ErrUnsupported, c.Op)
		}
		g, err := s.Guest(ctx)
		if err != nil {
			return err
		}
		return g.Peer.Forward(ctx, c)
	})
	return m
}
