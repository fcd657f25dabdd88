// Package api is how every process drives the VM of one data folder: the
// Controller interface and its request types. The owner process's
// host.Host implements it directly; client.Client implements it in any
// other process over the control socket (server.Server is the owner's
// side). The CLI, the stdio MCP server and the window use nothing else.
package api

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// ErrNoOwner: no process owns the sandbox right now.
var ErrNoOwner = agentproto.Class(agentproto.ErrUnavailable, "no sandbox app is running")

// ErrOwned: another process already owns this data dir.
var ErrOwned = agentproto.Class(agentproto.ErrExists, "another osaurus-sandbox process owns this data dir")

// ErrOwnerGone: the owner process exited while a call was in flight.
var ErrOwnerGone = agentproto.Class(agentproto.ErrUnavailable, "the osaurus-sandbox process that owned the sandbox has exited")

// Op names a lifecycle operation.
type Op string

// Lifecycle operations, also the control socket's op names.
const (
	OpProvision Op = control.OpProvision
	OpStart     Op = control.OpStart
	OpStop      Op = control.OpStop
	OpReset     Op = control.OpReset
	OpRemove    Op = control.OpRemove
	OpSuspend   Op = control.OpSuspend
	OpResume    Op = control.OpResume
)

// Status is the sandbox's state as the owner sees it, and who the owner is.
type Status struct {
	control.Status
	// Owner is the kind of process that owns the VM: "app", "serve",
	// "background" (started by the CLI; `stop` ends it), "cli" (a command
	// that owns the data files for its duration, no VM), or "none".
	Owner string `json:"owner"`
	// Adoptable is set when no process owns a VM that still runs (its
	// owner died): the next `start` or `stop` adopts it.
	Adoptable bool `json:"adoptable,omitempty"`
	// MCPURL is where the owner serves MCP over HTTP; MCPError says why it
	// doesn't (the port is taken), with what to do.
	MCPURL   string `json:"mcpUrl,omitempty"`
	MCPError string `json:"mcpError,omitempty"`
	// IdleExit is set for a background owner that exits when unused (the
	// backgroundIdleMinutes setting).
	IdleExit *IdleExit `json:"idleExit,omitempty"`
	// SecretStore is the owner's secretStore setting: "client" asks a
	// front end driving it from afar to offer its machine's secrets
	// (control.OpSecretsProvide). Empty from an owner before it.
	SecretStore string `json:"secretStore,omitempty"`
}

// IdleExit says when a background owner stops its VM and exits: after
// Minutes with no client on the control socket, no MCP HTTP request and
// no awake VM. IdleSince is when that began (nil while in use).
type IdleExit struct {
	Minutes   float64    `json:"minutes"`
	IdleSince *time.Time `json:"idleSince,omitempty"`
}

// RemoveAgentRequest asks the owner to remove an agent (an id, slug or
// name) altogether: its registry entry (its token stops working), its
// project views, its agent checkpoints, its memories, its bridge config
// and, while the VM runs,
// its Linux user (with its home when Purge is set; without a VM, Purge
// deletes the home's host folder).
type RemoveAgentRequest struct {
	Agent string `json:"agent"`
	Purge bool   `json:"purge,omitempty"`
}

// ClosePortsRequest names the previews to close: Agent's (a slug; every
// agent's when empty), only Port's when not 0.
type ClosePortsRequest struct {
	Agent string `json:"agent,omitempty"`
	Port  int    `json:"port,omitempty"`
}

// ClosePortsResult says how many previews closed.
type ClosePortsResult struct {
	Closed int `json:"closed"`
}

// PortCloser is implemented by an owner that relays agents' previews.
type PortCloser interface {
	ClosePorts(ctx context.Context, req ClosePortsRequest) (ClosePortsResult, error)
}

// CheckpointRequest names a sandbox checkpoint ("" to create: a name
// from the time).
type CheckpointRequest struct {
	Name string `json:"name,omitempty"`
}

// CheckpointList is every sandbox checkpoint, oldest first.
type CheckpointList struct {
	Checkpoints []checkpoint.Meta `json:"checkpoints"`
}

// RestoreResult says what a restore did: Saved is the automatic
// checkpoint of the state it replaced; Restarted that the VM was running
// and was started again.
type RestoreResult struct {
	Restored  checkpoint.Meta `json:"restored"`
	Saved     checkpoint.Meta `json:"saved"`
	Restarted bool            `json:"restarted,omitempty"`
}

// Checkpointer is implemented by an owner that keeps sandbox checkpoints
// (the root disk, agents' homes and views, the owner's agent files).
type Checkpointer interface {
	CreateCheckpoint(ctx context.Context, req CheckpointRequest) (checkpoint.Meta, error)
	ListCheckpoints(ctx context.Context) (CheckpointList, error)
	RestoreCheckpoint(ctx context.Context, req CheckpointRequest) (RestoreResult, error)
	RemoveCheckpoint(ctx context.Context, req CheckpointRequest) error
}

