// Package host is the one process that owns a data folder's VM: Host.
//
// A Host holds, for one data folder, everything that must exist once per
// machine and folder: the ownership lock (an flock on run/owner.lock, held
// for its life, so a crashed owner never blocks the next one, which adopts
// the VM it left running), the agents registry, the one tools environment
// (so one set of rate windows, exec counters and one package-install lock
// for every way in: MCP over HTTP, stdio through the control socket, the
// bridge's agent runner and plugin creation), the keychain and the secret
// prompts, the memory and event stores, the host API bridge, the sandbox
// manager and what it serves: the control socket (host/api/server) and
// MCP over HTTP. The owner is the app's window, `serve`, or the background
// owner the CLI starts when none runs.
//
// Host implements api.Controller directly; every other process drives it
// through host/api/client.
package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/bridge"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diskquota"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/api/server"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/sandbox"
	"github.com/osaurus/osaurus-sandbox/secrets"
	"github.com/osaurus/osaurus-sandbox/store/events"
	"github.com/osaurus/osaurus-sandbox/store/memory"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/secretprompt"
	"github.com/osaurus/osaurus-sandbox/vm"
)

// Options configure a Host.
type Options struct {
	Paths config.Paths
	// Kind: "app", "serve" or "background".
	Kind string
	Logf func(string, ...any)
	// Quit ends the process after a Quit request stopped the VM.
	Quit func()
	// Version is reported to MCP clients.
	Version string
	// Secrets is the secret store; nil means the data folder's (secrets.ForDataDir).
	Secrets *secrets.Store
	// NoAdopt leaves a VM a dead owner left running alone (a short-lived
	// owner of the data files, see OpenData).
	NoAdopt bool
	// Driver runs the VM; nil means the platform's (QEMU on Linux,
	// Virtualization.framework on macOS). The e2e tests pass QEMU set to
	// die with the test binary; with it the Host boots a VM or adopts one
	// left running (vm.Attacher) as it does with its own.
	Driver vm.Driver
}

// Host is the owner of one data folder's VM. Every field is made once, in
// open, and lives until Close.
type Host struct {
	paths    config.Paths
	kind     string
	logf     func(string, ...any)
	quit     func()
	quitOnce sync.Once
	version  string

	ln          *server.Listener // the ownership lock and the control socket
	stopServing func()           // ends the control socket's server; set by New
	reg         *agents.Registry
	secrets     *secrets.Store
	prompts     *secretprompt.Broker
	lib         *tools.PluginRegistry // nil when the library can't open
	mem         *memory.Store         // nil: memory is unavailable
	events      *events.Store         // nil: no event log
	activity    *ActivityLog          // each agent's last tool call
	env         *tools.Env
	bridge      *bridge.Server
	*ToolHost   // agents' tools, commands, plugins, removal: over env
	*DataOwner  // memory, events, bridge logs, tasks, the library's writes
	m           *sandbox.Manager
	// mcpURL or mcpErr: set once by serveMCP, before New returns.
	mcpURL, mcpErr string
	ports          *Ports // agents' previews on the host's loopback
	// disk is the quota monitor, set by New once it runs (nil while
	// open adopts a VM; its first round covers that one).
	disk atomic.Pointer[diskquota.Monitor]

	closeOnce sync.Once
	closers   []func() // run last first by Close

	use usage // control-socket clients and MCP requests (idleexit.go)
}

