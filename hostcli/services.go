package hostcli

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/plugins"
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
		key, _ := secretStore.GetApp(secrets.InferenceKey)
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

// taskStore is where the runner's tasks are kept.
func taskStore(p config.Paths) *runner.Store {
	return &runner.Store{Dir: filepath.Join(p.Root, "tasks")}
}

// newRunner is the agent runner on guest, with the same tools an MCP
// client of the agent gets (plugins, secrets redaction, plugin creation).
func newRunner(p config.Paths, reg *agents.Registry, guest tools.GuestFunc, logf func(string, ...any)) *runner.Runner {
	env := tools.NewEnv(tools.Options{Guest: guest, Agents: reg, Redactor: secretStore,
		Plugins: plugins.NewInstalled(p.AgentStateDir()), Registry: pluginRegistry(p)})
	return runner.New(runner.Options{
		Env:    env,
		Agents: reg,
		Model:  inferenceClient(p),
		Store:  taskStore(p),
		Budget: func() runner.Budget {
			cfg, err := config.LoadSandbox(p.SandboxJSON())
			if err != nil {
				cfg = config.Defaults()
			}
			return runner.Budget{MaxSteps: cfg.RunnerMaxSteps, Timeout: time.Duration(cfg.RunnerTimeoutSeconds) * time.Second}
		},
		Ready: inferenceReady(p),
		Logf:  logf,
	})
}

// ownerRunner is the runner of dispatched tasks in the VM's owner. Tasks
// an earlier owner left running are marked interrupted.
func ownerRunner(p config.Paths, guest tools.GuestFunc, logf func(string, ...any)) bridge.Dispatcher {
	reg, err := agents.Open(p.AgentsJSON())
	if err != nil {
		logf("agent runner: %v (dispatch is unavailable)", err)
		return nil
	}
	r := newRunner(p, reg, guest, logf)
	r.Recover()
	return r
}

// appSecrets are the app-level secrets the CLI manages.
var appSecrets = map[string]bool{secrets.InferenceKey: true}

// secretApp is `secret set|remove --app KEY`.
func (c *cli) secretApp(args []string) int {
	if len(args) != 3 || (args[0] != "set" && args[0] != "remove") {
		fmt.Fprintln(c.err, secretUsage)
		return ExitUsage
	}
	key := args[2]
	if !appSecrets[key] {
		return c.fail(fmt.Errorf("%w: %q is not an app secret; the app keeps only %s", secrets.ErrInvalid, key, secrets.InferenceKey))
	}
	if args[0] == "remove" {
		if err := secretStore.RemoveApp(key); err != nil {
			if errors.Is(err, secrets.ErrNotFound) {
				return c.fail(fmt.Errorf("%s is not set", key))
			}
			return c.fail(err)
		}
		fmt.Fprintf(c.out, "removed %s\n", key)
		return ExitOK
	}
	v, err := c.readSecret("--app", key)
	if err != nil {
		return c.fail(err)
	}
	if err := secretStore.SetApp(key, v); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "stored %s\n", key)
	return ExitOK
}
