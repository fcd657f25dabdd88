package hostcli

import (
	"context"
	"errors"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// errRunsInOwner: a call reached the stdio server's own environment that
// only the owner runs (a wiring bug, never an agent's doing).
var errRunsInOwner = errors.New("this tool runs in the sandbox's owner, not in the stdio server")

// inOwner stands, in the stdio server's tools environment, for what only
// the owner has: previews, checkpoints and reviews. That environment
// lists the agent's tools; every call of these runs in the owner
// (stdioInvoker), whose Host has all three. Without it the stdio listing
// would lack tools the owner runs.
type inOwner struct{}

var (
	_ tools.Exposer      = inOwner{}
	_ tools.Checkpointer = inOwner{}
	_ tools.Reviewer     = inOwner{}
)

func (inOwner) Expose(context.Context, agents.Agent, int) (string, error) {
	return "", errRunsInOwner
}

func (inOwner) AgentCheckpoint(context.Context, agents.Agent, string) (tools.CheckpointInfo, error) {
	return tools.CheckpointInfo{}, errRunsInOwner
}

func (inOwner) RequestReview(context.Context, agents.Agent, string, string) (int, string, error) {
	return 0, "", errRunsInOwner
}
