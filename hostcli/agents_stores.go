package hostcli

import (
	"context"
	"fmt"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// hostStores is what an agent keeps in the host-side stores, beside each
// store's per-agent bound, as `agent show` prints it. A store that could
// not be read is -1 and named in Problems.
type hostStores struct {
	ConfigKeys     int      `json:"configKeys"`
	ConfigBytes    int      `json:"configBytes"`
	LogBytes       int64    `json:"logBytes"`
	Events         int      `json:"events"`
	Memories       int      `json:"memories"`
	Tasks          int      `json:"tasks"`
	CreatedPlugins int      `json:"createdPlugins"`
	Problems       []string `json:"problems,omitempty"`

	MaxConfigKeys     int   `json:"maxConfigKeys"`
	MaxConfigBytes    int   `json:"maxConfigBytes"`
	MaxLogBytes       int64 `json:"maxLogBytes"`
	MaxEvents         int   `json:"maxEvents"`
	MaxMemories       int   `json:"maxMemories"`
	MaxTasks          int   `json:"maxTasks"`
	MaxCreatedPlugins int   `json:"maxCreatedPlugins"`
}

func (c *cli) agentStores(ctx context.Context, a agents.Agent) hostStores {
	h := hostStores{MaxConfigKeys: bridge.MaxConfigKeys, MaxConfigBytes: bridge.MaxConfigBytes, MaxTasks: runner.MaxTasksPerAgent,
		MaxCreatedPlugins: tools.MaxAgentPlugins}
	problem := func(what string, err error) {
		h.Problems = append(h.Problems, fmt.Sprintf("%s: %v", what, err))
	}
	var err error
	if h.ConfigKeys, h.ConfigBytes, err = (&bridge.ConfigStore{Dir: c.paths.BridgeConfigDir()}).Usage(a.Slug); err != nil {
		h.ConfigKeys, h.ConfigBytes = -1, -1
		problem("config", err)
	}
	logs := (&bridge.LogStore{Dir: c.paths.AgentLogDir()})
	h.MaxLogBytes = logs.Max()
	if h.LogBytes, err = logs.Size(a.Slug); err != nil {
		h.LogBytes = -1
		problem("log", err)
	}
	if ev, err := events.Open(ctx, c.paths.EventsDB(), events.Options{}); err != nil {
		h.Events = -1
		problem("events", err)
	} else {
		defer ev.Close()
		h.MaxEvents = ev.MaxPerAgent()
		if h.Events, err = ev.Count(ctx, a.Slug); err != nil {
			h.Events = -1
			problem("events", err)
		}
	}
	if mem, err := memory.Open(ctx, c.paths.MemoryDB(), memory.Options{}); err != nil {
		h.Memories = -1
		problem("memory", err)
	} else {
		defer mem.Close()
		h.MaxMemories = mem.MaxPerAgent()
		if h.Memories, err = mem.Count(ctx, a.Slug); err != nil {
			h.Memories = -1
			problem("memory", err)
		}
	}
	if ts, err := datadir.TaskStore(c.paths).List(a.Slug); err != nil {
		h.Tasks = -1
		problem("tasks", err)
	} else {
		h.Tasks = len(ts)
	}
	if lib, err := plugins.OpenLibrary(c.paths.PluginsDir()); err != nil {
		h.CreatedPlugins = -1
		problem("plugins", err)
	} else {
		h.CreatedPlugins = tools.CreatedPlugins(lib, a.ID)
	}
	return h
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
