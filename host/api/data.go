package api

import (
	"context"
	"io"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// DataOps are the owner's operations on the plugin library, the agents'
// memory, the event log, the bridge config and the tasks: the owner is the
// one writer of each, and no other process opens them.
type DataOps interface {
	// Memories lists an agent's memories, or searches them.
	Memories(ctx context.Context, q control.MemoryQuery) (control.MemoryList, error)
	// RemoveMemory forgets one entry of an agent, or all of them.
	RemoveMemory(ctx context.Context, req control.MemoryRemove) (control.MemoryRemoved, error)
	// Events lists the events f selects, oldest first.
	Events(ctx context.Context, f control.EventFilter) ([]control.Event, error)
	// FollowEvents calls fn with every event f selects, then with each
	// new one, until ctx ends or fn fails.
	FollowEvents(ctx context.Context, f control.EventFilter, fn func(control.Event) error) error
	// LastEventID is the id of the newest event (0 when there is none).
	LastEventID(ctx context.Context) (int64, error)
	// EmitEvent adds an event of an agent, as the host.
	EmitEvent(ctx context.Context, req control.EventEmit) (control.Event, error)
	// AgentStores is what an agent (a slug) keeps in the host-side stores.
	AgentStores(ctx context.Context, agent string) (control.AgentStores, error)
	// AgentLog is an agent's (a slug) log buffer.
	AgentLog(ctx context.Context, agent string) (string, error)
	// ConsoleLog reads the VM's console log (a host file the VM writes):
	// to its end, or with Follow on as it grows until ctx ends or the
	// reader is closed. With no log yet and no Follow it fails with an
	// agentproto.ErrNotFound error.
	ConsoleLog(ctx context.Context, req control.ConsoleLogRequest) (io.ReadCloser, error)
	// ImagePlan describes what provisioning the image of a manifest
	// fetches, asking its servers for sizes.
	ImagePlan(ctx context.Context, req control.ImagePlanRequest) (control.ImagePlan, error)

	// Tasks lists the agent runner's tasks, newest first.
	Tasks(ctx context.Context, q control.TaskQuery) ([]runner.Task, error)
	// Task reads one task.
	Task(ctx context.Context, id string) (runner.Task, error)
	// CancelTask asks the task's runner to stop it.
	CancelTask(ctx context.Context, id string) (runner.Task, error)
	// RunTask works a task in the owner, with its tools and limits,
	// calling onUpdate at each change. When ctx ends first the task is
	// interrupted; CancelTask cancels it.
	RunTask(ctx context.Context, req control.TaskRun, onUpdate func(runner.Task)) (runner.Task, error)

	// PluginLibraryOps write the plugin library and install records.
	PluginLibraryOps
	// PluginLibraryReader reads the library and the installs.
	PluginLibraryReader
	// SettingsOps read and write sandbox.json.
	SettingsOps
}

// EventLog is the owner's event log as a follower reads it
// (mcpserver.EventLog): the Controller's events under the store's names.
type EventLog struct{ Ctl Controller }

// LastID is the id of the newest event.
func (l EventLog) LastID(ctx context.Context) (int64, error) { return l.Ctl.LastEventID(ctx) }

// Follow follows the owner's event log.
func (l EventLog) Follow(ctx context.Context, f control.EventFilter, fn func(control.Event) error) error {
	return l.Ctl.FollowEvents(ctx, f, fn)
}
