package owner

import (
	"context"
	"path/filepath"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/secrets/prompt"
	"github.com/osaurus/osaurus-sandbox/tools"
)

// Where the bridge keeps per-agent state on the host.
func bridgeConfig(p config.Paths) *bridge.ConfigStore {
	return &bridge.ConfigStore{Dir: filepath.Join(p.Root, "bridge", "config")}
}

// BridgeLog is where agents' bridge log lines are kept.
func BridgeLog(p config.Paths) *bridge.LogStore {
	return &bridge.LogStore{Dir: filepath.Join(p.Logs(), "agents")}
}

// Secrets is the OS keychain store every part of the app shares.
var Secrets = secrets.New()

// PluginSecrets gives plugins their declared secrets from Secrets: a
// plugin's secret NAME is its agent's secret NAME (tools.StoreSecrets).
var PluginSecrets = tools.StoreSecrets{Store: Secrets}

// SecretPrompts asks the user for secrets sandbox_secret_set wants
// without a value: through the MCP client's URL elicitation (a one-time
// page on loopback) and, while it is open in this process, the window's
// dialog.
var SecretPrompts = &prompt.Broker{Store: Secrets, Pages: &prompt.Pages{Store: Secrets}}

// NewBridge builds the host API bridge of a data dir. The VM's owner
// passes its Attach to the sandbox manager (Options.OnGuest); guest is
// how its agent runner reaches the VM.
func NewBridge(p config.Paths, logf func(string, ...any), guest tools.GuestFunc, lim Limits) *bridge.Server {
	// Without its database a route answers 503; the rest of the bridge
	// still works.
	mem, err := OpenMemory(context.Background(), p)
	if err != nil {
		logf("bridge: agent memory unavailable: %v", err)
	}
	ev, err := OpenEvents(context.Background(), p)
	if err != nil {
		logf("bridge: event log unavailable: %v", err)
	}
	return bridge.New(bridge.Options{
		Memory:  mem,
		Events:  ev,
		Secrets: Secrets,
		Config:  bridgeConfig(p),
		Log:     BridgeLog(p),
		// Services behind the bridge: see services.go.
		Inference: inferenceClient(p),
		Dispatch:  ownerRunner(p, guest, lim, logf),
		Plugins:   pluginCreator(p, guest, lim, logf),
		// A plugin's command gets only the secrets its installed recipe
		// declares.
		PluginSecrets: InstalledSecrets(p),
		HostCLI:       assets.HostCLI,
		Logf:          logf,
	})
}

// pluginCreator serves POST /api/plugin/create in the VM's owner: a tools
// environment like the MCP server's, so the registration goes through the
// same pipeline as sandbox_plugin_register. MCP sessions of this or other
// processes see the new tools through their plugin watch. nil (503) when
// the agents registry or the library can't open.
func pluginCreator(p config.Paths, guest tools.GuestFunc, lim Limits, logf func(string, ...any)) bridge.PluginCreator {
	reg, err := agents.Open(p.AgentsJSON())
	if err != nil {
		logf("bridge: plugin creation unavailable: %v", err)
		return nil
	}
	lib := PluginRegistry(p)
	if lib == nil {
		logf("bridge: plugin creation unavailable: the plugin library can't open")
		return nil
	}
	return bridgeEnv(p, guest, reg, lib, lim)
}

// bridgeEnv is the tools environment of a bridge service (the agent
// runner, plugin creation): an agent's MCP tools, with secrets scrubbed,
// counting against the owner's limits.
func bridgeEnv(p config.Paths, guest tools.GuestFunc, reg *agents.Registry, lib *tools.PluginRegistry, lim Limits) *tools.Env {
	return tools.NewEnv(lim.apply(tools.Options{Guest: guest, Agents: reg, Redactor: Secrets, Secrets: PluginSecrets,
		Plugins: plugins.NewInstalled(p.AgentStateDir()), Registry: lib}))
}

// PluginRegistry lets agents register plugins into the library, under the
// allowlist currently in sandbox.json. nil when the library can't open.
func PluginRegistry(p config.Paths) *tools.PluginRegistry {
	lib, err := plugins.OpenLibrary(p.PluginsDir())
	if err != nil {
		return nil
	}
	return &tools.PluginRegistry{Library: lib, Allowlist: func() plugins.Allowlist {
		cfg, err := config.LoadSandbox(p.SandboxJSON())
		if err != nil {
			cfg = config.Defaults()
		}
		return plugins.NewAllowlist(cfg.SetupAllowlist())
	}}
}

// InstalledSecrets is the bridge's PluginSecrets for a data dir: the
// secrets the plugin pluginID, as installed for the agent whose slug is
// agent, declares; none when either is unknown.
func InstalledSecrets(p config.Paths) func(agent, pluginID string) []string {
	return func(agent, pluginID string) []string {
		reg, err := agents.Open(p.AgentsJSON())
		if err != nil {
			return nil
		}
		for _, a := range reg.List() {
			if a.Slug != agent { // the guest names the agent by its user, agent-<slug>
				continue
			}
			ps, err := plugins.NewInstalled(p.AgentStateDir()).Installed(a.ID)
			if err != nil {
				return nil
			}
			for _, pl := range ps {
				if pl.ID() == pluginID {
					return pl.Secrets
				}
			}
		}
		return nil
	}
}