// open makes this process the owner of the data dir and builds the Host,
// adopting a VM its dead predecessor left running. It serves nothing yet.
func open(ctx context.Context, o Options) (*Host, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Secrets == nil {
		o.Secrets = secrets.ForDataDir(o.Paths)
	}
	ln, err := server.Listen(o.Paths)
	if err != nil {
		return nil, err
	}
	h := &Host{paths: o.Paths, kind: o.Kind, logf: o.Logf, quit: o.Quit, version: o.Version, ln: ln, secrets: o.Secrets}
	// Last of all, the control socket goes quiet and ownership is given
	// up: a client that waits for that (stop, Quit) then knows nothing of
	// this owner still writes in the data folder.
	h.onClose(func() {
		if h.stopServing != nil {
			h.stopServing()
		}
		ln.Close()
	})
	if h.reg, err = agents.Open(o.Paths.AgentsJSON()); err != nil {
		h.Close()
		return nil, err
	}
	// Before any tool runs (the owner runs them all): a plugin installed before imported recipes
	// were confined must not keep its agent's network.
	if err := datadir.ConfineOldPlugins(ctx, h.paths, h.reg.List(), func(a agents.Agent, id string) {
		h.logf("plugins: %s of agent %s was installed before imported recipes were confined: it now runs under the setup allowlist; review it with `osaurus-sandbox plugin show %s`", id, a.Name, id)
	}); err != nil {
		h.logf("plugins: confining old installs: %v", err)
	}
	h.prompts = &secretprompt.Broker{Store: h.secrets, Pages: &secretprompt.Pages{Store: h.secrets}}
	h.lib = datadir.PluginRegistry(o.Paths)
	// Without its database a bridge route answers 503 and MCP sessions
	// get no event notifications; the rest works.
	if h.mem, err = memory.Open(ctx, o.Paths.MemoryDB(), memory.Options{}); err != nil {
		h.logf("bridge: agent memory unavailable: %v", err)
	} else {
		h.onClose(func() { h.mem.Close() })
	}
	if h.events, err = events.Open(ctx, o.Paths.EventsDB(), events.Options{}); err != nil {
		h.logf("bridge: event log unavailable: %v", err)
	} else {
		h.onClose(func() { h.events.Close() })
	}
	h.ports = &Ports{Guest: h.running, StateFile: o.Paths.PreviewsFile(), Logf: h.logf}
	h.onClose(func() { h.ports.Close("", 0) })
	// The limiters' settings hold for this owner's life.
	cfg, err := config.LoadSandbox(o.Paths.SandboxJSON())
	if err != nil {
		h.logf("settings: %v; using the default limits", err)
	}
	rates, _ := cfg.Rates() // valid: LoadSandbox validated it, or defaults
	h.env = tools.NewEnv(tools.Options{
		RateLimits: rates, TurnIdle: cfg.TurnIdle(),
		Guest: h.guest, Agents: h.reg, Redactor: h.secrets,
		Plugins: plugins.NewInstalled(o.Paths.AgentStateDir()), Registry: h.lib,
		Secrets: tools.StoreSecrets{Store: h.secrets}, SecretStore: h.secrets, SecretPrompter: h.prompts,
		Reviewer: Reviewer{Paths: o.Paths, Events: h.events, Secrets: h.secrets, Logf: h.logf},
		Exposer:  h.ports, Checkpointer: selfCheckpointer{h}, OutputDir: o.Paths.Output(), KeepDir: o.Paths.Artifacts(),
	})
	h.activity = &ActivityLog{Path: o.Paths.AgentActivity()}
	h.onClose(h.activity.Wait)
	h.ToolHost = &ToolHost{Paths: o.Paths, Env: h.env, Registry: h.reg, Running: h.running, Memory: h.mem, Quiet: h.quiet, Activity: h.activity, Ports: h.ports}
	h.DataOwner = &DataOwner{Paths: o.Paths, MemoryDB: h.mem, EventLog: h.events, Tools: h.ToolHost, Secrets: h.secrets, Logf: h.logf}
	h.bridge = NewBridge(h.ToolHost, BridgeOptions{Secrets: h.secrets, Events: h.events, NoPluginCreation: h.lib == nil, RateLimits: rates, Logf: h.logf})
	// Before any VM runs from the root disk: a restore cut short may have
	// left it sharing its inode with the checkpoint that saved it.
	if err := h.checkpoints().Unshare(); err != nil {
		h.logf("checkpoints: %v", err)
	}
	if o.Driver == nil {
		o.Driver = newDriver(o.Paths)
	}
	h.m = sandbox.New(sandbox.Options{
		Paths:  o.Paths,
		Driver: o.Driver,
		Manifest: func(ctx context.Context, cfg config.Sandbox) (*provision.Manifest, error) {
			return loadManifest(ctx, o.Paths, cfg)
		},
		Agent: assets.GuestAgent,
		Logf:  o.Logf,
		IdleSuspend: func() time.Duration {
			cfg, _ := config.LoadSandbox(o.Paths.SandboxJSON()) // defaults on error
			return cfg.IdleSuspend()
		},
		// The registry in memory is the owner's truth: a changed
		// backgroundKeepsAwake holds from the next idle check.
		ProcessesKeepAwake: h.processesKeepAwake,
		// The host API bridge serves the guest's calls and installs
		// osaurus-host; the disk monitor gives a new session its blocks
		// and caps before any tool can use it.
		OnGuest: func(ctx context.Context, c *agentproto.Client) {
			h.bridge.Attach(ctx, c)
			if mon := h.disk.Load(); mon != nil {
				mon.Attach(ctx, c)
			}
		},
	})
	// Previews end with the VM that served them.
	h.onClose(h.m.Subscribe(func(st control.Status) {
		if st.State != control.Running {
			go h.ports.Close("", 0)
		}
	}))
	if !o.NoAdopt {
		if err := h.m.Recover(ctx); err != nil {
			h.logf("recover: %v", err)
		}
	}
	return h, nil
}

