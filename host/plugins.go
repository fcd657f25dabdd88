package host

import (
	"context"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/host/datadir"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// Plugin installs from the CLI and the window run here, in the host's one
// tools environment: its MCP sessions hear of the change at once and every
// install takes the same package-install lock.

// installed is the per-agent install records of the data dir.
func (h *ToolHost) installed() *plugins.Installed {
	return plugins.NewInstalled(h.Paths.AgentStateDir())
}

// agent is the agent with id as the registry says it is now.
func (h *ToolHost) agent(id string) (agents.Agent, error) {
	return h.Registry.Get(id)
}

// InstallPlugin installs a library version of a plugin for an agent,
// reporting each step before it runs. A failure names the step and leaves
// nothing.
func (h *ToolHost) InstallPlugin(ctx context.Context, req api.PluginInstallRequest, progress func(tools.InstallStep)) error {
	a, err := h.agent(req.Agent)
	if err != nil {
		return err
	}
	lib, err := plugins.OpenLibrary(h.Paths.PluginsDir())
	if err != nil {
		return err
	}
	e, err := lib.Get(req.Plugin)
	if err != nil {
		return err
	}
	v := e.Current()
	if req.Version != 0 {
		found := false
		for _, ev := range e.Versions {
			if ev.Number == req.Version {
				v, found = ev, true
			}
		}
		if !found {
			return fmt.Errorf("%w: the plugin %s has no library version %d", plugins.ErrNotFound, req.Plugin, req.Version)
		}
	}
	// An imported recipe without permissions.network runs under the setup
	// allowlist, not the agent's policy.
	return h.Env.Toolset(a).InstallPlugin(ctx, plugins.Confine(v.Recipe, v.Origin, datadir.SetupAllowlist(h.Paths)), v.Number, progress)
}

// UninstallPlugin removes the plugin's tools and folder for an agent.
// With IfRunning and the VM stopped, only the record goes (so the tools
// are gone) and deferred says why the folder waits.
func (h *ToolHost) UninstallPlugin(ctx context.Context, req api.PluginUninstallRequest) (deferred error, err error) {
	a, err := h.agent(req.Agent)
	if err != nil {
		return nil, err
	}
	if req.IfRunning {
		if _, err := h.Running(ctx); err != nil {
			if err := h.installed().Forget(ctx, a.ID, req.Plugin); err != nil {
				return nil, err
			}
			return fmt.Errorf("%w (start it with `osaurus-sandbox start`)", err), nil
		}
	}
	return nil, h.Env.Toolset(a).UninstallPlugin(ctx, req.Plugin)
}

// UninstallPluginEverywhere uninstalls a plugin from every agent that
// installed it, before the library deletes it (plugins.Uninstaller). With
// the VM stopped the records go (so no agent lists the tools) and the
// folders stay in the homes until the next install.
func (h *ToolHost) UninstallPluginEverywhere(ctx context.Context, pluginID string, report func(string)) error {
	store := h.installed()
	ids, err := store.Agents(pluginID)
	if err != nil || len(ids) == 0 {
		return err
	}
	_, vmErr := h.Running(ctx)
	for _, id := range ids {
		a, err := h.agent(id)
		if err != nil || vmErr != nil {
			// A removed agent, or no VM: drop the record.
			if err := store.Forget(ctx, id, pluginID); err != nil {
				return err
			}
			continue
		}
		if err := h.Env.Toolset(a).UninstallPlugin(ctx, pluginID); err != nil {
			return fmt.Errorf("agent %s: %w", a.Name, err)
		}
		if report != nil {
			report(fmt.Sprintf("uninstalled %s from %s", pluginID, a.Name))
		}
	}
	return nil
}
