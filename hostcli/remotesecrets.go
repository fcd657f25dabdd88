package hostcli

import (
	"context"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// Secrets of a remote context whose owner's secretStore is "client"
// (docs/secrets.md): they stay on this machine, in its store under the
// context's own service name (secrets.ClientService), and the far owner
// asks for them while a long-lived command (mcp --agent) offers them.

// farSecrets is this machine's store of the remote context's sandbox.
func (c *cli) farSecrets() *secrets.Store {
	return secrets.ForContext(c.sec.B, c.remote.Name)
}

// farKeepsSecretsHere fails unless the far owner's secretStore is
// "client": otherwise what is written here is never read there.
func (c *cli) farKeepsSecretsHere(ctx context.Context) error {
	ctl, err := c.owner(ctx)
	if err != nil {
		return err
	}
	st, err := ctl.Status(ctx)
	if err != nil {
		return c.farError(err, "say where its secrets are")
	}
	if store, here := remotes.SecretsKeptHere(st); !here {
		return fmt.Errorf("context %s keeps its secrets on that machine (secretStore %s): set them there (ssh ... osaurus-sandbox secret ...), or keep them on this machine with `ssh ... osaurus-sandbox config set secretStore client` there (docs/secrets.md)", c.remote.Name, store)
	}
	return nil
}

// farSecretAgent resolves ref on the far side's owner (a typo is caught
// there, and the entries are under the slug its store uses), once it
// says its secrets are kept here.
func (c *cli) farSecretAgent(ctx context.Context, ref string) (agents.Agent, error) {
	if err := c.farKeepsSecretsHere(ctx); err != nil {
		return agents.Agent{}, err
	}
	ctl, err := c.owner(ctx)
	if err != nil {
		return agents.Agent{}, err
	}
	a, err := ctl.GetAgent(ctx, ref)
	if err != nil {
		return agents.Agent{}, c.farError(err, "look agents up")
	}
	return a, nil
}

// offeringSecrets offers this machine's secrets of the context to its
// owner (remotes.OfferSecrets) until the returned func is called, which
// waits for that to end.
func (c *cli) offeringSecrets(ctx context.Context) (stop func()) {
	return remotes.OfferSecrets(ctx, c.dialer(), c.sec.B, c.remote.Name)
}