// OpenData makes this process the owner of the data folder for as long as
// one command changes its data, when no other process owns it: the CLI's
// writes go through a Host either way, so each data file has one writer.
// It serves the control socket (a concurrent command waits for it rather
// than writing beside it) but neither MCP nor the VM: a VM left running is
// left for the next full owner to adopt. It fails with api.ErrOwned when
// another process owns the data folder.
func OpenData(ctx context.Context, p config.Paths, logf func(string, ...any)) (api.Controller, error) {
	h, err := open(ctx, Options{Paths: p, Kind: "cli", Logf: logf, NoAdopt: true})
	if err != nil {
		return nil, err
	}
	srvCtx, stopServing := context.WithCancel(context.Background())
	h.stopServing = stopServing
	go (&server.Server{Ctl: h, ProvideSecrets: h.provideSecrets}).Serve(srvCtx, h.ln)
	return h, nil
}

// New makes this process the owner of the data dir: it adopts a VM left
// running, serves the control socket and MCP over HTTP, and watches the
// disk quota. It fails with api.ErrOwned when another process owns the
// data dir. Close stops serving (the VM is left as it is; Quit or
// Manager().Close decides).
func New(ctx context.Context, o Options) (*Host, error) {
	h, err := open(ctx, o)
	if err != nil {
		return nil, err
	}
	h.use.since = time.Now()
	sctx, cancel := context.WithCancel(context.Background())
	h.onClose(cancel)
	// MCP first: Status reports its address, and the control socket
	// answers Status as soon as it serves.
	h.onClose(h.serveMCP(sctx))
	srvCtx, stopServing := context.WithCancel(context.Background())
	h.stopServing = stopServing
	go (&server.Server{Ctl: h, Guest: h.running, Shell: h.ToolHost.Terminal, InUse: h.use.hold, ProvideSecrets: h.provideSecrets}).Serve(srvCtx, h.ln)
	h.onClose(h.enforceDisk(sctx))
	return h, nil
}

// onClose adds fn to what Close runs, before everything added earlier.
func (h *Host) onClose(fn func()) { h.closers = append(h.closers, fn) }

// Close stops serving and gives up ownership, undoing New's steps last
// first. The VM is left as it is.
func (h *Host) Close() {
	h.closeOnce.Do(func() {
		for i := len(h.closers) - 1; i >= 0; i-- {
			h.closers[i]()
		}
	})
}

// Paths is the data folder's layout.
func (h *Host) Paths() config.Paths { return h.paths }

// Manager is the sandbox manager this host drives.
func (h *Host) Manager() *sandbox.Manager { return h.m }

// Registry is the agents registry.
func (h *Host) Registry() *agents.Registry { return h.reg }

// Tools is the one tools environment; its plugin installs are heard by
// the MCP sessions and the window at once (SubscribePlugins).
func (h *Host) Tools() *tools.Env { return h.env }

// Secrets is the keychain the whole process shares.
func (h *Host) Secrets() *secrets.Store { return h.secrets }

// provideSecrets serves a front end that offers its machine's secrets
// (secretStore "client") until it goes.
func (h *Host) provideSecrets(ctx context.Context, conn net.Conn) error {
	cl := h.secrets.Clients()
	if cl == nil {
		conn.Close()
		return fmt.Errorf("%w: this owner's secret store takes no secrets from its clients", agentproto.ErrUnsupported)
	}
	h.logf("secrets: a front end offers its machine's secrets (%d connected)", cl.Connected()+1)
	err := cl.Serve(ctx, conn)
	h.logf("secrets: a front end that offered its secrets went (%d connected)", cl.Connected())
	return err
}

// Prompts asks the user for secrets sandbox_secret_set wants without a
// value: through the MCP client's URL elicitation (a one-time page on
// loopback) and, while it is open in this process, the window's dialog.
func (h *Host) Prompts() *secretprompt.Broker { return h.prompts }

