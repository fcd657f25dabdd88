package hostcli

import (
	"context"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/plugins"
)

// pluginSource is where a plugin command reads the library and an agent's
// installs: this machine's files, read with no owner needed, or through a
// remote context the far side's owner (PluginLibrary), whose library is
// the one its installs use. Changes go through c.owner either way.
type pluginSource interface {
	// list is every plugin; damaged files are joined into the error as
	// *plugins.DamagedError, as plugins.Library.List reports them.
	list(ctx context.Context) ([]*plugins.Entry, error)
	get(ctx context.Context, id string) (*plugins.Entry, error)
	// installs is what a has installed, by plugin id.
	installs(ctx context.Context, a agents.Agent) (map[string]plugins.Installation, error)
	// allowlist is the setup allowlist recipes are reviewed against where
	// they would run.
	allowlist(ctx context.Context) []string
}

func (c *cli) pluginSource() (pluginSource, error) {
	if c.remote != nil {
		return &farPlugins{c: c}, nil
	}
	lib, err := plugins.OpenLibrary(c.paths.PluginsDir())
	if err != nil {
		return nil, err
	}
	return localPlugins{c, lib}, nil
}

type localPlugins struct {
	c   *cli
	lib *plugins.Library
}

func (l localPlugins) list(context.Context) ([]*plugins.Entry, error) { return l.lib.List() }
func (l localPlugins) get(_ context.Context, id string) (*plugins.Entry, error) {
	return l.lib.Get(id)
}
func (l localPlugins) installs(_ context.Context, a agents.Agent) (map[string]plugins.Installation, error) {
	return l.c.installed().List(a.ID)
}
func (l localPlugins) allowlist(context.Context) []string { return datadir.SetupAllowlist(l.c.paths) }

// farPlugins asks the far side's owner; the allowlist comes with any
// library answer, so it is asked once per command.
type farPlugins struct {
	c     *cli
	allow []string
	asked bool
}

func (f *farPlugins) ask(ctx context.Context, req control.PluginLibraryRequest) ([]*plugins.Entry, error) {
	ctl, err := f.c.owner(ctx)
	if err != nil {
		return nil, err
	}
	r, err := ctl.PluginLibrary(ctx, req)
	if err != nil {
		return nil, f.c.farError(err, "read its plugin library")
	}
	f.allow, f.asked = r.SetupAllowlist, true
	var damaged []error
	for _, d := range r.Damaged {
		damaged = append(damaged, &plugins.DamagedError{ID: d.ID, Path: d.Path, Err: errors.New(d.Error)})
	}
	return r.Plugins, errors.Join(damaged...)
}

func (f *farPlugins) list(ctx context.Context) ([]*plugins.Entry, error) {
	return f.ask(ctx, control.PluginLibraryRequest{})
}

func (f *farPlugins) get(ctx context.Context, id string) (*plugins.Entry, error) {
	l, err := f.ask(ctx, control.PluginLibraryRequest{Plugin: id})
	if err != nil {
		return nil, err
	}
	if len(l) != 1 || l[0].ID != id || len(l[0].Versions) == 0 {
		return nil, fmt.Errorf("context %s: the far side's owner answered for plugin %q with %d plugins", f.c.remote.Name, id, len(l))
	}
	return l[0], nil
}

func (f *farPlugins) installs(ctx context.Context, a agents.Agent) (map[string]plugins.Installation, error) {
	ctl, err := f.c.owner(ctx)
	if err != nil {
		return nil, err
	}
	r, err := ctl.PluginLibrary(ctx, control.PluginLibraryRequest{Agent: a.ID})
	if err != nil {
		return nil, f.c.farError(err, "read its plugin installs")
	}
	return r.Installed, nil
}

func (f *farPlugins) allowlist(ctx context.Context) []string {
	if !f.asked {
		// Any library answer carries it. Failing, the review is against
		// none: stricter, never looser.
		f.ask(ctx, control.PluginLibraryRequest{})
	}
	return f.allow
}
