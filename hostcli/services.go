package hostcli

import (
	"context"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/secrets"
)

// appSecrets are the app-level secrets the CLI manages.
var appSecrets = map[string]bool{secrets.InferenceKey: true}

// secretApp is `secret set|remove --app KEY`.
func (c *cli) secretApp(ctx context.Context, args []string) int {
	if len(args) != 3 || (args[0] != "set" && args[0] != "remove") {
		fmt.Fprintln(c.err, secretUsage)
		return ExitUsage
	}
	key := args[2]
	if !appSecrets[key] {
		return c.fail(fmt.Errorf("%w: %q is not an app secret; the app keeps only %s", secrets.ErrInvalid, key, secrets.InferenceKey))
	}
	sec := c.sec
	if c.remote != nil {
		// The far owner's own key, kept here as its agents' are.
		if err := c.farKeepsSecretsHere(ctx); err != nil {
			return c.fail(err)
		}
		sec = c.farSecrets()
	}
	if args[0] == "remove" {
		if err := sec.RemoveApp(key); err != nil {
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
	if err := sec.SetApp(key, v); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "stored %s\n", key)
	return ExitOK
}
