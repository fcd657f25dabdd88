package hostcli

import (
	"context"
	"fmt"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/diskquota"
)

// hostStores is what an agent keeps in the host-side stores, beside each
// store's per-agent bound, as `agent show` prints it; the owner reads
// them. A store that could not be read is -1 and named in Problems.
type hostStores struct{ control.AgentStores }

func (c *cli) agentStores(ctx context.Context, a agents.Agent) hostStores {
	ctl, err := c.owner(ctx)
	if err == nil {
		defer ctl.Close()
		var s control.AgentStores
		if s, err = ctl.AgentStores(ctx, a.Slug); err == nil {
			return hostStores{s}
		}
	}
	s := control.AgentStores{ConfigKeys: -1, ConfigBytes: -1, LogBytes: -1, Events: -1, Memories: -1, Tasks: -1, CreatedPlugins: -1,
		Problems: []string{fmt.Sprintf("the stores: %v", err)}}
	return hostStores{s}
}

// lines is h as the lines of `agent show`.
func (h hostStores) lines() string {
	n := func(v int) string {
		if v < 0 {
			return "?"
		}
		return fmt.Sprint(v)
	}
	size := func(v int64) string {
		if v < 0 {
			return "?"
		}
		return diskquota.Human(v)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  host-side stores (each bounded per agent):\n")
	fmt.Fprintf(&b, "    config:             %s of %d keys, %s of %s\n", n(h.ConfigKeys), h.MaxConfigKeys, size(int64(h.ConfigBytes)), diskquota.Human(int64(h.MaxConfigBytes)))
	fmt.Fprintf(&b, "    log:                %s of %s\n", size(h.LogBytes), diskquota.Human(h.MaxLogBytes))
	fmt.Fprintf(&b, "    events:             %s of %d\n", n(h.Events), h.MaxEvents)
	fmt.Fprintf(&b, "    memories:           %s of %d\n", n(h.Memories), h.MaxMemories)
	fmt.Fprintf(&b, "    task records:       %s of %d\n", n(h.Tasks), h.MaxTasks)
	fmt.Fprintf(&b, "    plugins it created: %s of %d\n", n(h.CreatedPlugins), h.MaxCreatedPlugins)
	for _, p := range h.Problems {
		fmt.Fprintf(&b, "    (could not read %s)\n", p)
	}
	return b.String()
}
