package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/hostcli"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools/secretprompt"
	"github.com/osaurus/osaurus-sandbox/ui"
)

// gui opens the management window on the context named: this machine's
// sandbox (remotes.Local) or a remote context's. Its picker switches to
// another context in the same window.
func gui(ctx context.Context, p config.Paths, name string, stderr io.Writer) error {
	if runtime.GOOS == "linux" && os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return hostcli.UsageError{Err: ui.ErrNoDisplay}
	}
	store := remotes.Store{Path: filepath.Join(p.ConfigDir(), "contexts.json")}
	open := func(ctx context.Context, name string) (*ui.Session, error) {
		if name == remotes.Local {
			// Not ctx, which the picker bounds: the Host lives on
			// after the open, and ends with Close.
			return openLocal(context.Background(), p, stderr)
		}
		rc, err := store.Get(name)
		if err != nil {
			return nil, err
		}
		return ui.OpenRemote(ctx, rc, p)
	}
	s, err := open(ctx, name)
	if err != nil {
		return err
	}
	return ui.Run(ui.Options{Session: *s, Context: name, Contexts: store, Open: open})
}

// openLocal is the session of this machine's sandbox. The window's
// process owns the VM unless another process (a `serve` daemon) already
// does; then the window drives that one. Either way it goes through one
// api.Controller.
func openLocal(ctx context.Context, p config.Paths, stderr io.Writer) (*ui.Session, error) {
	logf := func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	// The window reads the agents; it changes them, and the projects,
	// through ctl, whose owner is their one writer.
	o := &ui.Session{}
	var ctl api.Controller
	var pluginChanges func(func()) func()
	var closers []func()
	h, err := host.New(ctx, host.Options{Paths: p, Kind: "app", Logf: logf, Version: hostcli.Version})
	switch {
	case errors.Is(err, api.ErrOwned):
		cl, err := client.Dial(ctx, p)
		if err != nil {
			return nil, err
		}
		closers = append(closers, cl.Close)
		ctl = cl // the owner keeps the VM when the window quits
		if o.Registry, err = agents.OpenReadOnly(p.AgentsJSON()); err != nil {
			cl.Close()
			return nil, err
		}
		sec := secrets.ForDataDir(p)
		o.Secrets, o.Prompts = sec, &secretprompt.Broker{Store: sec, Pages: &secretprompt.Pages{Store: sec}}
	case err != nil:
		return nil, err
	default:
		closers = append(closers, h.Close)
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
	o.AgentUsage = func(ctx context.Context, a agents.Agent) (agents.Usage, error) { return ui.UsageVia(ctx, ctl, a) }
	b, err := ui.NewBackend(ctx, ctl, p)
	if err != nil {
		for _, c := range closers {
			c()
		}
		return nil, err
	}
	b.PluginChanges = pluginChanges
	o.Backend = b
	o.Close = func() {
		b.Close()
		for _, c := range closers {
			c()
		}
	}
	return o, nil
}
