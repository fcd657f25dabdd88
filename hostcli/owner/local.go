package owner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/sandbox"
	"github.com/osaurus/osaurus-sandbox/tools"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// ToolHost runs agents' tools in the owner process: one tools.Env, so one
// set of rate windows, exec counters and one install lock for every
// transport (HTTP here, stdio through the control socket) and process.
type ToolHost struct {
	Env      *tools.Env
	Registry *agents.Registry
}

// RunTool runs tool as the agent with id agentID, as the registry says it
// is now.
func (h *ToolHost) RunTool(ctx context.Context, agentID, tool string, args json.RawMessage) envelope.Envelope {
	// A setting another process (the CLI, the window) changed a moment
	// ago holds from this call on, not from the next periodic reload.
	if err := h.Registry.ReloadIfChanged(); err != nil {
		return envelope.Failf(tool, envelope.Unavailable, "reading the agents' settings: %v", err)
	}
	a, err := h.Registry.Get(agentID)
	if err != nil {
		return envelope.Failf(tool, envelope.ToolNotFound, "agent %s: %v; its tools are gone", agentID, err)
	}
	return h.Env.RunTool(ctx, a, tool, args)
}

// EndTurn starts a new turn of agentID for the exec limiter.
func (h *ToolHost) EndTurn(ctx context.Context, agentID string) { h.Env.EndTurn(ctx, agentID) }

// Local is the Controller of the process that owns the VM: calls go
// straight to its manager.
type Local struct {
	m    *sandbox.Manager
	o    LocalOptions
	once sync.Once
}

// LocalOptions complete a Local.
type LocalOptions struct {
	// Kind of owner: "app", "serve" or "background".
	Kind string
	// DiagEnv completes the diagnostics environment (NAT URL, bridge).
	DiagEnv func(*diagnostics.Env)
	// Tools runs agents' tools; RunTool fails without it.
	Tools *ToolHost
	// Quit is called by Quit after the VM stopped, to end the process.
	Quit func()
}

// NewLocal returns the Controller over m.
func NewLocal(m *sandbox.Manager, o LocalOptions) *Local { return &Local{m: m, o: o} }

// Tools is the owner's tool host (nil when it has none): one tools.Env
// whose plugin installs its MCP sessions hear of at once.
func (l *Local) Tools() *ToolHost { return l.o.Tools }

// Manager is the manager this controller drives.
func (l *Local) Manager() *sandbox.Manager { return l.m }

// Status returns the manager's view.
func (l *Local) Status(context.Context) (Status, error) {
	return Status{Status: l.m.Status(), Owner: l.o.Kind}, nil
}

// Subscribe follows the manager's status.
func (l *Local) Subscribe(fn func(Status)) func() {
	return l.m.Subscribe(func(st sandbox.Status) { fn(Status{Status: st, Owner: l.o.Kind}) })
}

// Lifecycle runs op on the manager.
func (l *Local) Lifecycle(ctx context.Context, op Op, onStatus func(sandbox.Status)) (sandbox.Status, error) {
	run := map[Op]func(context.Context) error{
		OpProvision: l.m.Provision, OpStart: l.m.Start, OpStop: l.m.Stop,
		OpReset: l.m.Reset, OpRemove: l.m.Remove,
	}[op]
	if run == nil {
		return sandbox.Status{}, fmt.Errorf("unknown lifecycle operation %q", op)
	}
	if onStatus != nil {
		defer l.m.Subscribe(onStatus)()
	}
	if err := run(ctx); err != nil {
		return l.m.Status(), err
	}
	return l.m.Status(), nil
}

// Quit stops the VM, then ends the process through LocalOptions.Quit.
func (l *Local) Quit(ctx context.Context) error {
	err := l.m.Close(ctx, true)
	if l.o.Quit != nil {
		l.once.Do(l.o.Quit)
	}
	return err
}

// Diagnostics runs the standard checks against the running VM.
func (l *Local) Diagnostics(ctx context.Context, onResult func(diagnostics.Result)) ([]diagnostics.Result, error) {
	env := diagnostics.Env{}
	if a, err := l.m.Agent(); err == nil {
		env.Agent = a
		env.PackageManager = a.Info.PackageMgr
	}
	if l.o.DiagEnv != nil {
		l.o.DiagEnv(&env)
	}
	return diagnostics.Run(ctx, env, diagnostics.Checks(), onResult), nil
}

// Guest returns the running VM's agent.
func (l *Local) Guest(context.Context) (*agentproto.Client, error) {
	g, err := l.m.Agent()
	if err != nil {
		return nil, fmt.Errorf("%w: %w; start it first", agentproto.ErrUnavailable, err)
	}
	return g, nil
}

// RunTool runs a tool in this process.
func (l *Local) RunTool(ctx context.Context, agentID, tool string, args json.RawMessage) envelope.Envelope {
	if l.o.Tools == nil {
		return envelope.Fail(tool, envelope.Unavailable, "this process serves no tools")
	}
	return l.o.Tools.RunTool(ctx, agentID, tool, args)
}

// EndTurn starts a new turn of agentID.
func (l *Local) EndTurn(ctx context.Context, agentID string) error {
	if l.o.Tools != nil {
		l.o.Tools.EndTurn(ctx, agentID)
	}
	return nil
}

// Close does nothing: the VM belongs to the process, not the controller.
func (l *Local) Close() {}

// managerGuest is the owner's tools.GuestFunc: the running VM's agent,
// starting the VM first when it is stopped (not when it needs
// provisioning, which downloads hundreds of megabytes).
func managerGuest(m *sandbox.Manager) tools.GuestFunc {
	return func(ctx context.Context) (*agentproto.Client, error) {
		if g, err := m.Agent(); err == nil {
			return g, nil
		}
		if st := m.Status().State; st == sandbox.NotProvisioned || st == sandbox.Provisioning {
			return nil, fmt.Errorf("%w: the sandbox is not provisioned yet; provision it in the app or with `osaurus-sandbox start`", sandbox.ErrNotRunning)
		}
		// The boot continues when this call gives up: a second call, or
		// the user, will want the VM anyway.
		done := make(chan error, 1)
		go func() { done <- m.Start(context.WithoutCancel(ctx)) }()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, sandbox.ErrBusy) {
				return nil, fmt.Errorf("starting the sandbox VM: %w", err)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return m.Agent()
	}
}
