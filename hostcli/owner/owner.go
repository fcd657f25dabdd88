// Package owner is the one process that owns a data dir's VM, and the
// way every other process reaches it.
//
// Ownership is an flock on run/owner.lock, held for the owner's life, so a
// crashed owner never blocks the next one. The owner adopts a VM its dead
// predecessor left running, serves the control socket (run/control.sock,
// agentproto: "ctl.*" operations it handles itself, every other op relayed
// to the guest agent) and MCP over HTTP, and runs every agent's tools with
// one set of limits. The owner is the app's window, `serve`, or the
// background owner the CLI starts when none runs.
//
// Controller is what the CLI, the stdio MCP server and the window drive:
// Local in the owner itself, Client everywhere else.
package owner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/sandbox"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/mcpserver"
)

// ErrNoOwner: no process owns the sandbox right now.
var ErrNoOwner = errors.New("no sandbox app is running")

// ErrOwned: another process already owns this data dir.
var ErrOwned = errors.New("another osaurus-sandbox process owns this data dir")

func socketPath(p config.Paths) string { return filepath.Join(p.Run(), "control.sock") }

// Listen claims ownership of the data dir and listens on its control
// socket. The claim is an flock held until the listener is closed.
func Listen(p config.Paths) (*Listener, error) {
	if err := os.MkdirAll(p.Run(), 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(p.Run(), "owner.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w (%s)", ErrOwned, p.Root)
	}
	sock := socketPath(p)
	os.Remove(sock) // stale from a crashed owner; we hold the lock
	ln, err := netListenUnix(sock)
	if err != nil {
		lock.Close()
		return nil, err
	}
	os.Chmod(sock, 0o600)
	return &Listener{Listener: ln, lock: lock}, nil
}

// Options configure an owner.
type Options struct {
	Paths config.Paths
	// Kind: "app", "serve" or "background".
	Kind string
	Logf func(string, ...any)
	// Quit ends the process after a Quit request stopped the VM.
	Quit func()
	// Version is reported to MCP clients.
	Version string
}

// Owner is a running owner: its controller and what it serves.
type Owner struct {
	*Local
	stop func()
}

// Own makes this process the owner of the data dir: it adopts a VM left
// running, serves the control socket and MCP over HTTP. It fails with
// ErrOwned when another process owns the data dir. Close stops serving
// (the VM is left as it is; Quit or Manager().Close decides).
func Own(ctx context.Context, o Options) (*Owner, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	ln, err := Listen(o.Paths)
	if err != nil {
		return nil, err
	}
	lim := NewLimits()
	m := newManager(o.Paths, o.Logf, lim)
	if err := m.Recover(ctx); err != nil {
		o.Logf("recover: %v", err)
	}
	reg, err := agents.Open(o.Paths.AgentsJSON())
	if err != nil {
		ln.Close()
		return nil, err
	}
	host := &ToolHost{Env: tools.NewEnv(lim.apply(tools.Options{
		Guest: managerGuest(m), Agents: reg, Redactor: Secrets,
		Plugins: plugins.NewInstalled(o.Paths.AgentStateDir()), Registry: PluginRegistry(o.Paths),
		Secrets: PluginSecrets, SecretStore: Secrets, SecretPrompter: SecretPrompts,
	})), Registry: reg}
	l := NewLocal(m, LocalOptions{Kind: o.Kind, DiagEnv: DiagEnv(o.Paths), Tools: host, Quit: o.Quit})
	sctx, cancel := context.WithCancel(context.Background())
	go (&Server{Ctl: l}).Serve(sctx, ln)
	go mcpserver.Watch(sctx, reg, 2*time.Second, o.Logf)
	stopMCP := serveMCP(sctx, host, o.Version, EventsOrNil(sctx, o.Paths, o.Logf), o.Logf)
	stopQuota := enforceDisk(sctx, o.Paths, m, o.Logf)
	var once sync.Once
	return &Owner{Local: l, stop: func() { once.Do(func() { cancel(); ln.Close(); stopMCP(); stopQuota() }) }}, nil
}

// Close stops serving and gives up ownership.
func (o *Owner) Close() { o.stop() }

