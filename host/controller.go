package host

import (
	"context"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/diagnostics"
	"github.com/osaurus/osaurus-sandbox/host/api"
)

// Host is the Controller of the process that owns the VM: calls go
// straight to its manager and tools environment.
var _ api.Controller = (*Host)(nil)

// Status returns the manager's view.
func (h *Host) Status(context.Context) (api.Status, error) {
	st := h.apiStatus(h.m.Status())
	// Read now, as the store does: a changed setting holds at once.
	if cfg, err := config.LoadSandbox(h.paths.SandboxJSON()); err == nil {
		st.SecretStore = cfg.SecretBackend()
	}
	return st, nil
}

// Subscribe follows the manager's status.
func (h *Host) Subscribe(fn func(api.Status)) func() {
	return h.m.Subscribe(func(st control.Status) {
		fn(h.apiStatus(st))
	})
}

// Lifecycle runs op on the manager.
func (h *Host) Lifecycle(ctx context.Context, op api.Op, onStatus func(control.Status)) (control.Status, error) {
	run := map[api.Op]func(context.Context) error{
		api.OpProvision: h.m.Provision, api.OpStart: h.m.Start, api.OpStop: h.m.Stop,
		api.OpReset: h.m.Reset, api.OpRemove: h.m.Remove,
		api.OpSuspend: h.m.Suspend, api.OpResume: h.m.Resume,
	}[op]
	if run == nil {
		return control.Status{}, fmt.Errorf("unknown lifecycle operation %q", op)
	}
	if onStatus != nil {
		defer h.m.Subscribe(onStatus)()
	}
	if op == api.OpReset {
		if _, err := h.safetyCheckpoint(ctx, "reset"); err != nil {
			return h.m.Status(), err
		}
	}
	if err := run(ctx); err != nil {
		return h.m.Status(), err
	}
	return h.m.Status(), nil
}

// Quit stops the VM, then ends the process through Options.Quit.
func (h *Host) Quit(ctx context.Context) error {
	err := h.m.Close(ctx, true)
	if h.quit != nil {
		h.quitOnce.Do(h.quit)
	}
	return err
}

// Diagnostics runs the standard checks against the running VM.
func (h *Host) Diagnostics(ctx context.Context, agent string, onResult func(diagnostics.Result)) ([]diagnostics.Result, error) {
	env := diagnostics.Env{}
	list := h.reg.List()
	if agent != "" {
		a, err := h.reg.Get(agent)
		if err != nil {
			return nil, fmt.Errorf("diagnostics --agent %q: %w (`osaurus-sandbox agent list` shows the agents)", agent, err)
		}
		list = []agents.Agent{a}
	}
	env.Agents = diagnostics.UsersOf(list)
	if a, err := h.m.Agent(); err == nil {
		env.Agent = a
		env.PackageManager = a.Info.PackageMgr
	}
	cfg, _ := config.LoadSandbox(h.paths.SandboxJSON()) // defaults on error
	env.NATURL = natURL(cfg)
	env.Bridge = diagnostics.CheckBridge
	// Logged as well: the owner's log is the record of a run the window
	// started (and what the UI smoke test reads back).
	rs := diagnostics.Run(ctx, env, diagnostics.ChecksFor(env), func(r diagnostics.Result) {
		h.logf("diagnostics: %s: %s %q", r.Name, r.Outcome, r.Detail)
		if onResult != nil {
			onResult(r)
		}
	})
	h.logf("diagnostics: done (%d checks)", len(rs))
	return rs, nil
}
