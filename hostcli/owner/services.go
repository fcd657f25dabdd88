package owner

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/runner"
)

// inferenceClient reaches the model server of sandbox.json, re-read on
// every call so a changed setting applies without a restart.
func inferenceClient(p config.Paths) *inference.Client {
	return &inference.Client{Settings: func() (inference.Settings, error) {
		cfg, err := config.LoadSandbox(p.SandboxJSON())
		if err != nil {
			return inference.Settings{}, fmt.Errorf("%w: %v", inference.ErrNotConfigured, err)
		}
		// A local model server needs no key; a keychain that can't be
		// read is the same as no key, and the server says so if it wants one.
		key, _ := Secrets.GetApp(secrets.InferenceKey)
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
func TaskStore(p config.Paths) *runner.Store {
	return &runner.Store{Dir: filepath.Join(p.Root, "tasks")}
}

// NewRunner is the agent runner on guest, with the same tools an MCP
// client of the agent gets (plugins, secrets redaction, plugin creation).
func NewRunner(p config.Paths, reg *agents.Registry, env *tools.Env, run tools.Runner, logf func(string, ...any)) *runner.Runner {
	return runner.New(runner.Options{
		Env:    env,
		Tools:  run,
		Agents: reg,
		Model:  inferenceClient(p),
		Store:  TaskStore(p),
		Budget: func() runner.Budget {
			cfg, err := config.LoadSandbox(p.SandboxJSON())
			if err != nil {
				cfg = config.Defaults()
			}
			return runner.Budget{MaxSteps: cfg.RunnerMaxSteps, Timeout: time.Duration(cfg.RunnerTimeoutSeconds) * time.Second}
		},
		Ready:    inferenceReady(p),
		Redactor: Secrets,
		Logf:     logf,
	})
}

// ownerRunner is the runner of dispatched tasks in the VM's owner. Tasks
// an earlier owner left running are marked interrupted.
func ownerRunner(p config.Paths, guest tools.GuestFunc, lim Limits, logf func(string, ...any)) bridge.Dispatcher {
	reg, err := agents.Open(p.AgentsJSON())
	if err != nil {
		logf("agent runner: %v (dispatch is unavailable)", err)
		return nil
	}
	r := NewRunner(p, reg, bridgeEnv(p, guest, reg, PluginRegistry(p), lim), nil, logf)
	r.Recover()
	return r
}
