package ui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/control"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/sandbox"
)

// Backend is what the window drives: the sandbox of one data dir, owned by
// this process (Local) or by another one reached over the control socket
// (Remote). Lifecycle methods block until done; their progress arrives
// through Subscribe.
type Backend interface {
	// Status returns a snapshot.
	Status() sandbox.Status
	// Subscribe calls fn with every status change, from any goroutine,
	// until cancel is called.
	Subscribe(fn func(sandbox.Status)) (cancel func())
	Provision(ctx context.Context) error
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	Reset(ctx context.Context) error
	Remove(ctx context.Context) error
	// Diagnostics runs the standard checks, calling onResult as each
	// finishes.
	Diagnostics(ctx context.Context, onResult func(diagnostics.Result)) ([]diagnostics.Result, error)
	// Settings reads sandbox.json; SaveSettings validates and writes it.
	Settings() (config.Sandbox, error)
	SaveSettings(config.Sandbox) error
	// ConsoleLog is the guest console's log file.
	ConsoleLog() string
	// Owner says who owns the VM: "app" for this process, else the kind
	// of the process that does ("serve", "background").
	Owner() string
}

// settingsFile implements the settings half of Backend: sandbox.json is
// read and written directly whoever owns the VM, as the CLI does.
type settingsFile struct{ paths config.Paths }

func (s settingsFile) Settings() (config.Sandbox, error) {
	return config.LoadSandbox(s.paths.SandboxJSON())
}

func (s settingsFile) SaveSettings(cfg config.Sandbox) error {
	return config.SaveSandbox(s.paths.SandboxJSON(), cfg)
}

func (s settingsFile) ConsoleLog() string { return s.paths.ConsoleLog() }

// Local is a Backend over the manager this process owns.
type Local struct {
	settingsFile
	m       *sandbox.Manager
	diagEnv func(*diagnostics.Env)
}

// NewLocal returns a Backend over m. diagEnv completes the diagnostics
// environment (hostcli.DiagEnv); it may be nil.
func NewLocal(m *sandbox.Manager, diagEnv func(*diagnostics.Env)) *Local {
	return &Local{settingsFile: settingsFile{m.Paths()}, m: m, diagEnv: diagEnv}
}

func (l *Local) Status() sandbox.Status                   { return l.m.Status() }
func (l *Local) Subscribe(fn func(sandbox.Status)) func() { return l.m.Subscribe(fn) }
func (l *Local) Provision(ctx context.Context) error      { return l.m.Provision(ctx) }
func (l *Local) Start(ctx context.Context) error          { return l.m.Start(ctx) }
func (l *Local) Stop(ctx context.Context) error           { return l.m.Stop(ctx) }
func (l *Local) Reset(ctx context.Context) error          { return l.m.Reset(ctx) }
func (l *Local) Remove(ctx context.Context) error         { return l.m.Remove(ctx) }
func (l *Local) Owner() string                            { return "app" }

// Diagnostics runs the checks against the running VM, as the control
// server does for the CLI.
func (l *Local) Diagnostics(ctx context.Context, onResult func(diagnostics.Result)) ([]diagnostics.Result, error) {
	a, err := l.m.Agent()
	if err != nil {
		return nil, err
	}
	env := diagnostics.Env{Agent: a, PackageManager: a.Info.PackageMgr}
	if l.diagEnv != nil {
		l.diagEnv(&env)
	}
	return diagnostics.Run(ctx, env, diagnostics.Checks(), onResult), nil
}

// Remote is a Backend over another process that owns the VM (a `serve`
// daemon, or the background owner the CLI started). Status is polled.
type Remote struct {
	settingsFile
	interval time.Duration

	mu     sync.Mutex
	client *control.Client
	status sandbox.Status
	owner  string
	subs   map[int]func(sandbox.Status)
	next   int

	stop chan struct{}
	done chan struct{}
}

// ErrOwnerGone: the process that owned the VM exited while the window was
// open.
var ErrOwnerGone = errors.New("the osaurus-sandbox process that owned the sandbox has exited")

