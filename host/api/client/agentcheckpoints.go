package client

import (
	"context"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

var _ api.AgentCheckpointer = (*Client)(nil)

// CreateAgentCheckpoint has the owner take an agent checkpoint.
func (c *Client) CreateAgentCheckpoint(ctx context.Context, req api.AgentCheckpointRequest) (checkpoint.AgentMeta, error) {
	var r checkpoint.AgentMeta
	err := c.call(ctx, control.OpAgentCheckpointCreate, req, &r, nil, false)
	return r, err
}

// ListAgentCheckpoints lists an agent's checkpoints.
func (c *Client) ListAgentCheckpoints(ctx context.Context, req api.AgentCheckpointRequest) (api.AgentCheckpointList, error) {
	var r api.AgentCheckpointList
	err := c.call(ctx, control.OpAgentCheckpointList, req, &r, nil, true)
	return r, err
}

// RestoreAgentCheckpoint has the owner put an agent checkpoint back.
func (c *Client) RestoreAgentCheckpoint(ctx context.Context, req api.AgentCheckpointRequest) (api.AgentRestoreResult, error) {
	var r api.AgentRestoreResult
	err := c.call(ctx, control.OpAgentCheckpointRestore, req, &r, nil, false)
	return r, err
}

// RemoveAgentCheckpoint has the owner delete an agent checkpoint.
func (c *Client) RemoveAgentCheckpoint(ctx context.Context, req api.AgentCheckpointRequest) error {
	return c.call(ctx, control.OpAgentCheckpointRemove, req, &agentproto.Empty{}, nil, false)
}

// ForkAgent has the owner copy an agent into a new one.
func (c *Client) ForkAgent(ctx context.Context, req api.ForkRequest) (api.ForkResult, error) {
	var r api.ForkResult
	err := c.call(ctx, control.OpAgentFork, req, &r, nil, false)
	return r, err
}
