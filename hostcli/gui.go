package hostcli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/hostcli/owner"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/ui"
)

// gui opens the management window. The window's process owns the VM
// unless another process (a `serve` daemon) already does; then the window
// drives that one.
func (c *cli) gui() int {
	if runtime.GOOS == "linux" && os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		fmt.Fprintf(c.err, "osaurus-sandbox: %v\n\n", ui.ErrNoDisplay)
		fmt.Fprintf(c.out, usage, c.paths.Root, config.HomeEnv)
		return ExitUsage
	}
	ctx := context.Background()
	reg, err := agents.Open(c.paths.AgentsJSON())
	if err != nil {
		return c.fail(err)
	}
	logf := func(f string, a ...any) { fmt.Fprintf(c.err, f+"\n", a...) }
	// Own the VM, or drive the process that does: either way through one
	// Controller. An owning window calls its manager directly.
	var ctl owner.Controller
	o := ui.Options{Registry: reg, Workspace: c.paths.Workspace(), Secrets: owner.Secrets, Prompts: owner.SecretPrompts, AgentLog: owner.BridgeLog(c.paths).Read}
	own, err := owner.Own(ctx, owner.Options{Paths: c.paths, Kind: "app", Logf: logf, Version: Version})
	switch {
	case errors.Is(err, owner.ErrOwned):
		cl, err := owner.Dial(ctx, c.paths)
		if err != nil {
			return c.fail(err)
		}
		defer cl.Close()
		ctl = cl // the owner keeps the VM when the window quits
	case err != nil:
		return c.fail(err)
	default:
		defer own.Close()
		ctl = own
		o.Quit = func(ctx context.Context) error { return own.Manager().Close(ctx, true) }
		if cfg, err := config.LoadSandbox(c.paths.SandboxJSON()); err == nil {
			o.AutoStart = cfg.AutoStart
		}
	}
	o.OnAgentRemoved = func(ctx context.Context, a agents.Agent) (string, error) {
		// Memories and bridge config go with the agent, VM or not.
		forgot := "; its memories and config are deleted"
		if err := owner.ForgetAgent(ctx, c.paths, a.Slug); err != nil {
			forgot = "; not everything the app kept for it was deleted: " + err.Error()
		}
		g, err := ctl.Guest(ctx)
		if err != nil {
			return "the VM is not running, so its Linux user stays until the VM is reset; its home is kept" + forgot, nil
		}
		if err := tools.RemoveUser(ctx, g, a, false); err != nil {
			return "", err
		}
		return "stopped its processes and deleted the Linux user " + a.User() + "; its home is kept" + forgot, nil
	}
	o.Memory, _ = owner.OpenMemory(ctx, c.paths) // nil shows memory as unavailable
	o.Events = owner.EventsOrNil(ctx, c.paths, logf)
	o.AgentUsage = c.oneAgentUsage
	b, err := ui.NewBackend(ctx, ctl, c.paths)
	if err != nil {
		return c.fail(err)
	}
	defer b.Close()
	o.Backend = b
	if err := ui.Run(o); err != nil {
		return c.fail(err)
	}
	return ExitOK
}
