package remotes

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// FarStorePoll is how often a far owner that keeps its own secrets is
// asked whether it now wants this machine's; OfferChecked hears each
// answer. Both are for tests.
var (
	FarStorePoll = 30 * time.Second
	OfferChecked = func(store string) {}
)

// OfferSecrets offers this machine's secrets of context name (in b, under
// secrets.ClientService(name)) to the owner dial reaches, while ctx lasts,
// whenever that owner's secretStore is "client" (docs/secrets.md): one
// more control connection beside the front end's own. A far side that
// keeps its secrets itself is asked again every FarStorePoll over the
// same connection, so switching it to "client" takes effect without
// reconnecting; a lost link is dialled again (the owner may have
// restarted). It never starts an owner there: one the front end's own
// connection started, or one already running, is offered to, and an
// owner stopped there stays stopped. It returns when ctx ends or the
// owner is too old to ask. It runs in the background until stop is
// called, which waits for it to end.
func OfferSecrets(ctx context.Context, dial client.Dialer, b secrets.Backend, name string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		offer(ctx, dial, b, name)
	}()
	return func() {
		cancel()
		<-done
	}
}

// offer is OfferSecrets' loop.
func offer(ctx context.Context, dial client.Dialer, b secrets.Backend, name string) {
	delay := time.Second
	for {
		if cl, err := client.Via(ctx, running{dial}); err == nil {
			again := offerOver(ctx, cl, b, name)
			cl.Close()
			if !again {
				return
			}
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

// offerOver offers the secrets over cl until the link ends (true: dial
// again) or there is nothing to offer to (false: an owner too old to ask
// for them, or ctx ended).
func offerOver(ctx context.Context, cl *client.Client, b secrets.Backend, name string) bool {
	for {
		st, err := cl.Status(ctx)
		if err != nil {
			return ctx.Err() == nil
		}
		OfferChecked(st.SecretStore)
		if _, here := SecretsKeptHere(st); here {
			conn, err := cl.OfferSecrets(ctx)
			if errors.Is(err, agentproto.ErrUnsupported) {
				return false
			}
			if err == nil {
				secrets.Provide(ctx, conn, b, secrets.ClientService(name))
			}
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(FarStorePoll):
		}
	}
}

// running dials only an owner that runs: api.ErrNoOwner otherwise.
type running struct{ client.Dialer }

func (d running) DialControl(ctx context.Context, _ bool) (io.ReadWriteCloser, error) {
	return d.Dialer.DialControl(ctx, false)
}

// SecretsKeptHere says whether the far owner whose status is st keeps
// its agents' secrets on this machine (secretStore client); store names
// its setting for messages, an older owner's that doesn't say included.
func SecretsKeptHere(st api.Status) (store string, here bool) {
	if st.SecretStore == "" {
		return "unknown: an older osaurus-sandbox", false
	}
	return st.SecretStore, st.SecretStore == config.SecretStoreClient
}
