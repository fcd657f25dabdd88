package host

import (
	"context"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/ext4"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// ErrNoMemory: the owner could not open the agents' memory (memory.db).
var ErrNoMemory = agentproto.Class(agentproto.ErrUnavailable, "agent memory is not available")

// ErrNoEventLog: the owner could not open the event log (events.db).
var ErrNoEventLog = agentproto.Class(agentproto.ErrUnavailable, "the event log is not available")

func (h *Host) memoryStore() (*memory.Store, error) {
	if h.mem == nil {
		return nil, fmt.Errorf("%w: the owner could not open %s (its log says why)", ErrNoMemory, h.paths.MemoryDB())
	}
	return h.mem, nil
}

// Memories lists an agent's memories, newest first, or the best matches
// of a search.
func (h *Host) Memories(ctx context.Context, q control.MemoryQuery) (control.MemoryList, error) {
	var l control.MemoryList
	mem, err := h.memoryStore()
	if err != nil {
		return l, err
	}
	if q.Search != "" {
		l.Entries, err = mem.Query(ctx, q.Agent, q.Search, memory.TopN)
	} else {
		l.Entries, err = mem.List(ctx, q.Agent, q.Limit)
	}
	if err != nil {
		return l, err
	}
	if l.Count, err = mem.Count(ctx, q.Agent); err != nil {
		return l, err
	}
	l.Max = mem.MaxPerAgent()
	return l, nil
}

// RemoveMemory forgets one entry of an agent, or every one.
func (h *Host) RemoveMemory(ctx context.Context, req control.MemoryRemove) (control.MemoryRemoved, error) {
	mem, err := h.memoryStore()
	if err != nil {
		return control.MemoryRemoved{}, err
	}
	if req.All {
		n, err := mem.RemoveAll(ctx, req.Agent)
		return control.MemoryRemoved{Removed: n}, err
	}
	if err := mem.Remove(ctx, req.Agent, req.ID); err != nil {
		return control.MemoryRemoved{}, err
	}
	return control.MemoryRemoved{Removed: 1}, nil
}

func (h *Host) eventLog() error {
	if h.events == nil {
		return fmt.Errorf("%w: the owner could not open %s (its log says why)", ErrNoEventLog, h.paths.EventsDB())
	}
	return nil
}

// Events lists the events f selects, oldest first.
func (h *Host) Events(ctx context.Context, f control.EventFilter) ([]control.Event, error) {
	if err := h.eventLog(); err != nil {
		return nil, err
	}
	return h.events.List(ctx, f)
}

// FollowEvents calls fn with what f selects, then each new event.
func (h *Host) FollowEvents(ctx context.Context, f control.EventFilter, fn func(control.Event) error) error {
	if err := h.eventLog(); err != nil {
		return err
	}
	return h.events.Follow(ctx, f, fn)
}

// LastEventID is the id of the newest event.
func (h *Host) LastEventID(ctx context.Context) (int64, error) {
	if err := h.eventLog(); err != nil {
		return 0, err
	}
	return h.events.LastID(ctx)
}

// EmitEvent adds an event of an agent, as the host (no plugin).
func (h *Host) EmitEvent(ctx context.Context, req control.EventEmit) (control.Event, error) {
	if err := h.eventLog(); err != nil {
		return control.Event{}, err
	}
	return h.events.Emit(ctx, req.Agent, req.Type, req.Payload)
}

// AgentLog is an agent's log buffer.
func (h *Host) AgentLog(ctx context.Context, agent string) (string, error) {
	return (&bridge.LogStore{Dir: h.paths.AgentLogDir()}).Read(agent)
}

// AgentStores is what an agent keeps in the host-side stores, beside each
// store's bound. A store that can't be read is -1 and named in Problems.
func (h *Host) AgentStores(ctx context.Context, agent string) (control.AgentStores, error) {
	s := control.AgentStores{MaxConfigKeys: bridge.MaxConfigKeys, MaxConfigBytes: bridge.MaxConfigBytes, MaxTasks: runner.MaxTasksPerAgent,
		MaxCreatedPlugins: tools.MaxAgentPlugins}
	a, err := h.reg.Get(agent)
	if err != nil {
		return s, err
	}
	problem := func(what string, err error) {
		s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", what, err))
	}
	if s.ConfigKeys, s.ConfigBytes, err = (&bridge.ConfigStore{Dir: h.paths.BridgeConfigDir()}).Usage(a.Slug); err != nil {
		s.ConfigKeys, s.ConfigBytes = -1, -1
		problem("config", err)
	}
	logs := &bridge.LogStore{Dir: h.paths.AgentLogDir()}
	s.MaxLogBytes = logs.Max()
	if s.LogBytes, err = logs.Size(a.Slug); err != nil {
		s.LogBytes = -1
		problem("log", err)
	}
	s.Events = -1
	if err := h.eventLog(); err != nil {
		problem("events", err)
	} else {
		s.MaxEvents = h.events.MaxPerAgent()
		if s.Events, err = h.events.Count(ctx, a.Slug); err != nil {
			s.Events = -1
			problem("events", err)
		}
	}
	s.Memories = -1
	if mem, err := h.memoryStore(); err != nil {
		problem("memory", err)
	} else {
		s.MaxMemories = mem.MaxPerAgent()
		if s.Memories, err = mem.Count(ctx, a.Slug); err != nil {
			s.Memories = -1
			problem("memory", err)
		}
	}
	if ts, err := datadir.TaskStore(h.paths).List(a.Slug); err != nil {
		s.Tasks = -1
		problem("tasks", err)
	} else {
		s.Tasks = len(ts)
	}
	if h.lib == nil || h.lib.Library == nil {
		s.CreatedPlugins = -1
		problem("plugins", fmt.Errorf("the plugin library %s could not be opened", h.paths.PluginsDir()))
	} else {
		s.CreatedPlugins = tools.CreatedPlugins(h.lib.Library, a.ID)
	}
	return s, nil
}

// ImagePlan describes what provisioning the manifest's image fetches
// (the built-in image's when none is named), asking its servers for the
// sizes.
func (h *Host) ImagePlan(ctx context.Context, req control.ImagePlanRequest) (control.ImagePlan, error) {
	u := req.Manifest
	if u == "" {
		u = provision.DefaultManifestURL()
	}
	m, err := provision.ResolveManifest(ctx, nil, u)
	if err != nil {
		return control.ImagePlan{}, err
	}
	p := control.ImagePlan{Distro: m.Distro, Arch: m.Arch, Packages: m.Packages, DiskSize: ext4.DefaultSize, Downloads: []control.Download{}}
	for _, d := range provision.Downloads(ctx, nil, m) {
		p.Downloads = append(p.Downloads, control.Download{URL: d.URL, Size: d.Size})
	}
	return p, nil
}
