package hostcli

import (
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/inference"
	"github.com/osaurus/osaurus-sandbox/secrets"
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
