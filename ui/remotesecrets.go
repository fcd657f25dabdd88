package ui

import (
	"context"
	"fmt"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/remotes"
	"github.com/osaurus/osaurus-sandbox/secrets"
)

// farSecrets is the Agents tab's secret store in the window of a remote
// context: this machine's store under the context's own service, the
// entries `--context NAME secret` writes and the session offers to the
// far owner. They are only read there while that owner keeps its
// secrets on this machine (secretStore client), so every call asks it
// first; otherwise the call fails saying where to set them.
type farSecrets struct {
	rc    remotes.Context
	ctl   api.Controller
	store *secrets.Store
}

func newFarSecrets(rc remotes.Context, ctl api.Controller, here config.Paths) *farSecrets {
	return &farSecrets{rc: rc, ctl: ctl, store: secrets.ForContext(secrets.ForDataDir(here).B, rc.Name)}
}

// Available fails unless the far owner keeps its secrets here. Bounded:
// the Agents tab asks on the UI's goroutine.
func (f *farSecrets) Available() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st, err := f.ctl.Status(ctx)
	if err != nil {
		return fmt.Errorf("%s can't say where it keeps its secrets: %w", f.rc.Name, err)
	}
	if store, here := remotes.SecretsKeptHere(st); !here {
		return fmt.Errorf("%s keeps its agents' secrets on that machine (secretStore %s). Set them there with `%s`, or keep them on this machine with `%s` and set them here",
			f.rc.Name, store, FarCommand(f.rc, "secret", "set", "AGENT", "KEY"), FarCommand(f.rc, "config", "set", "secretStore", config.SecretStoreClient))
	}
	return nil
}

func (f *farSecrets) List(agent string) ([]string, error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	return f.store.List(agent)
}

func (f *farSecrets) Set(agent, key, value string) error {
	if err := f.Available(); err != nil {
		return err
	}
	return f.store.Set(agent, key, value)
}

func (f *farSecrets) Remove(agent, key string) error {
	if err := f.Available(); err != nil {
		return err
	}
	return f.store.Remove(agent, key)
}

// RemoveAll deletes what this machine keeps of a removed far agent. A
// far owner that keeps its own secrets deleted them itself; this
// machine's store is then not touched (it may have no keychain at all).
func (f *farSecrets) RemoveAll(agent string) ([]string, error) {
	if f.Available() != nil {
		return nil, nil
	}
	return f.store.RemoveAll(agent)
}

// Where names this machine's store, and whose entries these are.
func (f *farSecrets) Where() string {
	return f.store.Where() + " of this machine (for " + f.rc.Name + ")"
}