// NewManager builds the sandbox manager for a data dir, for a process
// that serves no tools (its bridge's runner gets limits of its own).
func NewManager(p config.Paths, logf func(string, ...any)) *sandbox.Manager {
	return newManager(p, logf, Limits{})
}

// newManager builds the sandbox manager for a data dir; its bridge's
// tools count against lim.
func newManager(p config.Paths, logf func(string, ...any), lim Limits) *sandbox.Manager {
	// The bridge's agent runner reaches the VM through the manager made
	// here.
	var m *sandbox.Manager
	guest := func(ctx context.Context) (*agentproto.Client, error) { return managerGuest(m)(ctx) }
	m = sandbox.New(sandbox.Options{
		Paths:  p,
		Driver: newDriver(p),
		Manifest: func(ctx context.Context, cfg config.Sandbox) (*provision.Manifest, error) {
			return loadManifest(ctx, p, cfg)
		},
		Agent: assets.GuestAgent,
		Logf:  logf,
		// The host API bridge: serves the guest's calls, installs osaurus-host.
		OnGuest: NewBridge(p, logf, guest, lim).Attach,
	})
	return m
}

// DiagEnv fills the diagnostics settings from sandbox.json.
func DiagEnv(p config.Paths) func(*diagnostics.Env) {
	return func(env *diagnostics.Env) {
		cfg, _ := config.LoadSandbox(p.SandboxJSON())
		env.NATURL = natURL(cfg)
		env.Bridge = diagnostics.CheckBridge
	}
}

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
	o, err := Own(ctx, Options{Paths: p, Kind: kind, Logf: logf, Version: version,
		Quit: func() { quitOnce.Do(func() { close(quit) }) }})
	if err != nil {
		return err
	}
	defer o.Close()
	m := o.Manager()
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
	case <-quit:
		return nil
	}
}

// connectPeer connects to the owner, starting a background owner when
// none runs.
func connectPeer(ctx context.Context, p config.Paths) (*agentproto.Peer, error) {
	peer, err := dialPeer(ctx, p)
	if err == nil || !errors.Is(err, ErrNoOwner) {
		return peer, err
	}
	if err := spawnOwner(p); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		peer, err := dialPeer(ctx, p)
		if err == nil {
			return peer, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the background sandbox process did not come up; see %s: %w", filepath.Join(p.Logs(), "serve.log"), err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond): // poll for the socket
		}
	}
}

// spawnOwner starts `osaurus-sandbox serve --background` detached, logging
// to logs/serve.log.
func spawnOwner(p config.Paths) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.Logs(), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(p.Logs(), "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(exe, "serve", "--background")
	cmd.Env = append(os.Environ(), config.HomeEnv+"="+p.Root)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the background sandbox process: %w", err)
	}
	return cmd.Process.Release()
}

// Probe describes the sandbox when no process owns it: the state on disk,
// or, when the dead owner's VM still runs, "running" and adoptable, with
// its pid and since when.
func Probe(p config.Paths) Status {
	st := Status{Status: sandbox.New(sandbox.Options{Paths: p}).Status(), Owner: "none"}
	if pid, since := leftover(p); pid != 0 {
		st.State, st.Pid, st.Adoptable = sandbox.Running, pid, true
		st.Since = since
		st.Reason = "left running by an osaurus-sandbox process that exited; `osaurus-sandbox stop` stops it, `start` adopts it"
	}
	return st
}

// StopOrphan stops the VM of a data dir nobody owns: it becomes the owner
// for as long as it takes to adopt the VM its dead owner left and stop it.
// It returns the pid it stopped (0 when nothing ran) and fails with
// ErrOwned when an owner appeared meanwhile. Afterwards no QEMU or
// virtiofsd of the data dir runs, or it says which do.
func StopOrphan(ctx context.Context, p config.Paths, logf func(string, ...any)) (int, error) {
	ln, err := Listen(p)
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	m := NewManager(p, logf)
	if err := m.Recover(ctx); err != nil {
		logf("adopting the VM: %v", err)
	}
	pid := m.Status().Pid
	if err := m.Close(ctx, true); err != nil {
		return pid, err
	}
	if left := helpers(p); len(left) > 0 {
		return pid, fmt.Errorf("processes of the sandbox still run after the stop (pids %v); kill them", left)
	}
	return pid, nil
}
