package hostcli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// Secrets of a remote context whose owner's secretStore is "client"
// (docs/secrets.md): they stay on this machine, in its store under the
// context's own service name (secrets.ClientService), and the far owner
// asks for them while a long-lived command (mcp --agent) offers them.

// farSecrets is this machine's store of the remote context's sandbox.
func (c *cli) farSecrets() *secrets.Store {
	return &secrets.Store{B: secrets.InService{B: c.sec.B, Service: secrets.ClientService(c.remote.Name)}}
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
	if st.SecretStore != config.SecretStoreClient {
		store := st.SecretStore
		if store == "" {
			store = "unknown: an older osaurus-sandbox"
		}
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

// offerSecrets offers this machine's secrets of the context to the far
// owner while ctx lasts, whenever its secretStore is "client": one more
// dial-stdio connection beside the command's. A far side that keeps its
// secrets itself is asked again every farStorePoll over the same
// connection, so switching it to "client" while a client is connected
// takes effect without reconnecting; a lost link is dialled again (the
// owner may have restarted).
func (c *cli) offerSecrets(ctx context.Context) {
	delay := time.Second
	for {
		if cl, err := client.Via(ctx, c.dialer()); err == nil {
			if !c.offerOver(ctx, cl) {
				cl.Close()
				return
			}
			cl.Close()
			delay = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// farStorePoll is how often a far owner that keeps its own secrets is
// asked whether it now wants this machine's; offerChecked hears each
// answer (for tests).
var (
	farStorePoll = 30 * time.Second
	offerChecked = func(store string) {}
)

// offerOver offers the secrets over cl until the link ends (true: dial
// again) or there is nothing to offer to (false: an owner too old to ask
// for them, or ctx ended).
func (c *cli) offerOver(ctx context.Context, cl *client.Client) bool {
	for {
		st, err := cl.Status(ctx)
		if err != nil {
			return ctx.Err() == nil
		}
		offerChecked(st.SecretStore)
		if st.SecretStore == config.SecretStoreClient {
			conn, err := cl.OfferSecrets(ctx)
			if errors.Is(err, agentproto.ErrUnsupported) {
				return false
			}
			if err == nil {
				secrets.Provide(ctx, conn, c.sec.B, secrets.ClientService(c.remote.Name))
			}
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(farStorePoll):
		}
	}
}

// offeringSecrets runs offerSecrets until the returned func is called,
// which waits for it to end.
func (c *cli) offeringSecrets(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.offerSecrets(ctx)
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
