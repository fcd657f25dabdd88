package api

import (
	"context"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
)

// AgentCheckpointRequest names an agent (id, slug or name) and one of its
// checkpoints (Label; "" to create one named by the time).
type AgentCheckpointRequest struct {
	Agent string `json:"agent"`
	Label string `json:"label,omitempty"`
}

// AgentCheckpointList is an agent's checkpoints, oldest first.
type AgentCheckpointList struct {
	Agent       agents.Agent           `json:"agent"`
	Checkpoints []checkpoint.AgentMeta `json:"checkpoints"`
}

// AgentRestoreResult says what an agent restore did: Saved is the
// automatic checkpoint of the state it replaced.
type AgentRestoreResult struct {
	Restored checkpoint.AgentMeta `json:"restored"`
	Saved    checkpoint.AgentMeta `json:"saved"`
}

// ForkRequest asks for a new agent named New with a copy of Agent's home,
// views and settings.
type ForkRequest struct {
	Agent string `json:"agent"`
	New   string `json:"new"`
}

// ForkResult is the new agent and what the copy took.
type ForkResult struct {
	Agent   agents.Agent `json:"agent"`
	Bytes   int64        `json:"bytes"`
	Seconds float64      `json:"seconds"`
}

// AgentCheckpointer is implemented by an owner that keeps agent
// checkpoints and forks agents.
type AgentCheckpointer interface {
	CreateAgentCheckpoint(ctx context.Context, req AgentCheckpointRequest) (checkpoint.AgentMeta, error)
	ListAgentCheckpoints(ctx context.Context, req AgentCheckpointRequest) (AgentCheckpointList, error)
	RestoreAgentCheckpoint(ctx context.Context, req AgentCheckpointRequest) (AgentRestoreResult, error)
	RemoveAgentCheckpoint(ctx context.Context, req AgentCheckpointRequest) error
	ForkAgent(ctx context.Context, req ForkRequest) (ForkResult, error)
}
