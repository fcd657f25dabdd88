package hostcli

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
	"github.com/osaurus/osaurus-sandbox/assets"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/control"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/provision"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// NewManager builds the sandbox manager for a data dir; the GUI uses it too.
func NewManager(p config.Paths, logf func(string, ...any)) *sandbox.Manager {
	o := sandbox.Options{
		Paths:  p,
		Driver: newDriver(p),
		Manifest: func(ctx context.Context, cfg config.Sandbox) (*provision.Manifest, error) {
			return loadManifest(ctx, p, cfg)
		},
		Agent: assets.GuestAgent,
		Logf:  logf,
	}
	// The host API bridge: serves the guest's calls, installs osaurus-host.
	// Its agent runner reaches the VM through the manager made below.
	var m *sandbox.Manager
	o.OnGuest = NewBridge(p, logf, func(ctx context.Context) (*agentproto.Client, error) { return managerGuest(m)(ctx) }).Attach
	m = sandbox.New(o)
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

// Own makes this process the owner of the data dir: it adopts a VM left
// running, serves the control socket, and honours autoStart. It returns
// the manager and a function that stops serving.
func Own(ctx context.Context, p config.Paths, owner string, logf func(string, ...any), quit func()) (*sandbox.Manager, func(), error) {
	ln, err := control.Listen(p)
	if err != nil {
		return nil, nil, err
	}
	m := NewManager(p, logf)
	if err := m.Recover(ctx); err != nil {
		logf("recover: %v", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	srv := &control.Server{M: m, DiagEnv: DiagEnv(p), Quit: quit, Owner: owner}
	go srv.Serve(sctx, ln)
	stopMCP := serveMCP(p, m, logf)
	return m, func() { cancel(); ln.Close(); stopMCP() }, nil
}

// serve runs the headless owner until a signal or a quit request.
func serve(ctx context.Context, p config.Paths, background bool) error {
	logf := func(f string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s "+f+"\n", append([]any{time.Now().Format(time.RFC3339)}, a...)...)
	}
	quit := make(chan struct{})
	var quitOnce sync.Once
	once := func() { quitOnce.Do(func() { close(quit) }) }
	owner := "serve"
	if background {
		owner = "background"
	}
	m, stop, err := Own(ctx, p, owner, logf, func() { go once() })
	if err != nil {
		return err
	}
	defer stop()
	if cfg, err := config.LoadSandbox(p.SandboxJSON()); err == nil && cfg.AutoStart && !background {
		go func() {
			if err := m.Start(context.Background()); err != nil {
				logf("auto-start: %v", err)
			}
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
		logf("signal: stopping the VM")
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return m.Close(sctx, true)
	case <-quit:
		return nil
	}
}

// connect returns a client of the owner, starting a background owner when
// none runs.
func connect(ctx context.Context, p config.Paths) (*control.Client, error) {
	c, err := control.Dial(ctx, p)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, control.ErrNoOwner) {
		return nil, err
	}
	if err := spawnOwner(p); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := control.Dial(ctx, p)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the background sandbox process did not come up; see %s: %w", filepath.Join(p.Logs(), "serve.log"), err)
		}
		time.Sleep(50 * time.Millisecond)
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
