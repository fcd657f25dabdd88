package server

import (
	"context"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// agentCheckpointOps serves agent checkpoints and fork when the owner
// keeps them.
func (s *Server) agentCheckpointOps(m *agentproto.Mux) {
	cp, ok := s.Ctl.(api.AgentCheckpointer)
	if !ok {
		return
	}
	m.Handle(control.OpAgentCheckpointCreate, agentproto.Unary(func(ctx context.Context, req *api.AgentCheckpointRequest) (*checkpoint.AgentMeta, error) {
		r, err := cp.CreateAgentCheckpoint(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpAgentCheckpointList, agentproto.Unary(func(ctx context.Context, req *api.AgentCheckpointRequest) (*api.AgentCheckpointList, error) {
		r, err := cp.ListAgentCheckpoints(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpAgentCheckpointRestore, agentproto.Unary(func(ctx context.Context, req *api.AgentCheckpointRequest) (*api.AgentRestoreResult, error) {
		r, err := cp.RestoreAgentCheckpoint(ctx, *req)
		return &r, err
	}))
	m.Handle(control.OpAgentCheckpointRemove, agentproto.Unary(func(ctx context.Context, req *api.AgentCheckpointRequest) (*agentproto.Empty, error) {
		return &agentproto.Empty{}, cp.RemoveAgentCheckpoint(ctx, *req)
	}))
	m.Handle(control.OpAgentFork, agentproto.Unary(func(ctx context.Context, req *api.ForkRequest) (*api.ForkResult, error) {
		r, err := cp.ForkAgent(ctx, *req)
		return &r, err
	}))
}