// RemoveAgentResult says what RemoveAgent did.
type RemoveAgentResult struct {
	// Agent is the agent removed from the registry.
	Agent agents.Agent `json:"agent"`
	// ViewsError says its project views could not all be deleted ("" when
	// they were).
	ViewsError string `json:"viewsError,omitempty"`
	// UserRemoved: the VM was running and the Linux user is gone.
	UserRemoved bool `json:"userRemoved,omitempty"`
	// HomeDeleted: Purge deleted the home (in the VM, or its host folder
	// while the VM is stopped).
	HomeDeleted bool `json:"homeDeleted,omitempty"`
	// ForgetError says what the host kept for the agent could not be
	// deleted ("" when all of it was).
	ForgetError string `json:"forgetError,omitempty"`
	// Checkpoints is how many agent checkpoints were deleted with it and
	// CheckpointBytes what they took on disk (they held copies of its
	// home and views).
	Checkpoints     int   `json:"checkpoints,omitempty"`
	CheckpointBytes int64 `json:"checkpointBytes,omitempty"`
	// CheckpointsError says its checkpoints could not all be deleted (""
	// when they were).
	CheckpointsError string `json:"checkpointsError,omitempty"`
}

// PluginInstallRequest installs a library plugin for an agent.
type PluginInstallRequest struct {
	Agent  string `json:"agent"`  // id
	Plugin string `json:"plugin"` // library id
	// Version is the library version to install; 0 means the current one.
	Version int `json:"version,omitempty"`
}

// PluginUninstallRequest uninstalls a plugin from an agent.
type PluginUninstallRequest struct {
	Agent  string `json:"agent"` // id
	Plugin string `json:"plugin"`
	// IfRunning leaves the VM as it is: when it is stopped only the
	// install record goes and the folder waits (the CLI's behaviour);
	// otherwise a stopped VM is started to remove the folder too.
	IfRunning bool `json:"ifRunning,omitempty"`
}

// Controller drives the sandbox of one data dir.
type Controller interface {
	// Status returns a snapshot.
	Status(ctx context.Context) (Status, error)
	// Subscribe calls fn with every status change, from any goroutine,
	// until cancel is called. fn must not block.
	Subscribe(fn func(Status)) (cancel func())
	// Lifecycle runs op, reporting status changes (with provisioning
	// progress) to onStatus (may be nil) as they happen.
	Lifecycle(ctx context.Context, op Op, onStatus func(control.Status)) (control.Status, error)
	// Quit stops the VM and ends the owner process.
	Quit(ctx context.Context) error
	// Diagnostics runs the standard checks, reporting each as it finishes.
	// The agent-user check runs as each agent, or only as agent (an id,
	// slug or name) when it is set.
	Diagnostics(ctx context.Context, agent string, onResult func(diagnostics.Result)) ([]diagnostics.Result, error)

	// Exec runs a command in the running VM (the CLI's exec), streaming
	// its output. It, NetLog and Usage fail with an
	// agentproto.ErrUnavailable error when the VM is not running; they
	// never start it.
	Exec(ctx context.Context, req agentproto.ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (agentproto.ExitStatus, error)
	// NetLog reads the guest's log of refused connections.
	NetLog(ctx context.Context, req agentproto.NetLogRequest) (agentproto.NetLogResponse, error)
	// Usage reads the agents' resource use in the guest.
	Usage(ctx context.Context, req agentproto.UsageRequest) (agentproto.UsageResponse, error)

	// RunTool runs a sandbox_* tool as an agent (by id) in the owner,
	// under the limits every transport shares, starting the VM when it is
	// stopped. Failures are envelopes.
	RunTool(ctx context.Context, agentID, tool string, args json.RawMessage) envelope.Envelope
	// EndTurn starts a new turn of the agent for the exec limiter.
	EndTurn(ctx context.Context, agentID string) error

	// RemoveAgent removes an agent and everything the owner keeps for it.
	RemoveAgent(ctx context.Context, req RemoveAgentRequest) (RemoveAgentResult, error)
	// InstallPlugin installs a library plugin for an agent through the
	// owner's tools environment, reporting each step before it runs. A
	// failure names the step and leaves nothing.
	InstallPlugin(ctx context.Context, req PluginInstallRequest, progress func(tools.InstallStep)) error
	// UninstallPlugin removes the plugin's tools and folder for an agent;
	// deferred says why the folder waits for the VM.
	UninstallPlugin(ctx context.Context, req PluginUninstallRequest) (deferred, err error)
	// UninstallPluginEverywhere uninstalls a plugin from every agent that
	// installed it, before the library deletes it; report hears what it
	// did per agent.
	UninstallPluginEverywhere(ctx context.Context, pluginID string, report func(string)) error
	// Previews are the ports agents exposed, relayed on the owner's
	// loopback (none from an owner without a VM).
	Previews(ctx context.Context) ([]Preview, error)

	// AgentOps change the agents and their projects (agents.go).
	AgentOps
	// DataOps change the plugin library, memory, events, bridge config
	// and tasks (data.go).
	DataOps

	// Close releases the controller (not the VM).
	Close()
}

// ToolInvoker is the tools.Invoker of a process that doesn't own the VM (the
// stdio server of `osaurus-sandbox mcp`, the CLI's task runner): tools
// run in the owner, under the limits every transport shares.
type ToolInvoker struct{ Ctl Controller }

// RunTool runs the tool in the owner.
func (r ToolInvoker) RunTool(ctx context.Context, a agents.Agent, name string, args json.RawMessage) envelope.Envelope {
	return r.Ctl.RunTool(ctx, a.ID, name, args)
}

// EndTurn ends the agent's turn in the owner; a failure only means the
// next call counts against the current turn.
func (r ToolInvoker) EndTurn(ctx context.Context, agentID string) { r.Ctl.EndTurn(ctx, agentID) }
