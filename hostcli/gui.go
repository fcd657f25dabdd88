package hostcli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/control"
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
	o := ui.Options{Registry: reg, OnAgentRemoved: func(ctx context.Context, a agents.Agent) (string, error) {
		g, err := c.runningGuest(ctx)
		if err != nil {
			return "the VM is not running, so its Linux user stays until the VM is reset; its home is kept", nil
		}
		if err := tools.RemoveUser(ctx, g, a, false); err != nil {
			return "", err
		}
		return "stopped its processes and deleted the Linux user " + a.User() + "; its home is kept", nil
	}}
	o.Memory, _ = OpenMemory(ctx, c.paths) // nil shows memory as unavailable
	o.Events = eventsOrNil(ctx, c.paths, logf)
	m, stop, err := Own(ctx, c.paths, "app", logf, nil)
	switch {
	case errors.Is(err, control.ErrOwned):
		r, err := ui.NewRemote(ctx, c.paths, time.Second)
		if err != nil {
			return c.fail(err)
		}
		defer r.Close()
		o.Backend = r // the owner keeps the VM when the window quits
	case err != nil:
		return c.fail(err)
	default:
		defer stop()
		o.Backend = ui.NewLocal(m, DiagEnv(c.paths))
		o.Quit = func(ctx context.Context) error { return m.Close(ctx, true) }
		if cfg, err := config.LoadSandbox(c.paths.SandboxJSON()); err == nil {
			o.AutoStart = cfg.AutoStart
		}
	}
	if err := ui.Run(o); err != nil {
		return c.fail(err)
	}
	return ExitOK
}
