package host

import (
	"maps"

	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// BridgeOptions complete NewBridge.
type BridgeOptions struct {
	// Secrets is the keychain: agents' secrets and the model server's key.
	Secrets *secrets.Store
	// Events is the event log (nil: the route answers 503).
	Events *events.Store
	// NoPluginCreation answers POST /api/plugin/create with 503 (the
	// plugin library can't open).
	NoPluginCreation bool
	// RateLimits overrides the default quotas (sandbox.json's rateLimits).
	RateLimits map[string]int
	Logf       func(string, ...any)
}

// NewBridge builds the host API bridge over th: its agent runner and its
// plugin creation run in th's tools environment, so they count against
// the same limits as MCP. The host passes its own ToolHost and gives the
// manager the bridge's Attach (sandbox.Options.OnGuest); tests pass one
// over a VM of their own.
func NewBridge(th *ToolHost, o BridgeOptions) *bridge.Server {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	var create bridge.PluginCreator = th.Env
	if o.NoPluginCreation {
		o.Logf("bridge: plugin creation unavailable: the plugin library can't open")
		create = nil
	}
	rates := limit.DefaultLimits()
	maps.Copy(rates, o.RateLimits)
	return bridge.New(bridge.Options{
		Rate:      limit.NewRateLimiter(limit.RateOptions{Limits: rates}),
		Memory:    th.Memory,
		Events:    o.Events,
		Secrets:   o.Secrets,
		Config:    &bridge.ConfigStore{Dir: th.Paths.BridgeConfigDir()},
		Log:       bridgeLog(th.Paths),
		Inference: datadir.InferenceClient(th.Paths, o.Secrets),
		Dispatch:  newRunner(th, o.Secrets, o.Logf),
		Plugins:   create,
		// A plugin's command gets only the secrets its installed recipe
		// declares.
		PluginSecrets: datadir.InstalledSecrets(th.Paths),
		// And inference only when it declares permissions.inference.
		PluginInference: datadir.InstalledInference(th.Paths),
		HostCLI:         assets.HostCLI,
		Logf:            o.Logf,
	})
}

// newRunner is the runner of dispatched tasks, in th's tools environment
// without its secret tools (a task has nobody to ask). Tasks an earlier
// owner left running are marked interrupted.
func newRunner(th *ToolHost, sec *secrets.Store, logf func(string, ...any)) bridge.Dispatcher {
	r := datadir.NewRunner(th.Paths, sec, th.Registry, th.Env, nil, tools.IsSecretTool, logf)
	r.Recover()
	return r
}
