package host

import (
	"context"
	"fmt"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
)

// serveMCP starts the owner's MCP HTTP server on the mcpPort setting's
// address until ctx ends. Tool calls start the VM when it is stopped. A
// busy port is not fatal (the VM works without MCP over HTTP): Status
// says so, with the fix.
func (h *Host) serveMCP(ctx context.Context) (stop func()) {
	logf := h.logf
	cfg, err := config.LoadSandbox(h.paths.SandboxJSON())
	if err != nil {
		logf("mcp: %v; using the default port", err)
	}
	addr := cfg.MCPAddr()
	ln, err := mcpserver.Listen(addr)
	if err != nil {
		h.mcpErr = fmt.Sprintf("MCP over HTTP is off: %v; another program (another osaurus-sandbox?) has the port: pick a free one with `osaurus-sandbox config set mcpPort PORT` and restart", err)
		logf("mcp: not serving HTTP: %v", err)
		return func() {}
	}
	h.mcpURL = "http://" + addr + mcpserver.Path
	mc := mcpserver.Config{Env: h.env, Invoker: recordingInvoker{h.env, h.activity, "http"}, Registry: h.reg, Version: h.version}
	if h.events != nil { // a nil store in the interface would not read as none
		mc.Events = h.events
	}
	hd := mcpserver.NewHTTPHandler(mc)
	ctx, cancel := context.WithCancel(ctx)
	// Installs made elsewhere (the CLI, the bridge's plugin create) reach
	// this server's sessions as tools/list_changed.
	go mcpserver.WatchPlugins(ctx, h.env, 2*time.Second)
	go func() {
		if err := mcpserver.Serve(ctx, ln, h.healthMux(hd)); err != nil {
			logf("mcp: %v", err)
		}
	}()
	logf("mcp: serving agents at %s", h.mcpURL)
	return func() { cancel(); hd.Close() }
}
