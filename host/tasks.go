package host

import (
	"context"
	"math"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// Tasks lists the runner's tasks, newest first (a task whose process
// died is marked interrupted as it is read).
func (d *DataOwner) Tasks(ctx context.Context, q control.TaskQuery) ([]runner.Task, error) {
	ts, err := datadir.TaskStore(d.Paths).List(q.Agent)
	if ts == nil {
		ts = []runner.Task{}
	}
	return ts, err
}

// Task reads one task.
func (d *DataOwner) Task(ctx context.Context, id string) (runner.Task, error) {
	return datadir.TaskStore(d.Paths).Get(id)
}

// CancelTask asks the runner working the task to stop it (it looks twice
// a second).
func (d *DataOwner) CancelTask(ctx context.Context, id string) (runner.Task, error) {
	return datadir.TaskStore(d.Paths).RequestCancel(id)
}

// RunTask works a task with this owner's tools, under the limits every
// transport shares (tool calls go through RunTool, as a stdio session's
// do). Its runner is the call's own: when ctx ends first (the caller went
// away), closing it leaves the task interrupted.
func (d *DataOwner) RunTask(ctx context.Context, req control.TaskRun, onUpdate func(runner.Task)) (runner.Task, error) {
	r := datadir.NewRunner(d.Paths, d.Secrets, d.Tools.Registry, d.Tools.Env, toolHostInvoker{d.Tools}, nil, d.logf)
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
