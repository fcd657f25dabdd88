package host

import (
	"context"
	"time"

	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
)

// serveMCP starts the owner's MCP HTTP server on mcpserver.DefaultAddr
// until ctx ends. Tool calls start the VM when it is stopped. A busy port
// is logged, not fatal: the VM works without MCP over HTTP.
func (h *Host) serveMCP(ctx context.Context) (stop func()) {
	logf := h.logf
	ln, err := mcpserver.Listen(mcpserver.DefaultAddr)
	if err != nil {
		logf("mcp: not serving HTTP: %v", err)
		return func() {}
	}
	hd := mcpserver.NewHTTPHandler(mcpserver.Config{Env: h.env, Invoker: recordingInvoker{h.env, h.activity, "http"}, Registry: h.reg, Version: h.version, Events: h.events})
	ctx, cancel := context.WithCancel(ctx)
	// Installs made elsewhere (the CLI, the bridge's plugin create) reach
	// this server's sessions as tools/list_changed.
	go mcpserver.WatchPlugins(ctx, h.env, 2*time.Second)
	go func() {
		if err := mcpserver.Serve(ctx, ln, hd); err != nil {
			logf("mcp: %v", err)
		}
	}()
	logf("mcp: serving agents at http://%s%s", mcpserver.DefaultAddr, mcpserver.Path)
	return func() { cancel(); hd.Close() }
}
