package client

import (
	"context"
	"encoding/json"
	"io"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// ownerError is a failure of the owner's data operation with the owner's
// words ("memory entry not found"), not the transport's ("agent
// ctl.memory_remove: …"); it keeps its class.
type ownerError struct{ re *agentproto.RemoteError }

func (e ownerError) Error() string { return e.re.Message }
func (e ownerError) Unwrap() error { return e.re }

func plain(err error) error {
	if re, ok := err.(*agentproto.RemoteError); ok {
		return ownerError{re}
	}
	return err
}

// dataCall is a data operation: reads and idempotent writes retry once on
// a new connection when the last one had ended.
func (c *Client) dataCall(ctx context.Context, op string, req, resp any, retry bool) error {
	return plain(c.call(ctx, op, req, resp, nil, retry))
}

// Memories lists or searches an agent's memories in the owner.
func (c *Client) Memories(ctx context.Context, q control.MemoryQuery) (control.MemoryList, error) {
	var r control.MemoryList
	err := c.dataCall(ctx, control.OpMemoryList, q, &r, true)
	return r, err
}

// RemoveMemory forgets memories in the owner.
func (c *Client) RemoveMemory(ctx context.Context, req control.MemoryRemove) (control.MemoryRemoved, error) {
	var r control.MemoryRemoved
	err := c.dataCall(ctx, control.OpMemoryRemove, req, &r, false)
	return r, err
}

// Events lists events of the owner's log.
func (c *Client) Events(ctx context.Context, f control.EventFilter) ([]control.Event, error) {
	r := []control.Event{}
	err := c.dataCall(ctx, control.OpEventsList, f, &r, true)
	return r, err
}

// FollowEvents follows the owner's event log until ctx ends, fn fails or
// the owner goes away.
func (c *Client) FollowEvents(ctx context.Context, f control.EventFilter, fn func(control.Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fnErr error
	err := c.call(ctx, control.OpEventsFollow, f, nil, func(raw json.RawMessage) {
		if fnErr != nil {
			return
		}
		var e control.Event
		if fnErr = json.Unmarshal(raw, &e); fnErr == nil {
			fnErr = fn(e)
		}
		if fnErr != nil {
			cancel() // the caller stops following
		}
	}, false)
	if fnErr != nil {
		return fnErr
	}
	return plain(err)
}

// LastEventID is the id of the owner's newest event.
func (c *Client) LastEventID(ctx context.Context) (int64, error) {
	var r control.EventsLast
	err := c.dataCall(ctx, control.OpEventsLast, agentproto.Empty{}, &r, true)
	return r.ID, err
}

// EmitEvent adds an event in the owner's log.
func (c *Client) EmitEvent(ctx context.Context, req control.EventEmit) (control.Event, error) {
	var r control.Event
	err := c.dataCall(ctx, control.OpEventsEmit, req, &r, false)
	return r, err
}

// AgentStores is what an agent keeps in the owner's stores.
func (c *Client) AgentStores(ctx context.Context, agent string) (control.AgentStores, error) {
	var r control.AgentStores
	err := c.dataCall(ctx, control.OpAgentStores, control.AgentRef{Agent: agent}, &r, true)
	return r, err
}

// AgentLog is an agent's log buffer, read by the owner.
func (c *Client) AgentLog(ctx context.Context, agent string) (string, error) {
	var r control.AgentLog
	err := c.dataCall(ctx, control.OpAgentLog, control.AgentRef{Agent: agent}, &r, true)
	return r.Text, err
}

// ConsoleLog reads the VM's console log over a raw pipe of the owner.
func (c *Client) ConsoleLog(ctx context.Context, req control.ConsoleLogRequest) (io.ReadCloser, error) {
	return c.openConn(ctx, control.OpConsoleLog, req)
}

// ImagePlan asks the owner what provisioning an image fetches.
func (c *Client) ImagePlan(ctx context.Context, req control.ImagePlanRequest) (control.ImagePlan, error) {
	var r control.ImagePlan
	err := c.dataCall(ctx, control.OpImagePlan, req, &r, true)
	return r, err
}

// Tasks lists the owner's tasks.
func (c *Client) Tasks(ctx context.Context, q control.TaskQuery) ([]runner.Task, error) {
	r := []runner.Task{}
	err := c.dataCall(ctx, control.OpTaskList, q, &r, true)
	return r, err
}

// Task reads one of the owner's tasks.
func (c *Client) Task(ctx context.Context, id string) (runner.Task, error) {
	var r runner.Task
	err := c.dataCall(ctx, control.OpTaskGet, control.TaskRef{ID: id}, &r, true)
	return r, err
}

// CancelTask asks the owner to stop a task.
func (c *Client) CancelTask(ctx context.Context, id string) (runner.Task, error) {
	var r runner.Task
	err := c.dataCall(ctx, control.OpTaskCancel, control.TaskRef{ID: id}, &r, true)
	return r, err
}

// RunTask works a task in the owner; ending ctx (or this process) leaves
// it interrupted there, CancelTask cancels it.
func (c *Client) RunTask(ctx context.Context, req control.TaskRun, onUpdate func(runner.Task)) (runner.Task, error) {
	var r runner.Task
	err := c.call(ctx, control.OpTaskRun, req, &r, func(raw json.RawMessage) {
		var t runner.Task
		if json.Unmarshal(raw, &t) == nil && onUpdate != nil {
			onUpdate(t)
		}
	}, false)
	return r, plain(err)
}

// SavePlugin has the owner save a recipe in the library.
func (c *Client) SavePlugin(ctx context.Context, req api.PluginSaveRequest) (api.PluginSaved, error) {
	var r api.PluginSaved
	err := c.dataCall(ctx, control.OpPluginSave, req, &r, false)
	return r, err
}

// DuplicatePlugin has the owner copy a plugin.
func (c *Client) DuplicatePlugin(ctx context.Context, id string) (api.PluginSaved, error) {
	var r api.PluginSaved
	err := c.dataCall(ctx, control.OpPluginDuplicate, control.PluginRequest{Plugin: id}, &r, false)
	return r, err
}

// RemovePlugin has the owner uninstall a plugin everywhere and delete it.
func (c *Client) RemovePlugin(ctx context.Context, id string, report func(string)) (api.PluginRemoved, error) {
	var r api.PluginRemoved
	err := c.call(ctx, control.OpPluginRemove, control.PluginRequest{Plugin: id}, &r, func(raw json.RawMessage) {
		var line string
		if json.Unmarshal(raw, &line) == nil && report != nil {
			report(line)
		}
	}, false)
	return r, plain(err)
}

// RepairPlugins has the owner repair the install records.
func (c *Client) RepairPlugins(ctx context.Context) (api.PluginRepairs, error) {
	var r api.PluginRepairs
	err := c.dataCall(ctx, control.OpPluginRepair, agentproto.Empty{}, &r, false)
	return r, err
}

// PluginLibrary asks the owner for its library, or one plugin of it, or
// an agent's installs. An owner older than the op answers
// agentproto.ErrUnsupported.
func (c *Client) PluginLibrary(ctx context.Context, req control.PluginLibraryRequest) (api.PluginLibrary, error) {
	var r api.PluginLibrary
	err := c.dataCall(ctx, control.OpPluginLibrary, req, &r, true)
	return r, err
}

// Settings reads the owner's sandbox.json. An owner older than the op
// answers agentproto.ErrUnsupported (as SaveSettings and Previews).
func (c *Client) Settings(ctx context.Context) (api.SettingsFile, error) {
	var r api.SettingsFile
	err := c.dataCall(ctx, control.OpSettings, agentproto.Empty{}, &r, true)
	return r, err
}

// SaveSettings has the owner change its sandbox.json.
func (c *Client) SaveSettings(ctx context.Context, req api.SettingsSave) (api.SettingsFile, error) {
	var r api.SettingsFile
	err := c.dataCall(ctx, control.OpSettingsSave, req, &r, false)
	return r, err
}

// Previews asks the owner for the ports its agents exposed.
func (c *Client) Previews(ctx context.Context) ([]api.Preview, error) {
	r := []api.Preview{}
	err := c.dataCall(ctx, control.OpPreviews, agentproto.Empty{}, &r, true)
	return r, err
}
