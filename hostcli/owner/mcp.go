package owner

import (
	"context"
	"encoding/json"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
)

// serveMCP starts the owner's MCP HTTP server on mcpserver.DefaultAddr
// until ctx ends. Tool calls start the VM when it is stopped. A busy port
// is logged, not fatal: the VM works without MCP over HTTP.
func serveMCP(ctx context.Context, host *ToolHost, version string, ev *events.Store, logf func(string, ...any)) (stop func()) {
	ln, err := mcpserver.Listen(mcpserver.DefaultAddr)
	if err != nil {
		logf("mcp: not serving HTTP: %v", err)
		return func() {}
	}
	h := mcpserver.NewHTTPHandler(mcpserver.Config{Env: host.Env, Registry: host.Registry, Version: version, Events: ev})
	ctx, cancel := context.WithCancel(ctx)
	// Installs made elsewhere (the CLI, the bridge's plugin create) reach
	// this server's sessions as tools/list_changed.
	go mcpserver.WatchPlugins(ctx, host.Env, 2*time.Second)
	go func() {
		if err := mcpserver.Serve(ctx, ln, h); err != nil {
			logf("mcp: %v", err)
		}
	}()
	logf("mcp: serving agents at http://%s%s", mcpserver.DefaultAddr, mcpserver.Path)
	return func() { cancel(); h.Close() }
}

// Runner is the tools.Runner of a process that doesn't own the VM (the
// stdio server of `osaurus-sandbox mcp`, the CLI's task runner): tools
// run in the owner, under the limits every transport shares.
type Runner struct{ Ctl Controller }

// RunTool runs the tool in the owner.
func (r Runner) RunTool(ctx context.Context, a agents.Agent, name string, args json.RawMessage) envelope.Envelope {
	return r.Ctl.RunTool(ctx, a.ID, name, args)
}

// EndTurn ends the agent's turn in the owner; a failure only means the
// next call counts against the current turn.
func (r Runner) EndTurn(ctx context.Context, agentID string) { r.Ctl.EndTurn(ctx, agentID) }
