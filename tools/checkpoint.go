package tools

import (
	"context"
	"regexp"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Checkpointer takes an agent's checkpoint of itself (sandbox_checkpoint):
// its home, project views and settings, bounded in count and in disk
// (counted in its quota) by the owner.
type Checkpointer interface {
	AgentCheckpoint(ctx context.Context, a agents.Agent, label string) (CheckpointInfo, error)
}

// CheckpointInfo describes the checkpoint taken.
type CheckpointInfo struct {
	Label     string  `json:"label"`
	Bytes     int64   `json:"bytes"`
	DiskBytes int64   `json:"disk_bytes"`
	Seconds   float64 `json:"seconds"`
}

type checkpointArgs struct {
	Label string `json:"label"`
}

var checkpointLabelRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func init() {
	catalog = append(catalog, &tool{
		Spec: Spec{
			Name: "sandbox_checkpoint",
			Description: "Save a checkpoint of your home, your project views and your settings under a label, before something risky. " +
				"Only the user can put it back (`osaurus-sandbox agent restore`), and only yours: other agents' files are not in it. " +
				"Returns {label, bytes, disk_bytes, seconds}. At most 5 of your own; they count in your disk quota.",
			InputSchema: object(
				str("label", "1–64 letters, digits, '.', '_' or '-', starting with a letter or digit; default the time."),
			),
		},
		gate: gateCheckpoint, service: serviceWrite, bind: bind(takeCheckpoint),
	})
}

func takeCheckpoint(ctx context.Context, c *call, a checkpointArgs) (any, error) {
	if a.Label != "" && !checkpointLabelRE.MatchString(a.Label) {
		return nil, envelope.ArgErrorf("label", "1–64 letters, digits, '.', '_' or '-', starting with a letter or digit", "label %q is not a checkpoint label", a.Label)
	}
	if err := c.env.rate.Allow(c.agent.ID, serviceWrite); err != nil {
		return nil, err
	}
	return c.env.checkpointer.AgentCheckpoint(ctx, c.agent, a.Label)
}
