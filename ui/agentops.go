package ui

import (
	"context"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// AgentOps is how the window changes agents and projects: through its
// api.Controller (the Host itself when the window owns the data folder,
// the client of the owner's control socket otherwise). The owner is the
// one writer of agents.json and projects.json; the window only reads them.
type AgentOps interface {
	api.AgentOps
	RemoveAgent(ctx context.Context, req api.RemoveAgentRequest) (api.RemoveAgentResult, error)
}

// AgentChanger is a Backend whose owner changes agents and projects.
type AgentChanger interface {
	AgentOps() AgentOps
}

// AgentOps is the owner's: the controller the backend drives.
func (c *Controlled) AgentOps() AgentOps { return c.ctl }

var errNoOps = errors.New("this window can't change agents or projects: it has no owner to ask")

// opsOf is b's AgentOps, nil when it has none.
func opsOf(b Backend) AgentOps {
	if ac, ok := b.(AgentChanger); ok {
		return ac.AgentOps()
	}
	return nil
}

// removedText says what removing a did beyond the registry.
func removedText(a agents.Agent, r api.RemoveAgentResult) string {
	forgot := "; its memories and config are deleted"
	if r.ForgetError != "" {
		forgot = "; not everything the app kept for it was deleted: " + r.ForgetError
	}
	if r.ViewsError != "" {
		forgot += "; its project views were not all deleted: " + r.ViewsError
	}
	if n := r.Checkpoints; n > 0 {
		what := "1 checkpoint"
		if n != 1 {
			what = fmt.Sprintf("%d checkpoints", n)
		}
		forgot += fmt.Sprintf("; deleted its %s (%s)", what, diskquota.Human(r.CheckpointBytes))
	}
	if r.CheckpointsError != "" {
		forgot += "; its checkpoints were not all deleted: " + r.CheckpointsError
	}
	if !r.UserRemoved {
		return "the VM is not running, so its Linux user stays until the VM is reset; its home is kept" + forgot
	}
	return "stopped its processes and deleted the Linux user " + a.User() + "; its home is kept" + forgot
}
