package datadir

import (
	"context"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/plugins"
)

// SetupAllowlist is the allowlist in sandbox.json now; a file that does
// not load gives the default, never a wider list.
func SetupAllowlist(p config.Paths) []string {
	cfg, err := config.LoadSandbox(p.SandboxJSON())
	if err != nil {
		cfg = config.Defaults()
	}
	return cfg.SetupAllowlist()
}

// ReviewInstall is what installing v for a hands the recipe: its secrets
// and the network its setup and tools run under (plugins.Review), for the
// confirmation the CLI and the window ask before an install.
func ReviewInstall(p config.Paths, a agents.Agent, v plugins.Version) plugins.Grant {
	return ReviewInstallWith(SetupAllowlist(p), a, v)
}

// ReviewInstallWith is ReviewInstall against setup allowlist allow: the
// far side's, through a remote context, where the install runs.
func ReviewInstallWith(allow []string, a agents.Agent, v plugins.Version) plugins.Grant {
	agentPol := &netpolicy.Policy{Mode: netpolicy.None}
	if pol, err := a.NetworkPolicy(); err == nil {
		agentPol = &pol
	}
	return plugins.Review(v.Recipe, v.Origin, allow, agentPol)
}

// ReviewImport is what an imported recipe would get, before any agent.
func ReviewImport(pl *plugins.Plugin, o plugins.Origin, cfg config.Sandbox) plugins.Grant {
	return plugins.Review(pl, o, cfg.SetupAllowlist(), nil)
}

// InstalledSecrets is the bridge's PluginSecrets for a data dir: the
// secrets the plugin pluginID, as installed for the agent whose slug is
// agent, declares; none when either is unknown.
func InstalledSecrets(p config.Paths) func(agent, pluginID string) []string {
	return func(agent, pluginID string) []string {
		if pl := installedRecipe(p, agent, pluginID); pl != nil {
			return pl.Secrets
		}
		return nil
	}
}

// InstalledInference is the bridge's PluginInference for a data dir:
// whether the plugin pluginID, as installed for the agent whose slug is
// agent, declares permissions.inference; false when either is unknown.
func InstalledInference(p config.Paths) func(agent, pluginID string) bool {
	return func(agent, pluginID string) bool {
		pl := installedRecipe(p, agent, pluginID)
		return pl != nil && pl.Permissions != nil && pl.Permissions.Inference
	}
}

// installedRecipe is the plugin pluginID as installed for the agent
// whose slug is agent (the guest names the agent by its user,
// agent-<slug>); nil when either is unknown.
func installedRecipe(p config.Paths, agent, pluginID string) *plugins.Plugin {
	reg, err := agents.OpenReadOnly(p.AgentsJSON())
	if err != nil {
		return nil
	}
	for _, a := range reg.List() {
		if a.Slug != agent {
			continue
		}
		ps, err := plugins.NewInstalled(p.AgentStateDir()).Installed(a.ID)
		if err != nil {
			return nil
		}
		for _, pl := range ps {
			if pl.ID() == pluginID {
				return pl
			}
		}
	}
	return nil
}

// ConfineOldPlugins confines the installations of every agent in list
// that were made before imported recipes were confined
// (plugins.Installed.ConfineOld), so none keeps its agent's network; the
// owner runs it at start. report hears each plugin changed. A library
// that does not open leaves every origin unknown: those confine too.
func ConfineOldPlugins(ctx context.Context, p config.Paths, list []agents.Agent, report func(a agents.Agent, pluginID string)) error {
	lib, _ := plugins.OpenLibrary(p.PluginsDir())
	origin := func(id string, version int) (plugins.Origin, bool) {
		if lib == nil {
			return plugins.Origin{}, false
		}
		e, err := lib.Get(id)
		if err != nil {
			return plugins.Origin{}, false
		}
		for _, v := range e.Versions {
			if v.Number == version {
				return v.Origin, true
			}
		}
		return plugins.Origin{}, false
	}
	store, allow := plugins.NewInstalled(p.AgentStateDir()), SetupAllowlist(p)
	var errs []error
	for _, a := range list {
		ids, err := store.ConfineOld(ctx, a.ID, origin, allow)
		if err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", a.Name, err))
		}
		for _, id := range ids {
			report(a, id)
		}
	}
	return errors.Join(errs...)
}
