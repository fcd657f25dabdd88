package owner

import (
	"context"
	"fmt"
	"net/http"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// PluginImporter is the importer sandbox.json configures (GitHub's API and
// raw-content URLs); client nil means the importer's default.
func PluginImporter(cfg config.Sandbox, client *http.Client) *plugins.Importer {
	return &plugins.Importer{Client: client, GitHubAPI: cfg.GitHubAPIURL, GitHubRaw: cfg.GitHubRawURL}
}

// OutsideAllowlist lists what in p's setup and tools reaches hosts outside
// the setup allowlist of cfg: an imported plugin may, but only when the
// user accepts it (the CLI's --yes, the window's warning).
func OutsideAllowlist(p *plugins.Plugin, cfg config.Sandbox) []plugins.Problem {
	return plugins.CheckHosts(p, plugins.NewAllowlist(cfg.SetupAllowlist()))
}

// PluginOps installs and uninstalls library plugins for agents on the VM
// of one data dir. The CLI and the window both use it, so a plugin is
// installed the same way from either.
type PluginOps struct {
	Paths config.Paths
	// Guest reaches the running VM's agent; an error means it isn't
	// running (the window passes one that starts it first).
	Guest tools.GuestFunc
	// Env, when set, is the tools environment installs go through (the
	// owner's, so its MCP sessions hear of the change at once and installs
	// share one lock); otherwise each operation builds one over Guest.
	Env *tools.Env
	// Agents resolves agent ids for UninstallEverywhere.
	Agents func() (*agents.Registry, error)
	// Report, when set, hears what UninstallEverywhere did per agent.
	Report func(format string, args ...any)
	// SecretPrompter, when set, asks the user for a secret a plugin needs
	// and the agent lacks (the CLI's terminal); otherwise the install
	// fails naming the command that sets it.
	SecretPrompter tools.SecretPrompter
}

// Installed is the per-agent install records of the data dir.
func (o *PluginOps) Installed() *plugins.Installed {
	return plugins.NewInstalled(o.Paths.AgentStateDir())
}

// env is the tools environment on the running VM, or why there is none.
func (o *PluginOps) env(ctx context.Context) (*tools.Env, error) {
	if o.Env != nil {
		return o.Env, nil
	}
	g, err := o.Guest(ctx)
	if err != nil {
		return nil, err
	}
	return tools.NewEnv(tools.Options{
		Guest:   func(context.Context) (*agentproto.Client, error) { return g, nil },
		Plugins: o.Installed(),
		// A plugin's secrets come from the keychain; setup output quoted
		// in errors is scrubbed of them.
		Secrets: PluginSecrets, Redactor: Secrets, SecretPrompter: o.SecretPrompter,
	}), nil
}

// Install installs version v of a library plugin for a, reporting each
// step before it runs. A failure names the step and leaves nothing.
func (o *PluginOps) Install(ctx context.Context, a agents.Agent, v plugins.Version, progress func(tools.InstallStep)) error {
	env, err := o.env(ctx)
	if err != nil {
		return err
	}
	return env.Toolset(a).InstallPlugin(ctx, plugins.Confine(v.Recipe, v.Origin, o.setupAllowlist()), v.Number, progress)
}

// setupAllowlist is the allowlist in sandbox.json now; a file that does
// not load gives the default, never a wider list.
func (o *PluginOps) setupAllowlist() []string {
	cfg, err := config.LoadSandbox(o.Paths.SandboxJSON())
	if err != nil {
		cfg = config.Defaults()
	}
	return cfg.SetupAllowlist()
}

// Review is what installing v for a hands the recipe: its secrets and
// the network its setup and tools run under (plugins.Review), for the
// confirmation the CLI and the window ask before an install.
func (o *PluginOps) Review(a agents.Agent, v plugins.Version) plugins.Grant {
	var agentPol *netpolicy.Policy
	if pol, err := a.NetworkPolicy(); err == nil {
		agentPol = &pol
	} else {
		agentPol = &netpolicy.Policy{Mode: netpolicy.None}
	}
	return plugins.Review(v.Recipe, v.Origin, o.setupAllowlist(), agentPol)
}

// ReviewImport is what an imported recipe would get, before any agent.
func ReviewImport(p *plugins.Plugin, o plugins.Origin, cfg config.Sandbox) plugins.Grant {
	return plugins.Review(p, o, cfg.SetupAllowlist(), nil)
}

// Uninstall removes the plugin's tools and folder for a. Without a VM the
// record goes (so the tools are gone) and the folder waits: deferred
// then says why.
func (o *PluginOps) Uninstall(ctx context.Context, a agents.Agent, pluginID string) (deferred error, err error) {
	env, envErr := o.env(ctx)
	if envErr != nil {
		if err := o.Installed().Forget(ctx, a.ID, pluginID); err != nil {
			return nil, err
		}
		return envErr, nil
	}
	return nil, env.Toolset(a).UninstallPlugin(ctx, pluginID)
}

// UninstallEverywhere uninstalls a plugin from every agent that installed
// it, before the library deletes it (plugins.Uninstaller). With the VM
// stopped the records go (so no agent lists the tools) and the folders
// stay in the homes until the next install.
func (o *PluginOps) UninstallEverywhere(ctx context.Context, pluginID string) error {
	store := o.Installed()
	ids, err := store.Agents(pluginID)
	if err != nil || len(ids) == 0 {
		return err
	}
	reg, err := o.Agents()
	if err != nil {
		return err
	}
	env, envErr := o.env(ctx)
	for _, id := range ids {
		a, err := reg.Get(id)
		if err != nil || envErr != nil {
			// A removed agent, or no VM: drop the record.
			if err := store.Forget(ctx, id, pluginID); err != nil {
				return err
			}
			continue
		}
		if err := env.Toolset(a).UninstallPlugin(ctx, pluginID); err != nil {
			return fmt.Errorf("agent %s: %w", a.Name, err)
		}
		if o.Report != nil {
			o.Report("uninstalled %s from %s", pluginID, a.Name)
		}
	}
	return nil
}