// NewRemote connects to the owner of p's data dir and polls its status
// every interval until Close.
func NewRemote(ctx context.Context, p config.Paths, interval time.Duration) (*Remote, error) {
	c, err := control.Dial(ctx, p)
	if err != nil {
		return nil, err
	}
	st, err := c.Status(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	r := &Remote{
		settingsFile: settingsFile{p}, interval: interval,
		client: c, status: st.Status, owner: st.Owner,
		subs: map[int]func(sandbox.Status){},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go r.poll()
	return r, nil
}

// Close stops polling and disconnects.
func (r *Remote) Close() {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	if r.client != nil {
		r.client.Close()
		r.client = nil
	}
	r.mu.Unlock()
}

func (r *Remote) poll() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := r.fetch(ctx)
		cancel()
		if err != nil {
			// The owner is gone: show the VM as the files on disk describe
			// it, with the reason.
			st = sandbox.New(sandbox.Options{Paths: r.paths}).Status()
			st.Reason = ErrOwnerGone.Error() + "; reopen this window to manage the sandbox"
		}
		r.update(st)
	}
}

// fetch asks the owner for its status, reconnecting when needed.
func (r *Remote) fetch(ctx context.Context) (sandbox.Status, error) {
	r.mu.Lock()
	c := r.client
	r.mu.Unlock()
	if c == nil {
		var err error
		if c, err = control.Dial(ctx, r.paths); err != nil {
			return sandbox.Status{}, err
		}
		r.mu.Lock()
		r.client = c
		r.mu.Unlock()
	}
	st, err := c.Status(ctx)
	if err != nil {
		r.mu.Lock()
		if r.client == c {
			r.client = nil
		}
		r.mu.Unlock()
		c.Close()
		return sandbox.Status{}, err
	}
	r.mu.Lock()
	r.owner = st.Owner
	r.mu.Unlock()
	return st.Status, nil
}

// update records st and notifies subscribers when it differs.
func (r *Remote) update(st sandbox.Status) {
	r.mu.Lock()
	if sameStatus(r.status, st) {
		r.mu.Unlock()
		return
	}
	r.status = st
	subs := make([]func(sandbox.Status), 0, len(r.subs))
	for _, fn := range r.subs {
		subs = append(subs, fn)
	}
	r.mu.Unlock()
	for _, fn := range subs {
		fn(st)
	}
}

func sameStatus(a, b sandbox.Status) bool {
	if (a.Progress == nil) != (b.Progress == nil) || (a.Progress != nil && *a.Progress != *b.Progress) {
		return false
	}
	if (a.CooldownUntil == nil) != (b.CooldownUntil == nil) {
		return false
	}
	a.Progress, b.Progress, a.CooldownUntil, b.CooldownUntil = nil, nil, nil, nil
	return a.State == b.State && a.Reason == b.Reason && a.Since.Equal(b.Since) &&
		a.Driver == b.Driver && a.Accel == b.Accel && a.Distro == b.Distro &&
		a.Kernel == b.Kernel && a.Pid == b.Pid && a.Restarts == b.Restarts
}

func (r *Remote) Status() sandbox.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

func (r *Remote) Owner() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owner
}

func (r *Remote) Subscribe(fn func(sandbox.Status)) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.next
	r.next++
	r.subs[id] = fn
	return func() {
		r.mu.Lock()
		delete(r.subs, id)
		r.mu.Unlock()
	}
}

// lifecycle runs op on its own connection, so a long provision does not
// hold up status polls, and relays its status events.
func (r *Remote) lifecycle(ctx context.Context, op string) error {
	c, err := control.Dial(ctx, r.paths)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOwnerGone, err)
	}
	defer c.Close()
	st, err := c.Lifecycle(ctx, op, r.update)
	if err != nil {
		return err
	}
	r.update(st)
	return nil
}

func (r *Remote) Provision(ctx context.Context) error { return r.lifecycle(ctx, control.OpProvision) }
func (r *Remote) Start(ctx context.Context) error     { return r.lifecycle(ctx, control.OpStart) }
func (r *Remote) Stop(ctx context.Context) error      { return r.lifecycle(ctx, control.OpStop) }
func (r *Remote) Reset(ctx context.Context) error     { return r.lifecycle(ctx, control.OpReset) }
func (r *Remote) Remove(ctx context.Context) error    { return r.lifecycle(ctx, control.OpRemove) }

func (r *Remote) Diagnostics(ctx context.Context, onResult func(diagnostics.Result)) ([]diagnostics.Result, error) {
	c, err := control.Dial(ctx, r.paths)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOwnerGone, err)
	}
	defer c.Close()
	return c.Diagnostics(ctx, onResult)
}
