package ui

import (
	"context"
	"sync"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// Backend is what the window drives: the sandbox of one data dir, owned by
// this process (host.Host) or by another one reached over the control socket
// (client.Client). Lifecycle methods block until done; their progress arrives
// through Subscribe.
type Backend interface {
	// Status returns a snapshot.
	Status() control.Status
	// Subscribe calls fn with every status change, from any goroutine,
	// until cancel is called.
	Subscribe(fn func(control.Status)) (cancel func())
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
	// DataDir is the data folder, named in the first-run view.
	DataDir() string
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

func (s settingsFile) DataDir() string { return s.paths.Root }

// Controlled is the Backend over an api.Controller: the manager this
// process owns (host.Host, reached directly, no socket) or another
// process that owns the VM (client.Client). Status changes arrive by
// subscription, not polling.
type Controlled struct {
	settingsFile
	ctl    api.Controller
	cancel func()
	// PluginChanges, when set, is how the Plugins tab hears at once of a
	// plugin installed in this process's tools environment (the owner's:
	// tools.Env.SubscribePlugins); other processes' show through the
	// library's files.
	PluginChanges func(fn func()) (cancel func())

	mu     sync.Mutex
	status api.Status
	subs   map[int]func(control.Status)
	next   int
}

// NewBackend returns the Backend over ctl for the data dir p. Close it
// when done (ctl stays open).
func NewBackend(ctx context.Context, ctl api.Controller, p config.Paths) (*Controlled, error) {
	st, err := ctl.Status(ctx)
	if err != nil {
		return nil, err
	}
	c := &Controlled{settingsFile: settingsFile{p}, ctl: ctl, status: st, subs: map[int]func(control.Status){}}
	c.cancel = ctl.Subscribe(c.update)
	return c, nil
}

// Close stops following the status.
func (c *Controlled) Close() { c.cancel() }

// update records st and notifies subscribers when it differs.
func (c *Controlled) update(st api.Status) {
	c.mu.Lock()
	if sameStatus(c.status.Status, st.Status) && c.status.Owner == st.Owner {
		c.mu.Unlock()
		return
	}
	c.status = st
	subs := make([]func(control.Status), 0, len(c.subs))
	for _, fn := range c.subs {
		subs = append(subs, fn)
	}
	c.mu.Unlock()
	for _, fn := range subs {
		fn(st.Status)
	}
}

func sameStatus(a, b control.Status) bool {
	if (a.Progress == nil) != (b.Progress == nil) || (a.Progress != nil && *a.Progress != *b.Progress) {
		return false
	}
	if (a.CooldownUntil == nil) != (b.CooldownUntil == nil) || (a.Unresponsive == nil) != (b.Unresponsive == nil) ||
		(a.SleepingSince == nil) != (b.SleepingSince == nil) {
		return false
	}
	a.Progress, b.Progress, a.CooldownUntil, b.CooldownUntil, a.Unresponsive, b.Unresponsive = nil, nil, nil, nil, nil, nil
	return a.State == b.State && a.Reason == b.Reason && a.Since.Equal(b.Since) &&
		a.Driver == b.Driver && a.Accel == b.Accel && a.Distro == b.Distro &&
		a.Kernel == b.Kernel && a.Pid == b.Pid && a.Restarts == b.Restarts
}

func (c *Controlled) Status() control.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status.Status
}

func (c *Controlled) Owner() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status.Owner
}

func (c *Controlled) Subscribe(fn func(control.Status)) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next++
	c.subs[id] = fn
	return func() {
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
	}
}

// lifecycle runs op; its progress arrives through the subscription.
func (c *Controlled) lifecycle(ctx context.Context, op api.Op) error {
	_, err := c.ctl.Lifecycle(ctx, op, nil)
	return err
}

func (c *Controlled) Provision(ctx context.Context) error { return c.lifecycle(ctx, api.OpProvision) }
func (c *Controlled) Start(ctx context.Context) error     { return c.lifecycle(ctx, api.OpStart) }
func (c *Controlled) Stop(ctx context.Context) error      { return c.lifecycle(ctx, api.OpStop) }
func (c *Controlled) Reset(ctx context.Context) error     { return c.lifecycle(ctx, api.OpReset) }
func (c *Controlled) Remove(ctx context.Context) error    { return c.lifecycle(ctx, api.OpRemove) }

func (c *Controlled) Diagnostics(ctx context.Context, onResult func(diagnostics.Result)) ([]diagnostics.Result, error) {
	return c.ctl.Diagnostics(ctx, "", onResult)
}

// ImagePlan asks the owner what provisioning the image of manifestURL
// fetches.
func (c *Controlled) ImagePlan(ctx context.Context, manifestURL string) (control.ImagePlan, error) {
	return c.ctl.ImagePlan(ctx, control.ImagePlanRequest{Manifest: manifestURL})
}
