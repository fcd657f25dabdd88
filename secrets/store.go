package secrets

import (
	"context"
	"errors"
	"os"
	"sync"

	"github.com/osaurus/osaurus-sandbox/config"
)

// ForDataDir returns the secret store of the data folder p, the only
// constructor the app uses: its backend is the one p's secretStore
// setting names, so every process on the folder (owner, CLI, window)
// reads and writes the same secrets.
func ForDataDir(p config.Paths) *Store {
	return &Store{B: chosen{p: p, clients: &Clients{}, setting: &setting{}}, Marks: p.SecretRemovals()}
}

// Clients are the front ends that offer their machine's secrets to this
// store (secretStore "client"); the owner serves them over its control
// socket. nil when the store's backend is not the data folder's.
func (s *Store) Clients() *Clients {
	if c, ok := s.B.(chosen); ok {
		return c.clients
	}
	return nil
}

// chosen is the backend the setting names, looked up at each call: a
// changed setting applies to a running owner at once, instead of the
// owner and the CLI using different stores until it restarts.
type chosen struct {
	p config.Paths
	// clients are the providers of secretStore "client": in any process
	// but the owner none ever connect, so there every read fails with
	// ErrNoClient.
	clients *Clients
	setting *setting
}

// setting is the secretStore last read from sandbox.json, kept while the
// file is the same one (same identity, size and modification time): a
// tool's output is scrubbed of each of its agent's secrets, and reading
// and parsing the settings for each was most of a file store's read.
// Every settings write renames a new file into place, so a change is
// seen at the next call.
type setting struct {
	mu    sync.Mutex
	stat  os.FileInfo
	store string
}

func (s *setting) get(file string) (string, error) {
	st, err := os.Stat(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st != nil && s.stat != nil && os.SameFile(st, s.stat) && st.Size() == s.stat.Size() && st.ModTime().Equal(s.stat.ModTime()) {
		return s.store, nil
	}
	cfg, err := config.LoadSandbox(file)
	if err != nil {
		s.stat = nil
		return "", err
	}
	s.stat, s.store = st, cfg.SecretBackend()
	return s.store, nil
}

func (c chosen) backend() (Backend, error) {
	store, err := c.setting.get(c.p.SandboxJSON())
	if err != nil {
		// Never a guess: taking the keychain for a damaged setting
		// would hide the file's secrets, or put new ones where the
		// user did not choose.
		return nil, &storeError{msg: "secret store: which store holds the secrets (secretStore) can't be read: " + err.Error(), err: err}
	}
	switch store {
	case config.SecretStoreFile:
		return File{Path: c.p.SecretsFile(), Lock: c.p.SecretsLock()}, nil
	case config.SecretStoreClient:
		return c.clients, nil
	}
	return Keychain{}, nil
}

func (c chosen) Set(service, user, value string) error {
	b, err := c.backend()
	if err != nil {
		return err
	}
	return b.Set(service, user, value)
}

func (c chosen) Get(service, user string) (string, error) {
	b, err := c.backend()
	if err != nil {
		return "", err
	}
	return b.Get(service, user)
}

func (c chosen) Delete(service, user string) error {
	b, err := c.backend()
	if err != nil {
		return err
	}
	return b.Delete(service, user)
}

// The ContextBackend calls: ctx reaches the backend when it takes one.
func (c chosen) GetContext(ctx context.Context, service, user string) (string, error) {
	b, err := c.backend()
	if err != nil {
		return "", err
	}
	return getCtx(ctx, b, service, user)
}

func (c chosen) SetContext(ctx context.Context, service, user, value string) error {
	b, err := c.backend()
	if err != nil {
		return err
	}
	return setCtx(ctx, b, service, user, value)
}

func (c chosen) DeleteContext(ctx context.Context, service, user string) error {
	b, err := c.backend()
	if err != nil {
		return err
	}
	return delCtx(ctx, b, service, user)
}

func (c chosen) Where() string {
	b, err := c.backend()
	if err != nil {
		return "the secret store"
	}
	return where(b)
}

// where names a backend in messages.
func where(b Backend) string {
	if w, ok := b.(interface{ Where() string }); ok {
		return w.Where()
	}
	return "the secret store"
}

// Where names the store in messages: the OS keychain, or the file.
func (s *Store) Where() string { return where(s.B) }
