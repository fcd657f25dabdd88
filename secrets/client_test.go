package secrets_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/zalando/go-keyring"
)

// memBackend is a keychain in memory: service → entry → value.
type memBackend struct {
	mu sync.Mutex
	m  map[string]map[string]string
	// block, when set, holds every Get until it is closed; asked is told
	// of each one first.
	block, asked chan struct{}
}

func newMem() *memBackend { return &memBackend{m: map[string]map[string]string{}} }

func (k *memBackend) Set(service, user, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m[service] == nil {
		k.m[service] = map[string]string{}
	}
	k.m[service][user] = value
	return nil
}

func (k *memBackend) Get(service, user string) (string, error) {
	if k.block != nil {
		k.asked <- struct{}{}
		<-k.block
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[service][user]
	if !ok {
		return "", keyring.ErrNotFound
	}
	return v, nil
}

func (k *memBackend) Delete(service, user string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[service][user]; !ok {
		return keyring.ErrNotFound
	}
	delete(k.m[service], user)
	return nil
}

// clientStore is the store of a data folder whose secretStore is
// "client", as its owner has it.
func clientStore(t *testing.T) *secrets.Store {
	t.Helper()
	p := config.Paths{Root: t.TempDir()}
	cfg := config.Defaults()
	cfg.SecretStore = config.SecretStoreClient
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	return secrets.ForDataDir(p)
}

// connect makes local a provider of s under context name ctxName, over a
// pipe standing in for the control socket's stream; the returned func
// cuts the link and waits for both ends to stop.
func connect(t *testing.T, s *secrets.Store, local secrets.Backend, ctxName string) (cut func()) {
	t.Helper()
	far, near := net.Pipe()
	before := s.Clients().Connected()
	var wg sync.WaitGroup
	wg.Add(2)
	served := make(chan struct{})
	go func() {
		defer wg.Done()
		s.Clients().Serve(context.Background(), far)
	}()
	go func() {
		defer wg.Done()
		defer close(served)
		secrets.Provide(context.Background(), near, local, secrets.ClientService(ctxName))
	}()
	testwait.Eventually(t, "the provider is registered", 10*time.Second, time.Millisecond, func() bool {
		select {
		case <-served:
			t.Fatal("the provider ended before it was registered")
		default:
		}
		return s.Clients().Connected() > before
	})
	var once sync.Once
	cut = func() {
		once.Do(func() {
			near.Close()
			far.Close()
			wg.Wait()
		})
	}
	t.Cleanup(cut)
	return cut
}

// With secretStore client and no front end connected, every use of the
// store fails with ErrUnavailable saying to connect from the user's
// machine; once one is, its machine's entries (of that context only) are
// the store.
func TestClientStore(t *testing.T) {
	s := clientStore(t)
	for name, f := range map[string]func() error{
		"get":    func() error { _, err := s.Get("alice", "TOKEN"); return err },
		"set":    func() error { return s.Set("alice", "TOKEN", "value-123456") },
		"list":   func() error { _, err := s.List("alice"); return err },
		"remove": func() error { return s.Remove("alice", "TOKEN") },
	} {
		err := f()
		if !errors.Is(err, secrets.ErrUnavailable) || !strings.Contains(err.Error(), "no machine that holds this sandbox's secrets is connected") ||
			!strings.Contains(err.Error(), "osaurus-sandbox --context NAME") {
			t.Errorf("%s with no client: %v", name, err)
		}
	}

	local := newMem()
	// This machine's own sandbox and another context keep secrets of an
	// agent of the same name: the far side must never see them.
	local.Set(secrets.ServiceName(), "alice/TOKEN", "local-sandbox-secret")
	local.Set(secrets.ClientService("other"), "alice/TOKEN", "other-context-secret")
	local.Set(secrets.ClientService("other"), "alice/", `["TOKEN"]`)
	connect(t, s, local, "box")

	if _, err := s.Get("alice", "TOKEN"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("Get of an entry only other namespaces hold: %v, want ErrNotFound", err)
	}
	if names, err := s.List("alice"); err != nil || len(names) != 0 {
		t.Fatalf("List = %v, %v; want none", names, err)
	}
	if err := s.Set("alice", "TOKEN", "box-secret-value"); err != nil {
		t.Fatal(err)
	}
	if v := local.m[secrets.ClientService("box")]["alice/TOKEN"]; v != "box-secret-value" {
		t.Fatalf("the value is not in this machine's store under the context: %q (%v)", v, local.m)
	}
	if local.m[secrets.ServiceName()]["alice/TOKEN"] != "local-sandbox-secret" || local.m[secrets.ClientService("other")]["alice/TOKEN"] != "other-context-secret" {
		t.Fatalf("the set reached another namespace: %v", local.m)
	}
	if v, err := s.Get("alice", "TOKEN"); err != nil || v != "box-secret-value" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if vals, err := s.Values("alice"); err != nil || len(vals) != 1 || vals["TOKEN"] != "box-secret-value" {
		t.Fatalf("Values = %v, %v", vals, err)
	}
	if got := s.Scrub("alice", "t=box-secret-value"); got != "t=[REDACTED:TOKEN]" {
		t.Errorf("Scrub = %q", got)
	}
	if err := s.Remove("alice", "TOKEN"); err != nil {
		t.Fatal(err)
	}
	if _, ok := local.m[secrets.ClientService("box")]["alice/TOKEN"]; ok {
		t.Error("Remove left the entry")
	}
}

// The latest provider answers; when it goes, an earlier one still
// connected does; when none is left, the clear error again. The value
// read last while one was connected is still scrubbed after.
func TestClientStoreProviders(t *testing.T) {
	s := clientStore(t)
	first, second := newMem(), newMem()
	first.Set(secrets.ClientService("box"), "alice/TOKEN", "first-value-1")
	second.Set(secrets.ClientService("box"), "alice/TOKEN", "second-value-2")
	cutFirst := connect(t, s, first, "box")
	cutSecond := connect(t, s, second, "box")
	for _, step := range []struct {
		cut  func()
		want string // "" : unavailable
	}{
		{nil, "second-value-2"},
		{cutSecond, "first-value-1"},
		{cutFirst, ""},
	} {
		if step.cut != nil {
			step.cut()
		}
		v, err := s.Get("alice", "TOKEN")
		if step.want == "" {
			if !errors.Is(err, secrets.ErrNoClient) {
				t.Errorf("Get with none connected: %q, %v", v, err)
			}
			continue
		}
		if err != nil || v != step.want {
			t.Errorf("Get = %q, %v; want %q", v, err, step.want)
		}
	}
	if got := s.Scrub("alice", "a=first-value-1"); got != "a=[REDACTED:TOKEN]" {
		t.Errorf("Scrub after the providers went = %q", got)
	}
}

// A provider that goes away while a request waits on it fails that
// request at once; one that doesn't answer fails it at the deadline.
func TestClientStoreNoHang(t *testing.T) {
	for _, tt := range []struct {
		name    string
		timeout time.Duration
		cut     bool
		want    string
	}{
		{"disconnect", time.Hour, true, "disconnected before it answered"},
		{"deadline", 50 * time.Millisecond, false, "did not answer within"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := clientStore(t)
			s.Clients().Timeout = tt.timeout
			local := newMem()
			local.block, local.asked = make(chan struct{}), make(chan struct{}, 1)
			defer close(local.block)
			cut := connect(t, s, local, "box")
			got := make(chan error, 1)
			go func() {
				_, err := s.Get("alice", "TOKEN")
				got <- err
			}()
			<-local.asked
			if tt.cut {
				go cut() // the provider's goroutine waits on block
			}
			err := <-got
			if !errors.Is(err, secrets.ErrUnavailable) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Get = %v, want %q", err, tt.want)
			}
		})
	}
}

