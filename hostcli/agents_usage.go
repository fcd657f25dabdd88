package hostcli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
)

// usageWait bounds asking the guest for usage: a listing must not hang on
// a busy VM.
const usageWait = 10 * time.Second

// agentView is an agent as `agent list --json` and `agent show --json`
// print it: its settings, the limits in force and, while the VM runs, its
// resource use.
type agentView struct {
	agents.Agent
	Limits agentproto.Limits `json:"limits"`
	Usage  *agents.Usage     `json:"usage,omitempty"` // absent while the VM is stopped
	// DiskQuotaBytes is diskGB in bytes; DiskUsedBytes the agent's home's
	// size as the owner last measured it (or as measured now).
	DiskQuotaBytes int64 `json:"diskQuotaBytes"`
	DiskUsedBytes  int64 `json:"diskUsedBytes"`
	// Stores is what the agent keeps on the host (agent show only).
	Stores *hostStores `json:"hostStores,omitempty"`
}

// agentUsage asks the running guest for the agents' resource use. It
// returns nil, and why, when the VM is not running or can't say; an agent
// that has run nothing since the VM started is missing from the map.
func (c *cli) agentUsage(ctx context.Context, list []agents.Agent) (map[string]agents.Usage, string) {
	ctx, cancel := context.WithTimeout(ctx, usageWait)
	defer cancel()
	g, err := c.running(ctx)
	if err != nil {
		return nil, "the VM is not running"
	}
	users := make([]string, 0, len(list))
	for _, a := range list {
		users = append(users, a.User())
	}
	resp, err := g.Usage(ctx, agentproto.UsageRequest{Users: users})
	if err != nil {
		return nil, fmt.Sprintf("the VM did not report usage: %v", err)
	}
	out := make(map[string]agents.Usage, len(resp.Users))
	for _, u := range resp.Users {
		out[u.User] = agents.UsageFrom(u)
	}
	return out, ""
}

func views(list []agents.Agent, usage map[string]agents.Usage, disk map[string]int64) []agentView {
	out := make([]agentView, 0, len(list))
	for _, a := range list {
		v := agentView{Agent: a, Limits: a.Resources.Limits(), DiskQuotaBytes: a.DiskQuota(), DiskUsedBytes: disk[a.Slug]}
		if usage != nil {
			u := usage[a.User()] // zero: nothing run since the VM started
			v.Usage = &u
		}
		out = append(out, v)
	}
	return out
}

// agentShowJSON prints one agent as `agent list --json` does.
func (c *cli) agentShowJSON(ctx context.Context, src agentSource, ref string) int {
	a, err := src.get(ctx, ref)
	if err != nil {
		return c.fail(err)
	}
	usage, _ := c.agentUsage(ctx, []agents.Agent{a})
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	v := views([]agents.Agent{a}, usage, src.diskUsage(ctx, []agents.Agent{a}))[0]
	st := c.agentStores(ctx, a)
	v.Stores = &st
	enc.Encode(v)
	return ExitOK
}
