package host

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/provision/ext4"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// ErrNoMemory: the owner could not open the agents' memory (memory.db).
var ErrNoMemory = agentproto.Class(agentproto.ErrUnavailable, "agent memory is not available")

// ErrNoEventLog: the owner could not open the event log (events.db).
var ErrNoEventLog = agentproto.Class(agentproto.ErrUnavailable, "the event log is not available")

// DataOwner is the owner's side of api.DataOps: the agents' memory, the
// event log, the bridge's config and logs, the tasks and the plugin
// library's writes, each with this one writer. The Host has one over its
// stores and ToolHost.
type DataOwner struct {
	Paths    config.Paths
	MemoryDB *memory.Store // nil: memory is unavailable
	EventLog *events.Store // nil: no event log
	// Tools runs tasks' tools (as a stdio session's run), knows the
	// agents and uninstalls plugins.
	Tools *ToolHost
	// Secrets holds the model server's key for tasks; nil: none.
	Secrets *secrets.Store
	Logf    func(string, ...any)
}

func (d *DataOwner) logf(f string, a ...any) {
	if d.Logf != nil {
		d.Logf(f, a...)
	}
}

// toolHostInvoker runs a task's tools through the ToolHost, as a stdio
// session's calls run (ToolHost.RunTool: the registry as it is now, the
// activity log, the VM started when stopped).
type toolHostInvoker struct{ th *ToolHost }

func (i toolHostInvoker) RunTool(ctx context.Context, a agents.Agent, name string, args json.RawMessage) envelope.Envelope {
	return i.th.RunTool(ctx, a.ID, name, args)
}

func (i toolHostInvoker) EndTurn(ctx context.Context, agentID string) { i.th.EndTurn(ctx, agentID) }

func (d *DataOwner) memoryStore() (*memory.Store, error) {
	if d.MemoryDB == nil {
		return nil, fmt.Errorf("%w: the owner could not open %s (its log says why)", ErrNoMemory, d.Paths.MemoryDB())
	}
	return d.MemoryDB, nil
}

// Memories lists an agent's memories, newest first, or the best matches
// of a search.
func (d *DataOwner) Memories(ctx context.Context, q control.MemoryQuery) (control.MemoryList, error) {
	var l control.MemoryList
	mem, err := d.memoryStore()
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
func (d *DataOwner) RemoveMemory(ctx context.Context, req control.MemoryRemove) (control.MemoryRemoved, error) {
	mem, err := d.memoryStore()
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

func (d *DataOwner) eventLog() error {
	if d.EventLog == nil {
		return fmt.Errorf("%w: the owner could not open %s (its log says why)", ErrNoEventLog, d.Paths.EventsDB())
	}
	return nil
}

// Events lists the events f selects, oldest first.
func (d *DataOwner) Events(ctx context.Context, f control.EventFilter) ([]control.Event, error) {
	if err := d.eventLog(); err != nil {
		return nil, err
	}
	return d.EventLog.List(ctx, f)
}

// FollowEvents calls fn with what f selects, then each new event.
func (d *DataOwner) FollowEvents(ctx context.Context, f control.EventFilter, fn func(control.Event) error) error {
	if err := d.eventLog(); err != nil {
		return err
	}
	return d.EventLog.Follow(ctx, f, fn)
}

// LastEventID is the id of the newest event.
func (d *DataOwner) LastEventID(ctx context.Context) (int64, error) {
	if err := d.eventLog(); err != nil {
		return 0, err
	}
	return d.EventLog.LastID(ctx)
}

// EmitEvent adds an event of an agent, as the host (no plugin).
func (d *DataOwner) EmitEvent(ctx context.Context, req control.EventEmit) (control.Event, error) {
	if err := d.eventLog(); err != nil {
		return control.Event{}, err
	}
	return d.EventLog.Emit(ctx, req.Agent, req.Type, req.Payload)
}

// AgentLog is an agent's log buffer.
func (d *DataOwner) AgentLog(ctx context.Context, agent string) (string, error) {
	return (&bridge.LogStore{Dir: d.Paths.AgentLogDir()}).Read(agent)
}

// AgentStores is what an agent keeps in the host-side stores, beside each
// store's bound. A store that can't be read is -1 and named in Problems.
func (d *DataOwner) AgentStores(ctx context.Context, agent string) (control.AgentStores, error) {
	s := control.AgentStores{MaxConfigKeys: bridge.MaxConfigKeys, MaxConfigBytes: bridge.MaxConfigBytes, MaxTasks: runner.MaxTasksPerAgent,
		MaxCreatedPlugins: tools.MaxAgentPlugins}
	a, err := d.Tools.Registry.Get(agent)
	if err != nil {
		return s, err
	}
	problem := func(what string, err error) {
		s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", what, err))
	}
	if s.ConfigKeys, s.ConfigBytes, err = (&bridge.ConfigStore{Dir: d.Paths.BridgeConfigDir()}).Usage(a.Slug); err != nil {
		s.ConfigKeys, s.ConfigBytes = -1, -1
		problem("config", err)
	}
	logs := &bridge.LogStore{Dir: d.Paths.AgentLogDir()}
	s.MaxLogBytes = logs.Max()
	if s.LogBytes, err = logs.Size(a.Slug); err != nil {
		s.LogBytes = -1
		problem("log", err)
	}
	s.Events = -1
	if err := d.eventLog(); err != nil {
		problem("events", err)
	} else {
		s.MaxEvents = d.EventLog.MaxPerAgent()
		if s.Events, err = d.EventLog.Count(ctx, a.Slug); err != nil {
			s.Events = -1
			problem("events", err)
		}
	}
	s.Memories = -1
	if mem, err := d.memoryStore(); err != nil {
		problem("memory", err)
	} else {
		s.MaxMemories = mem.MaxPerAgent()
		if s.Memories, err = mem.Count(ctx, a.Slug); err != nil {
			s.Memories = -1
			problem("memory", err)
		}
	}
	if ts, err := datadir.TaskStore(d.Paths).List(a.Slug); err != nil {
		s.Tasks = -1
		problem("tasks", err)
	} else {
		s.Tasks = len(ts)
	}
	if lib, err := d.library(); err != nil {
		s.CreatedPlugins = -1
		problem("plugins", err)
	} else {
		s.CreatedPlugins = tools.CreatedPlugins(lib, a.ID)
	}
	return s, nil
}

// ImagePlan describes what provisioning the manifest's image fetches
// (the built-in image's when none is named), asking its servers for the
// sizes.
func (d *DataOwner) ImagePlan(ctx context.Context, req control.ImagePlanRequest) (control.ImagePlan, error) {
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
