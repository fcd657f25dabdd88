package hostcli

import (
	"context"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// agentSource is where an agent command reads the agents: this machine's
// agents.json, read-only and with no owner needed, or through a remote
// context the far side's owner (ListAgents, GetAgent), whose agents
// these are. Changes go through c.owner either way.
type agentSource interface {
	list(ctx context.Context) ([]agents.Agent, error)
	get(ctx context.Context, ref string) (agents.Agent, error)
	// diskUsage is the size of each agent's home, by slug.
	diskUsage(ctx context.Context, list []agents.Agent) map[string]int64
	// token is the agent's MCP token; "" through a remote context, where
	// a client reaches the agent over ssh, not with the far side's token.
	token(id string) (string, error)
	// checkpoints is how many checkpoints a has, and their size on disk.
	checkpoints(ctx context.Context, a agents.Agent) (n int, disk int64, err error)
}

// lookupAgent is the agent ref names (name, slug or id), read where
// agentSource reads: the far owner through a remote context.
func (c *cli) lookupAgent(ctx context.Context, ref string) (agents.Agent, error) {
	src, err := c.agentSource()
	if err != nil {
		return agents.Agent{}, err
	}
	return src.get(ctx, ref)
}

func (c *cli) agentSource() (agentSource, error) {
	if c.remote != nil {
		return &farAgents{c: c}, nil
	}
	reg, err := c.openAgents()
	if err != nil {
		return nil, err
	}
	return localAgents{c, reg}, nil
}

type localAgents struct {
	c   *cli
	reg *agents.Registry
}

func (l localAgents) list(context.Context) ([]agents.Agent, error) { return l.reg.List(), nil }
func (l localAgents) get(_ context.Context, ref string) (agents.Agent, error) {
	return l.reg.Get(ref)
}
func (l localAgents) token(id string) (string, error) { return l.reg.Token(id) }
func (l localAgents) diskUsage(_ context.Context, list []agents.Agent) map[string]int64 {
	return agentDiskUsage(l.c.paths, list)
}

// checkpoints reads the files: the owner may not run yet, and asking
// would start one.
func (l localAgents) checkpoints(_ context.Context, a agents.Agent) (int, int64, error) {
	return checkpoint.AgentStore{Paths: l.c.paths}.AgentUsage(a)
}

// farAgents asks the far side's owner; its list (with the disk use the
// owner measured) is asked once per command.
type farAgents struct {
	c    *cli
	last *api.AgentList
}

func (f *farAgents) list(ctx context.Context) ([]agents.Agent, error) {
	if f.last == nil {
		ctl, err := f.c.owner(ctx)
		if err != nil {
			return nil, err
		}
		l, err := ctl.ListAgents(ctx)
		if err != nil {
			return nil, f.c.farError(err, "list agents")
		}
		f.last = &l
	}
	return f.last.Agents, nil
}

func (f *farAgents) get(ctx context.Context, ref string) (agents.Agent, error) {
	ctl, err := f.c.owner(ctx)
	if err != nil {
		return agents.Agent{}, err
	}
	a, err := ctl.GetAgent(ctx, ref)
	return a, f.c.farError(err, "look agents up")
}

func (f *farAgents) token(string) (string, error) { return "", nil }

func (f *farAgents) diskUsage(ctx context.Context, _ []agents.Agent) map[string]int64 {
	if _, err := f.list(ctx); err != nil {
		return nil
	}
	return f.last.DiskUsed
}

func (f *farAgents) checkpoints(ctx context.Context, a agents.Agent) (int, int64, error) {
	cp, done, err := f.c.agentCheckpointer(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	l, err := cp.ListAgentCheckpoints(ctx, api.AgentCheckpointRequest{Agent: a.ID})
	if err != nil {
		return 0, 0, err
	}
	var disk int64
	for _, m := range l.Checkpoints {
		disk += m.DiskBytes
	}
	return len(l.Checkpoints), disk, nil
}