// A forwarded request ends with its caller's ctx: cancelled while the
// front end has not answered, the wait ends with context.Canceled (not
// the store's unavailable error, not at the deadline), the request is no
// longer pending, and the answer that comes late is dropped: the link
// goes on serving. A ctx already done asks nothing.
func TestClientStoreFollowsCallersContext(t *testing.T) {
	s := clientStore(t)
	s.Clients().Timeout = time.Hour // only ctx can end the wait
	local := newMem()
	local.Set(secrets.ClientService("box"), "alice/TOKEN", "late-value-123")
	local.block, local.asked = make(chan struct{}), make(chan struct{}, 10)
	connect(t, s, local, "box")

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := s.GetContext(ctx, "alice", "TOKEN")
		got <- err
	}()
	<-local.asked // the front end has it and does not answer yet
	if n := s.Clients().Pending(); n != 1 {
		t.Errorf("pending while asked: %d, want 1", n)
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) || errors.Is(err, secrets.ErrUnavailable) {
		t.Fatalf("GetContext after cancel = %v, want context.Canceled", err)
	}
	if n := s.Clients().Pending(); n != 0 {
		t.Errorf("pending after cancel: %d, want 0", n)
	}
	close(local.block) // the late answer comes now, to nobody
	if v, err := s.Get("alice", "TOKEN"); err != nil || v != "late-value-123" {
		t.Errorf("Get after a late answer = %q, %v", v, err)
	}
	if n, c := s.Clients().Pending(), s.Clients().Connected(); n != 0 || c != 1 {
		t.Errorf("after: %d pending, %d connected; want 0 and 1", n, c)
	}

	done, stop := context.WithCancel(context.Background())
	stop()
	if err := s.SetContext(done, "alice", "TOKEN", "never-stored-1"); !errors.Is(err, context.Canceled) {
		t.Errorf("SetContext with a done ctx = %v", err)
	}
	if v, _ := local.Get(secrets.ClientService("box"), "alice/TOKEN"); v != "late-value-123" {
		t.Errorf("a done ctx still stored %q", v)
	}
}

// The provider answers only entries a store makes, whatever service
// name is asked for.
func TestProvideRefusesOtherEntries(t *testing.T) {
	local := newMem()
	local.Set("osaurus-sandbox", "alice/TOKEN", "real-app-secret")
	local.Set(secrets.ClientService("box"), "../x", "odd")
	far, near := net.Pipe()
	go secrets.Provide(context.Background(), near, local, secrets.ClientService("box"))
	defer far.Close()
	c := &secrets.Clients{}
	go c.Serve(context.Background(), far)
	testwait.Eventually(t, "the provider is registered", 10*time.Second, time.Millisecond, func() bool { return c.Connected() == 1 })
	for _, tt := range []struct {
		service, entry string
		want           error
	}{
		{"osaurus-sandbox", "alice/TOKEN", keyring.ErrNotFound},
		{secrets.ClientService("other"), "alice/TOKEN", keyring.ErrNotFound},
		{secrets.ClientService("box"), "../x", secrets.ErrUnavailable},
		{"", "alice", secrets.ErrUnavailable},
	} {
		v, err := c.Get(tt.service, tt.entry)
		if !errors.Is(err, tt.want) {
			t.Errorf("Get(%q, %q) = %q, %v; want %v", tt.service, tt.entry, v, err, tt.want)
		}
	}
	if names := slices.Collect(func(yield func(string) bool) {
		for k := range local.m {
			yield(k)
		}
	}); len(names) != 2 {
		t.Errorf("the provider wrote: %v", names)
	}
}
