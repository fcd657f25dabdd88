package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/hostcli"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools/secretprompt"
	"github.com/osaurus/osaurus-sandbox/ui"
)

// gui opens the management window. The window's process owns the VM
// unless another process (a `serve` daemon) already does; then the window
// drives that one. Either way it goes through one api.Controller.
func gui(ctx context.Context, p config.Paths, stderr io.Writer) error {
	if runtime.GOOS == "linux" && os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return hostcli.UsageError{Err: ui.ErrNoDisplay}
	}
	logf := func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	// The window reads the agents; it changes them, and the projects,
	// through ctl, whose owner is their one writer.
	o := ui.Options{}
	var ctl api.Controller
	var pluginChanges func(func()) func()
	h, err := host.New(ctx, host.Options{Paths: p, Kind: "app", Logf: logf, Version: hostcli.Version})
	switch {
	case errors.Is(err, api.ErrOwned):
		cl, err := client.Dial(ctx, p)
		if err != nil {
			return err
		}
		defer cl.Close()
		ctl = cl // the owner keeps the VM when the window quits
		if o.Registry, err = agents.OpenReadOnly(p.AgentsJSON()); err != nil {
			return err
		}
		sec := secrets.ForDataDir(p)
		o.Secrets, o.Prompts = sec, &secretprompt.Broker{Store: sec, Pages: &secretprompt.Pages{Store: sec}}
	case err != nil:
		return err
	default:
		defer h.Close()
		ctl = h
		o.Registry = h.Registry()
		// The owner's keychain and prompts: a secret typed in the window
		// is one its redaction knows.
		o.Secrets, o.Prompts = h.Secrets(), h.Prompts()
		pluginChanges = h.Tools().SubscribePlugins
		o.Quit = func(ctx context.Context) error { return h.Manager().Close(ctx, true) }
		if cfg, err := config.LoadSandbox(p.SandboxJSON()); err == nil {
			o.AutoStart = cfg.AutoStart
		}
	}
	// The memory, the event log and the agents' logs are the owner's:
	// this process's Host, or the owner's over the control socket.
	o.Memory, o.Events = ctl, ctl
	o.AgentLog = func(slug string) (string, error) { return ctl.AgentLog(ctx, slug) }
	o.AgentUsage = func(ctx context.Context, a agents.Agent) (agents.Usage, error) { return agentUsage(ctx, ctl, a) }
	b, err := ui.NewBackend(ctx, ctl, p)
	if err != nil {
		return err
	}
	defer b.Close()
	b.PluginChanges = pluginChanges
	o.Backend = b
	return ui.Run(o)
}

// agentUsage is an agent's resource use in the running VM, for the
// window's Agents tab. It is bounded: a listing must not hang on a busy VM.
func agentUsage(ctx context.Context, ctl api.Controller, a agents.Agent) (agents.Usage, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if st, err := ctl.Status(ctx); err != nil || st.State != control.Running {
		return agents.Usage{}, errors.New("the VM is not running")
	}
	resp, err := ctl.Usage(ctx, agentproto.UsageRequest{Users: []string{a.User()}})
	if err != nil {
		return agents.Usage{}, fmt.Errorf("the VM did not report usage: %v", err)
	}
	for _, u := range resp.Users {
		if u.User == a.User() {
			return agents.UsageFrom(u), nil
		}
	}
	return agents.Usage{}, nil // nothing run since the VM started
}
