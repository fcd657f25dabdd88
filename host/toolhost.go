package host

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/checkpoint"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// ToolHost is the part of the owner that works on agents in the VM:
// their tools, commands, plugins and removal, all through one tools
// environment. Host embeds the one over its manager; tests build one over
// a VM of their own.
type ToolHost struct {
	Paths    config.Paths
	Env      *tools.Env
	Registry *agents.Registry
	// Running is the running VM's agent; it never starts the VM and
	// fails with an agentproto.ErrUnavailable error when none runs.
	Running func(ctx context.Context) (*agentproto.Client, error)
	// Quiet, when set, is the awake VM's agent for the window's
	// background reads (usage, the refusal log): they neither wake a
	// sleeping VM nor keep it awake; done ends the call. Nil: Running.
	Quiet func() (g *agentproto.Client, done func(), err error)
	// Memory is the agents' memory store (nil when it can't open).
	Memory *memory.Store
	// Ports, when set, holds the agents' previews; removing an agent
	// closes its own.
	Ports *Ports
	// Activity records each agent's last tool call (nil: not recorded).
	Activity *ActivityLog

	// checkpointsMu orders writing an agent's checkpoints with deleting
	// them at its removal: a checkpoint begun before the removal would
	// otherwise land after it, a copy of the removed agent's files that
	// nothing lists.
	checkpointsMu sync.Mutex
}

// Exec runs a command in the running VM.
func (h *ToolHost) Exec(ctx context.Context, req agentproto.ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (agentproto.ExitStatus, error) {
	g, err := h.Running(ctx)
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	return g.Exec(ctx, req, stdin, stdout, stderr)
}

// Terminal builds the exec of a terminal the user opened through the
// control socket (control.OpShell): as the agent req.Agent, exactly as its
// tool calls run, or without one as root. It never starts the VM.
func (h *ToolHost) Terminal(ctx context.Context, req control.ShellRequest) (*agentproto.Client, agentproto.ExecRequest, error) {
	g, err := h.Running(ctx)
	if err != nil {
		return nil, agentproto.ExecRequest{}, err
	}
	if req.Agent == "" {
		return g, tools.TerminalRoot(req.Workdir, req.Argv, req.Term, req.Size), nil
	}
	a, err := h.Registry.Get(req.Agent)
	if err != nil {
		return nil, agentproto.ExecRequest{}, err
	}
	er, err := h.Env.TerminalRequest(ctx, g, a, req.Workdir, req.Argv, req.Term, req.Size)
	return g, er, err
}

// NetLog reads the guest's log of refused connections.
func (h *ToolHost) NetLog(ctx context.Context, req agentproto.NetLogRequest) (agentproto.NetLogResponse, error) {
	g, done, err := h.quiet(ctx)
	if err != nil {
		return agentproto.NetLogResponse{}, err
	}
	defer done()
	return g.NetLog(ctx, req)
}

// quiet is Quiet, or Running without one.
func (h *ToolHost) quiet(ctx context.Context) (*agentproto.Client, func(), error) {
	if h.Quiet != nil {
		return h.Quiet()
	}
	g, err := h.Running(ctx)
	return g, func() {}, err
}

// Usage reads the agents' resource use in the guest.
func (h *ToolHost) Usage(ctx context.Context, req agentproto.UsageRequest) (agentproto.UsageResponse, error) {
	g, done, err := h.quiet(ctx)
	if err != nil {
		return agentproto.UsageResponse{}, err
	}
	defer done()
	return g.Usage(ctx, req)
}

// RunTool runs tool as the agent with id agentID, as the registry says it
// is now.
func (h *ToolHost) RunTool(ctx context.Context, agentID, tool string, args json.RawMessage) envelope.Envelope {
	// Every change to the agents goes through this owner's registry
	// (api.AgentOps), so it holds from this call on with no re-read.
	a, err := h.Registry.Get(agentID)
	if err != nil {
		return envelope.Failf(tool, envelope.ToolNotFound, "agent %s: %v; its tools are gone", agentID, err)
	}
	if h.Activity != nil {
		h.Activity.Record(a.ID, tool, "stdio")
	}
	return h.Env.RunTool(ctx, a, tool, args)
}

// EndTurn starts a new turn of agentID for the exec limiter.
func (h *ToolHost) EndTurn(ctx context.Context, agentID string) error {
	h.Env.EndTurn(ctx, agentID)
	return nil
}

// RemoveAgent removes the agent from the registry (its token stops
// working at once), then deletes what the host keeps for it: its project
// views, its agent checkpoints, its memories and bridge config under its
// slug and, while the VM
// runs, its Linux user; the tools environment forgets the user, so an
// agent of the same name gets a fresh one. Without a VM, Purge deletes the
// home's host folder.
func (h *ToolHost) RemoveAgent(ctx context.Context, req api.RemoveAgentRequest) (api.RemoveAgentResult, error) {
	var r api.RemoveAgentResult
	a, err := h.Registry.Remove(req.Agent)
	if err != nil {
		return r, err
	}
	r.Agent = a
	h.Env.CloseSessions(a.ID)
	if h.Ports != nil {
		h.Ports.Close(a.Slug, 0)
	}
	if err := (projects.Views{Paths: h.Paths}).DropAgent(a); err != nil {
		r.ViewsError = err.Error()
	}
	if err := bridge.ForgetAgent(ctx, h.Memory, &bridge.ConfigStore{Dir: h.Paths.BridgeConfigDir()}, a.Slug); err != nil {
		r.ForgetError = err.Error()
	}
	// Its checkpoints hold copies of its home and views: kept, they would
	// leak disk and the files the user removed it to be rid of.
	h.checkpointsMu.Lock()
	r.Checkpoints, r.CheckpointBytes, err = checkpoint.AgentStore{Paths: h.Paths}.RemoveAllAgent(a)
	h.checkpointsMu.Unlock()
	if err != nil {
		r.CheckpointsError = err.Error()
	}
	g, err := h.Running(ctx)
	if err != nil {
		if req.Purge {
			// The workspace is a host folder: the home can go without the VM.
			if err := os.RemoveAll(filepath.Join(h.Paths.AgentHomes(), a.Slug)); err != nil {
				return r, err
			}
			r.HomeDeleted = true
		}
		return r, nil
	}
	if err := tools.RemoveUser(ctx, g, a, req.Purge); err != nil {
		return r, err
	}
	h.Env.ForgetUser(a)
	r.UserRemoved, r.HomeDeleted = true, req.Purge
	return r, nil
}