// Memory is the agents' memory store (nil when it can't open).
func (h *Host) Memory() *memory.Store { return h.mem }

// EventStore is the event log (nil when it can't open).
func (h *Host) EventStore() *events.Store { return h.events }

func bridgeLog(p config.Paths) *bridge.LogStore { return &bridge.LogStore{Dir: p.AgentLogDir()} }

// Serve runs a headless owner until SIGINT/SIGTERM or a Quit request. A
// signal stops the VM cleanly, as Quit does; only a crash (SIGKILL) leaves
// it running, for the next owner to adopt. A background owner (started by
// the CLI) doesn't honour autoStart.
func Serve(ctx context.Context, p config.Paths, background bool, version string) error {
	logf := func(f string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s "+f+"\n", append([]any{time.Now().Format(time.RFC3339)}, a...)...)
	}
	// Catch signals before anything can take long: a signal during
	// adoption must still stop the VM.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	quit := make(chan struct{})
	var quitOnce sync.Once
	kind := "serve"
	if background {
		kind = "background"
	}
	h, err := New(ctx, Options{Paths: p, Kind: kind, Logf: logf, Version: version,
		Quit: func() { quitOnce.Do(func() { close(quit) }) }})
	if err != nil {
		return err
	}
	defer h.Close()
	m := h.Manager()
	// A background owner goes when nothing uses it (backgroundIdleMinutes).
	var idle <-chan time.Duration
	if background {
		ictx, cancel := context.WithCancel(ctx)
		defer cancel()
		idle = h.exitWhenIdle(ictx)
	}
	if cfg, err := config.LoadSandbox(p.SandboxJSON()); err == nil && cfg.AutoStart && !background {
		go func() {
			if err := m.Start(context.Background()); err != nil {
				logf("auto-start: %v", err)
			}
		}()
	}
	select {
	case s := <-sig:
		logf("%v: stopping the VM", s)
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return m.Close(sctx, true)
	case limit := <-idle:
		logf("unused for %s (backgroundIdleMinutes): stopping the VM and exiting", limit)
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return m.Close(sctx, true)
	case <-quit:
		return nil
	}
}

// StopOrphan stops the VM of a data dir nobody owns: it becomes the owner
// for as long as it takes to adopt the VM its dead owner left and stop it.
// It returns the pid it stopped (0 when nothing ran) and fails with
// api.ErrOwned when an owner appeared meanwhile. Afterwards no QEMU or
// virtiofsd of the data dir runs, or it says which do.
func StopOrphan(ctx context.Context, p config.Paths, logf func(string, ...any)) (int, error) {
	h, err := open(ctx, Options{Paths: p, Kind: "stop", Logf: logf})
	if err != nil {
		return 0, err
	}
	defer h.Close()
	pid := h.m.Status().Pid
	if err := h.m.Close(ctx, true); err != nil {
		return pid, err
	}
	if left := Helpers(p); len(left) > 0 {
		return pid, fmt.Errorf("processes of the sandbox still run after the stop (pids %v); kill them", left)
	}
	return pid, nil
}

// quiet is the awake VM's agent for background reads (the manager is
// made after the ToolHost that holds this).
func (h *Host) quiet() (*agentproto.Client, func(), error) { return h.m.Quiet() }

// running is the running VM's agent; it never starts the VM.
func (h *Host) running(context.Context) (*agentproto.Client, error) {
	g, err := h.m.Agent()
	if err != nil {
		return nil, fmt.Errorf("%w: %w; start it first", agentproto.ErrUnavailable, err)
	}
	return g, nil
}

// guest is the tools environment's way to the VM: the running VM's agent,
// starting the VM first when it is stopped (not when it needs
// provisioning, which downloads hundreds of megabytes).
func (h *Host) guest(ctx context.Context) (*agentproto.Client, error) {
	m := h.m
	if g, err := m.Agent(); err == nil {
		return g, nil
	}
	if st := m.Status().State; st == control.NotProvisioned || st == control.Provisioning {
		return nil, fmt.Errorf("%w: the sandbox is not provisioned yet; provision it in the app or with `osaurus-sandbox start`", control.ErrNotRunning)
	}
	// The boot continues when this call gives up: a second call, or
	// the user, will want the VM anyway.
	done := make(chan error, 1)
	go func() { done <- m.Start(context.WithoutCancel(ctx)) }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, control.ErrBusy) {
			return nil, fmt.Errorf("starting the sandbox VM: %w", err)
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.Agent()
}
