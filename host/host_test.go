package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/client"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// memKeychain is a keychain in memory.
type memKeychain struct {
	mu sync.Mutex
	m  map[string]string
}

func (k *memKeychain) Set(service, user, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[service+"\x00"+user] = value
	return nil
}

func (k *memKeychain) Get(service, user string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[service+"\x00"+user]
	if !ok {
		return "", secrets.ErrNotFound
	}
	return v, nil
}

func (k *memKeychain) Delete(service, user string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, service+"\x00"+user)
	return nil
}

// testHost is an owner of a fresh data dir whose VM is not provisioned,
// serving nothing.
func testHost(t *testing.T) *Host { return testHostWith(t, nil) }

// testHostWith is testHost with settings: fn's changes to the defaults.
func testHostWith(t *testing.T, fn func(*config.Sandbox)) *Host {
	t.Helper()
	dir, err := os.MkdirTemp("", "host") // short: the control socket is in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := config.Paths{Root: dir}
	if err := os.MkdirAll(filepath.Dir(p.AgentsJSON()), 0o755); err != nil {
		t.Fatal(err)
	}
	if fn != nil {
		cfg := config.Defaults()
		fn(&cfg)
		if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	h, err := open(context.Background(), Options{Paths: p, Kind: "test", Logf: t.Logf, Secrets: &secrets.Store{B: &memKeychain{m: map[string]string{}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// A second owner of the same data dir is refused until the first closes.
func TestOneOwnerPerDataDir(t *testing.T) {
	h := testHost(t)
	if _, err := open(context.Background(), Options{Paths: h.Paths(), Logf: t.Logf}); !errors.Is(err, api.ErrOwned) {
		t.Fatalf("second owner: %v, want ErrOwned", err)
	}
	h.Close()
	h2, err := open(context.Background(), Options{Paths: h.Paths(), Logf: t.Logf, Secrets: h.secrets})
	if err != nil {
		t.Fatalf("owner after the first closed: %v", err)
	}
	h2.Close()
}

// bridgeCall serves one request of the agent with slug agent through the
// host API bridge open built, as one relayed from inside the VM.
func bridgeCall(h *Host, agent, method, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r = r.WithContext(bridge.WithCaller(r.Context(), bridge.Caller{Agent: agent, User: "agent-" + agent}))
	w := httptest.NewRecorder()
	h.bridge.Handler().ServeHTTP(w, r)
	return w
}

// An agent that uses up its quota through one way in (MCP) gets no fresh
// quota through another (the control socket's RunTool, the bridge's
// plugin creation): the host has one tools environment, and its bridge
// is wired to it.
func TestOneToolsEnvironment(t *testing.T) {
	h := testHost(t)
	a, err := h.Registry().Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	if a, err = h.Registry().Update(a.ID, func(a *agents.Agent) error {
		a.AutonomousExec.Enabled, a.AutonomousExec.PluginCreate = true, true
		a.AutonomousExec.MaxCommandsPerTurn = 100
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// useUp calls tool through MCP's toolset until it is rejected. No VM:
	// every admitted call is charged, then fails as unavailable.
	useUp := func(tool, args string) {
		t.Helper()
		for i := 0; ; i++ {
			e, err := envelope.Parse(h.Tools().Toolset(a).Call(ctx, tool, []byte(args)))
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind == envelope.Rejected {
				return
			}
			if e.Kind != envelope.Unavailable || i > 1000 {
				t.Fatalf("%s call %d: %+v", tool, i, e)
			}
		}
	}
	useUp("sandbox_exec", `{"command":"true"}`)
	if e := h.RunTool(ctx, a.ID, "sandbox_exec", []byte(`{"command":"true"}`)); e.Kind != envelope.Rejected {
		t.Fatalf("after its quota ran out through MCP, the control socket's call: %+v (want rejected)", e)
	}
	// Registrations count against one quota, whether the tool or the
	// bridge's route makes them.
	useUp("sandbox_plugin_register", `{"plugin_id":"made"}`)
	if w := bridgeCall(h, a.Slug, "POST", "/api/plugin/create", `{"name":"Made","description":"d"}`); w.Code != http.StatusTooManyRequests {
		t.Fatalf("after its registrations ran out through MCP, the bridge's plugin create: %d %s (want 429)", w.Code, w.Body)
	}
}

// The rateLimits setting reaches the owner's limiters, the tools' and
// the bridge's.
func TestRateLimitsSetting(t *testing.T) {
	h := testHostWith(t, func(c *config.Sandbox) { c.RateLimits = "bridge=2,sandbox.read=3" })
	a, err := h.Registry().Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		w := bridgeCall(h, a.Slug, "GET", "/api/ping", "")
		if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[i < 2]; w.Code != want {
			t.Fatalf("bridge call %d: %d %s, want %d", i+1, w.Code, w.Body, want)
		}
	}
	// No VM: an admitted call is charged, then fails as unavailable.
	for i := range 4 {
		e, err := envelope.Parse(h.Tools().Toolset(a).Call(context.Background(), "sandbox_list_directory", []byte(`{}`)))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]envelope.Kind{true: envelope.Unavailable, false: envelope.Rejected}[i < 3]; e.Kind != want {
			t.Fatalf("read %d: %+v, want %s", i+1, e, want)
		}
	}
}

// The owner's bridge registers plugins through the tools pipeline, with
// the agents and library of its data dir: the gates are the agent's
// stored settings, and with them on the next step needs the VM.
func TestBridgePluginCreator(t *testing.T) {
	h := testHost(t)
	a, err := h.Registry().Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	const recipe = `{"name":"Made","description":"d"}`
	if w := bridgeCall(h, a.Slug, "POST", "/api/plugin/create", recipe); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "autonomous") {
		t.Fatalf("autonomous exec off: %d %s (want 403)", w.Code, w.Body)
	}
	// Turned on through the owner (the CLI's `agent set` is an AgentOps
	// call): it holds from the next call.
	if _, err := h.Registry().Update(a.ID, func(a *agents.Agent) error { a.AutonomousExec.Enabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if w := bridgeCall(h, a.Slug, "POST", "/api/plugin/create", recipe); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("VM stopped: %d %s (want 503)", w.Code, w.Body)
	}
}

// Without a VM, uninstalling drops the records (so no agent lists the
// tools) and says why the folder waits; removing from every agent does
// the same for each, a removed agent's record included.
func TestPluginUninstallWithoutVM(t *testing.T) {
	ctx := context.Background()
	h := testHost(t)
	alice, _ := h.Registry().Add("alice")
	bob, _ := h.Registry().Add("bob")
	plug, err := plugins.DecodeBytes([]byte(`{"name":"Hello","description":"Says hello","tools":[{"id":"hi","description":"Hi","run":"echo hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	store := h.installed()
	for _, id := range []string{alice.ID, bob.ID, "gone-agent"} {
		if err := store.Record(ctx, id, plug, 1); err != nil {
			t.Fatal(err)
		}
	}
	deferred, err := h.UninstallPlugin(ctx, api.PluginUninstallRequest{Agent: alice.ID, Plugin: "hello", IfRunning: true})
	if err != nil || deferred == nil {
		t.Fatalf("uninstall: deferred %v, err %v", deferred, err)
	}
	if ids, _ := store.Agents("hello"); len(ids) != 2 {
		t.Fatalf("after uninstalling alice: %v", ids)
	}
	var report []string
	if err := h.UninstallPluginEverywhere(ctx, "hello", func(l string) { report = append(report, l) }); err != nil {
		t.Fatal(err)
	}
	if ids, _ := store.Agents("hello"); len(ids) != 0 || len(report) != 0 {
		t.Fatalf("after uninstalling everywhere: %v (report %q)", ids, report)
	}
}

// Removing an agent without a VM deletes its memories, its bridge config
// and, with purge, its home's host folder.
func TestRemoveAgentWithoutVM(t *testing.T) {
	ctx := context.Background()
	h := testHost(t)
	a, _ := h.Registry().Add("alice")
	if _, err := h.Memory().Add(ctx, a.Slug, "the deploy key is in the vault", nil); err != nil {
		t.Fatal(err)
	}
	cfg := &bridge.ConfigStore{Dir: h.Paths().BridgeConfigDir()}
	if err := cfg.Set(a.Slug, "region", "eu"); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(h.Paths().AgentHomes(), a.Slug)
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := h.RemoveAgent(ctx, api.RemoveAgentRequest{Agent: a.ID, Purge: true})
	if err != nil || r.UserRemoved || !r.HomeDeleted || r.ForgetError != "" || r.Agent.ID != a.ID {
		t.Fatalf("RemoveAgent: %+v, %v", r, err)
	}
	if _, err := h.Registry().Get(a.ID); !errors.Is(err, agents.ErrNotFound) {
		t.Errorf("the registry after RemoveAgent: %v", err)
	}
	if n, err := h.Memory().Count(ctx, a.Slug); err != nil || n != 0 {
		t.Errorf("memories after RemoveAgent: %d, %v", n, err)
	}
	if _, ok, err := cfg.Get(a.Slug, "region"); ok || err != nil {
		t.Errorf("bridge config after RemoveAgent: found %v, %v", ok, err)
	}
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("home after a purge: %v", err)
	}
}

// An imported recipe installed by a version before confinement (its
// record has no network permission) is confined when an owner opens the
// data dir, as a fresh install would be, and flagged for review; the
// user's own recipe keeps its agent's network.
func TestOwnerConfinesOldPluginInstalls(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "host")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := config.Paths{Root: dir}
	if err := os.MkdirAll(filepath.Dir(p.AgentsJSON()), 0o755); err != nil {
		t.Fatal(err)
	}
	reg, err := agents.Open(p.AgentsJSON())
	if err != nil {
		t.Fatal(err)
	}
	alice, err := reg.Add("alice")
	if err != nil {
		t.Fatal(err)
	}
	lib, err := plugins.OpenLibrary(p.PluginsDir())
	if err != nil {
		t.Fatal(err)
	}
	store := plugins.NewInstalled(p.AgentStateDir())
	for _, c := range []struct{ name, kind string }{{"Fetched", plugins.OriginURL}, {"Mine", plugins.OriginEditor}} {
		pl, err := plugins.DecodeBytes([]byte(`{"name":"` + c.name + `","description":"d","tools":[{"id":"t","description":"t","run":"curl example.com"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		e, _, err := lib.Save(ctx, pl, plugins.Origin{Kind: c.kind, Location: "https://example.com/r.json"})
		if err != nil {
			t.Fatal(err)
		}
		// What an install before confinement recorded: the library's
		// recipe as it is.
		if err := store.Record(ctx, alice.ID, pl, e.Current().Number); err != nil {
			t.Fatal(err)
		}
	}
	var logged []string
	h, err := open(ctx, Options{Paths: p, Kind: "test", Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) },
		Secrets: &secrets.Store{B: &memKeychain{m: map[string]string{}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	list, err := store.List(alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	allow := strings.Join(datadir.SetupAllowlist(p), ",")
	if in := list["fetched"]; in.Recipe.Permissions == nil || in.Recipe.Permissions.Network == "" || in.Review == "" {
		t.Errorf("the imported recipe after the owner opened: %+v (setup allowlist %s)", in, allow)
	}
	if in := list["mine"]; in.Recipe.NetworkPolicy().String() != "outbound" || in.Review != "" {
		t.Errorf("the user's own recipe after the owner opened: %+v", in)
	}
	if !strings.Contains(strings.Join(logged, "\n"), "fetched of agent alice was installed before") {
		t.Errorf("the owner did not say what it confined: %q", logged)
	}
}

// `stop` returns only when the owner is done: when Quit returns, the
// owner has closed everything and given up the data folder, so another
// process can own it at once and nothing of the old one writes into it
// any more (a folder removed right after stop was seen to fail because
// the quitting owner still wrote its run files).
func TestQuitReturnsWhenTheOwnerIsDone(t *testing.T) {
	dir, err := os.MkdirTemp("", "host") // short: the control socket is in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := config.Paths{Root: dir}
	cfg := config.Defaults()
	cfg.MCPPort = freePort(t)
	if err := config.SaveSandbox(p.SandboxJSON(), cfg); err != nil {
		t.Fatal(err)
	}
	var h *Host
	quit := make(chan struct{})
	h, err = New(context.Background(), Options{Paths: p, Kind: "background", Logf: t.Logf,
		Secrets: &secrets.Store{B: &memKeychain{m: map[string]string{}}},
		// As Serve does: the process closes the host after the Quit call
		// stopped the VM, on its own goroutine.
		Quit: func() { close(quit) }})
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-quit; h.Close() }()
	t.Cleanup(h.Close)

	c, err := client.Dial(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Quit(context.Background()); err != nil {
		t.Fatalf("Quit: %v", err)
	}
	next, err := open(context.Background(), Options{Paths: p, Kind: "test", Logf: t.Logf,
		Secrets: &secrets.Store{B: &memKeychain{m: map[string]string{}}}})
	if err != nil {
		t.Fatalf("owning the folder right after Quit returned: %v", err)
	}
	next.Close()
}

// freePort returns a loopback port nothing listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
