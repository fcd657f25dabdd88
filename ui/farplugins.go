package ui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fyne.io/fyne/v2"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// farPlugins reads a remote context's plugin library through its owner
// (PluginLibrary): the library there is the one its installs use, and
// its files are not this machine's. Its changes go through the same
// owner (PluginSource.Writer, farInstaller).
type farPlugins struct {
	ctl api.Controller
	reg *agents.Registry // the far side's agents (a mirror)
}

// newFarPluginsTab is the Plugins tab of a remote context.
func newFarPluginsTab(b Backend, ctl api.Controller, reg *agents.Registry, win fyne.Window, do func(func())) *pluginsTab {
	t := &pluginsTab{far: &farPlugins{ctl: ctl, reg: reg}, poll: farPoll}
	// The review before an install is against the far side's allowlist,
	// where the recipe runs.
	inst := farInstaller{ctl: ctl, allow: func() []string { return t.farAllow }}
	return newPluginsTabInto(t, b, PluginSource{Installer: inst, Writer: ctl}, reg, win, do)
}

// read is the library, each plugin's installs (one question per agent:
// the owner answers an agent's installs) and the setup allowlist.
func (f *farPlugins) read(ctx context.Context) libraryRead {
	lib, err := f.ctl.PluginLibrary(ctx, control.PluginLibraryRequest{})
	if err != nil {
		return libraryRead{err: fmt.Errorf("the plugin library can't be read: %w", err)}
	}
	r := libraryRead{list: lib.Plugins, installs: map[string][]string{}, allow: lib.SetupAllowlist}
	var errs []error
	for _, d := range lib.Damaged {
		errs = append(errs, &plugins.DamagedError{ID: d.ID, Path: d.Path, Err: errors.New(d.Error)})
	}
	if f.reg != nil {
		for _, a := range f.reg.List() {
			in, err := f.ctl.PluginLibrary(ctx, control.PluginLibraryRequest{Agent: a.ID})
			if err != nil {
				errs = append(errs, fmt.Errorf("the plugins of %s can't be read: %w", a.Name, err))
				continue
			}
			for id := range in.Installed {
				r.installs[id] = append(r.installs[id], a.ID)
			}
		}
	}
	r.err = errors.Join(errs...)
	return r
}

// followFar reads the far side's library every poll until ctx ends: its
// files can't be watched from here.
func (t *pluginsTab) followFar(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, farCall)
		r := t.far.read(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		t.do(func() { t.apply(r) })
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.poll):
		}
	}
}

// farInstaller installs and uninstalls through a remote context's owner.
type farInstaller struct {
	ctl   api.Controller
	allow func() []string
}

// Review is what installing v for a hands the recipe, against the far
// side's setup allowlist.
func (f farInstaller) Review(a agents.Agent, v plugins.Version) plugins.Grant {
	return datadir.ReviewInstallWith(f.allow(), a, v)
}

func (f farInstaller) Install(ctx context.Context, a agents.Agent, v plugins.Version, progress func(tools.InstallStep)) error {
	return f.ctl.InstallPlugin(ctx, api.PluginInstallRequest{Agent: a.ID, Plugin: v.Recipe.ID(), Version: v.Number}, progress)
}

func (f farInstaller) Uninstall(ctx context.Context, a agents.Agent, pluginID string) (deferred, err error) {
	return f.ctl.UninstallPlugin(ctx, api.PluginUninstallRequest{Agent: a.ID, Plugin: pluginID})
}
