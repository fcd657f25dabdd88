// Package datadir builds what every process of the app makes from one
// data folder's files and settings: the plugin registry agents register
// into, the plugin importer, the agent runner and its model client. The
// VM's owner (host.Host) and the processes that only talk to it (the CLI,
// a window while `serve` owns the VM) share it; nothing here owns the VM
// or opens a tools environment of its own.
package datadir

import (
	"fmt"
	"net/http"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// InferenceClient reaches the model server of sandbox.json, re-read on
// every call so a changed setting applies without a restart.
func InferenceClient(p config.Paths, sec *secrets.Store) *inference.Client {
	return &inference.Client{Settings: func() (inference.Settings, error) {
		cfg, err := config.LoadSandbox(p.SandboxJSON())
		if err != nil {
			return inference.Settings{}, fmt.Errorf("%w: %v", inference.ErrNotConfigured, err)
		}
		// A local model server needs no key; a keychain that can't be
		// read is the same as no key, and the server says so if it wants one.
		key, _ := sec.GetApp(secrets.InferenceKey)
		return inference.Settings{URL: cfg.InferenceURL, Model: cfg.InferenceModel, APIKey: key}, nil
	}}
}

// inferenceReady says why the runner can't start a task, or nil.
func inferenceReady(p config.Paths) func() error {
	return func() error {
		cfg, err := config.LoadSandbox(p.SandboxJSON())
		switch {
		case err != nil:
			return fmt.Errorf("%w: %v", inference.ErrNotConfigured, err)
		case cfg.InferenceURL == "":
			return fmt.Errorf("%w: inferenceUrl is empty; point it at an OpenAI-compatible server with `osaurus-sandbox config set inferenceUrl http://127.0.0.1:11434/v1`", inference.ErrNotConfigured)
		case cfg.InferenceModel == "":
			return fmt.Errorf("%w: inferenceModel is empty; set it with `osaurus-sandbox config set inferenceModel MODEL`", inference.ErrNotConfigured)
		}
		return nil
	}
}

// TaskStore is where the runner's tasks are kept.
func TaskStore(p config.Paths) *runner.Store { return &runner.Store{Dir: p.TasksDir()} }

// NewRunner is the agent runner: env lists an agent's tools, run runs
// them (nil: env), hide names those it leaves out (nil: none), sec holds
// the model server's key.
func NewRunner(p config.Paths, sec *secrets.Store, reg *agents.Registry, env *tools.Env, run tools.Invoker, hide func(string) bool, logf func(string, ...any)) *runner.TaskRunner {
	var redact tools.Redactor
	if sec != nil {
		redact = sec
	}
	return runner.New(runner.Options{
		Env:    env,
		Tools:  run,
		Hide:   hide,
		Agents: reg,
		Model:  InferenceClient(p, sec),
		Store:  TaskStore(p),
		Budget: func() runner.Budget {
			cfg, err := config.LoadSandbox(p.SandboxJSON())
			if err != nil {
				cfg = config.Defaults()
			}
			return runner.Budget{MaxSteps: cfg.RunnerMaxSteps, Timeout: time.Duration(cfg.RunnerTimeoutSeconds) * time.Second}
		},
		Ready:    inferenceReady(p),
		Redactor: redact,
		Logf:     logf,
	})
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

// CheckInference says why the runner can't use the model server (not
// configured), before anything starts an owner for a task.
func CheckInference(p config.Paths) error { return inferenceReady(p)() }
