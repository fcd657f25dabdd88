package host

import (
	"context"
	"math"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// Tasks lists the runner's tasks, newest first (a task whose process
// died is marked interrupted as it is read).
func (h *Host) Tasks(ctx context.Context, q control.TaskQuery) ([]runner.Task, error) {
	ts, err := datadir.TaskStore(h.paths).List(q.Agent)
	if ts == nil {
		ts = []runner.Task{}
	}
	return ts, err
}

// Task reads one task.
func (h *Host) Task(ctx context.Context, id string) (runner.Task, error) {
	return datadir.TaskStore(h.paths).Get(id)
}

// CancelTask asks the runner working the task to stop it (it looks twice
// a second).
func (h *Host) CancelTask(ctx context.Context, id string) (runner.Task, error) {
	return datadir.TaskStore(h.paths).RequestCancel(id)
}

// RunTask works a task with this owner's tools, under the limits every
// transport shares (tool calls go through RunTool, as a stdio session's
// do). Its runner is the call's own: when ctx ends first (the caller went
// away), closing it leaves the task interrupted.
func (h *Host) RunTask(ctx context.Context, req control.TaskRun, onUpdate func(runner.Task)) (runner.Task, error) {
	r := datadir.NewRunner(h.paths, h.secrets, h.reg, h.env, api.ToolInvoker{Ctl: h}, nil, h.logf)
	defer r.Close()
	t, err := r.Start(req.Agent, req.Task, req.Source, onUpdate)
	if err != nil {
		return t, err
	}
	if t, err = r.Wait(ctx, t.ID, math.MaxInt64); err != nil || !t.Finished() {
		r.Close()
		if err == nil {
			err = ctx.Err()
		}
		return t, err
	}
	return t, nil
}
