package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/filewatch"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// Plugin timeouts, as in Osaurus: a plugin tool gets sandbox_exec's
// default; dependencies and setup get 300 s each.
const (
	PluginToolTimeout  = DefaultExecTimeout
	PluginSetupTimeout = 300 * time.Second
)

// InstalledPlugins tells which plugins an agent installed and records
// installs; *plugins.Installed satisfies it.
type InstalledPlugins interface {
	Installed(agentID string) ([]*plugins.Plugin, error)
	Record(ctx context.Context, agentID string, p *plugins.Plugin, libraryVersion int) error
	Forget(ctx context.Context, agentID, pluginID string) error
}

// PluginSecrets gives a plugin command its declared secrets for an agent
// (its slug, the name its secrets are stored under); StoreSecrets serves
// them from the keychain. Missing secrets are a *MissingSecretsError
// naming them.
type PluginSecrets interface {
	PluginSecrets(ctx context.Context, agent, pluginID string, names []string) (map[string]string, error)
}

// SubscribePlugins calls fn after a plugin is installed or uninstalled
// through this Env, so MCP servers can update their tool lists (and
// clients get tools/list_changed). The returned func unsubscribes.
func (e *Env) SubscribePlugins(fn func()) (cancel func()) {
	return e.subs.Add(func(struct{}) { fn() })
}

// RefreshPlugins makes subscribers re-read the installed plugins, to pick
// up installs made by another process (the CLI while the app serves).
// Subscribers announce only actual changes, so calling it often is cheap.
func (e *Env) RefreshPlugins() { e.notifyPlugins() }

// PluginWatchTargets is what a process watches to notice installs made
// by another; ok is false when the store keeps no files
// (*plugins.Installed keeps them).
func (e *Env) PluginWatchTargets() (ts []filewatch.Target, ok bool) {
	s, ok := e.plugins.(interface{ WatchTargets() []filewatch.Target })
	if !ok {
		return nil, false
	}
	return s.WatchTargets(), true
}

func (e *Env) notifyPlugins() { e.subs.Notify(struct{}{}) }

// PluginDir is where an agent's copy of a plugin lives in the guest.
func (t *Toolset) PluginDir(pluginID string) string {
	return t.agent.Home() + "/plugins/" + pluginID
}

// pluginSpecs lists the tools of the agent's installed plugins. Like
// sandbox_exec they need autonomous exec.
func (t *Toolset) pluginSpecs() []Spec {
	if t.env.plugins == nil || !t.agent.AutonomousExec.Enabled {
		return nil
	}
	ps, err := t.env.plugins.Installed(t.agent.ID)
	if err != nil {
		return nil // the call path reports the damage; listing stays usable
	}
	var out []Spec
	for _, p := range ps {
		for _, tl := range p.Tools {
			out = append(out, Spec{
				Name:         p.ToolName(tl.ID),
				Title:        tl.ID + " (" + p.Name + ")",
				Description:  tl.Description + " (from the plugin " + p.Name + ")",
				InputSchema:  tl.InputSchema(),
				OutputSchema: pluginOutput,
				OpenWorld:    true,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// pluginTool finds an installed plugin's tool by its MCP name.
func (t *Toolset) pluginTool(name string) (*plugins.Plugin, *plugins.Tool, error) {
	if t.env.plugins == nil {
		return nil, nil, nil
	}
	pid, tid, ok := strings.Cut(name, "_")
	if !ok {
		return nil, nil, nil
	}
	ps, err := t.env.plugins.Installed(t.agent.ID)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range ps {
		if p.ID() != pid {
			continue
		}
		for i := range p.Tools {
			if p.Tools[i].ID == tid {
				return p, &p.Tools[i], nil
			}
		}
	}
	return nil, nil, nil
}

// pluginBinder runs a plugin tool's command as the agent, in the plugin
// folder, with the arguments as PARAM_ variables, through the same exec
// path as sandbox_exec: same limits, output caps, envelope and scrubbing.
func (t *Toolset) pluginBinder(p *plugins.Plugin, tl *plugins.Tool, args json.RawMessage) (func(context.Context, *call) (any, error), error) {
	params, err := tl.Env(args)
	var ae *plugins.ArgError
	if errors.As(err, &ae) {
		return nil, envelope.ArgErrorf(ae.Field, ae.Expected, "%s", ae.Message)
	}
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, c *call) (any, error) {
		if err := c.admit(ctx); err != nil {
			return nil, err
		}
		if err := ensurePluginPackages(ctx, c, p); err != nil {
			return nil, err
		}
		env, err := t.pluginEnv(ctx, p, params)
		if err != nil {
			return nil, err
		}
		dir := t.PluginDir(p.ID())
		home := t.agent.Home()
		pol := p.NetworkPolicy()
		c.narrow = &pol
		out, errOut := newCapture(StdoutCap), newCapture(StderrCap)
		st, err := c.exec(ctx, agentproto.ExecRequest{Identity: c.as(home), Shell: tl.Run, Cwd: dir, Env: env, NetScope: p.ID()}, PluginToolTimeout, out, errOut)
		if errors.Is(err, agentproto.ErrNotFound) {
			return nil, envelope.Errorf(envelope.NotFound, "the plugin folder %s is missing; ask the user to install the plugin %s again", dir, p.ID())
		}
		if err != nil {
			return nil, c.startError(err, "sh", "")
		}
		return c.finish(st, PluginToolTimeout, pluginTimeoutAdvice(p.ID()), dir, out, errOut)
	}, nil
}

// pluginEnv is the environment of a plugin command: the agent's usual
// one, the plugin id, its secrets, then the parameters. Validation keeps
// secrets and parameters from overriding PATH, HOME or each other.
func (t *Toolset) pluginEnv(ctx context.Context, p *plugins.Plugin, params []string) ([]string, error) {
	c := &call{agent: t.agent}
	env := append(c.procEnv(), plugins.PluginIDEnv+"="+p.ID())
	if len(p.Secrets) > 0 {
		if t.env.secrets == nil {
			return nil, envelope.Errorf(envelope.Unavailable, "the plugin %s needs the secrets %s, and this server has no secrets store",
				p.ID(), strings.Join(p.Secrets, ", "))
		}
		vals, err := t.env.secrets.PluginSecrets(ctx, t.agent.Slug, p.ID(), p.Secrets)
		var miss *MissingSecretsError
		if errors.As(err, &miss) {
			return nil, &envelope.Error{Kind: envelope.NotFound, Err: err}
		}
		if err != nil {
			return nil, err
		}
		for _, k := range p.Secrets {
			env = append(env, k+"="+vals[k])
		}
	}
	return append(env, params...), nil
}

// InstallStep names a step of a plugin install, for progress and errors.
type InstallStep string

// The steps, in order.
const (
	StepValidate     InstallStep = "validate"
	StepVM           InstallStep = "VM and agent user"
	StepDependencies InstallStep = "dependencies"
	StepFiles        InstallStep = "plugin folder and files"
	StepSecrets      InstallStep = "secrets"
	StepSetup        InstallStep = "setup"
	StepRecord       InstallStep = "record and register tools"
)

// InstallError says which step failed. Nothing of the install is left.
type InstallError struct {
	Step InstallStep
	Err  error
}

func (e *InstallError) Error() string {
	return fmt.Sprintf("installing failed at step %q: %v (nothing was left installed; fix it and retry)", e.Step, e.Err)
}
func (e *InstallError) Unwrap() error { return e.Err }

// InstallPlugin installs p for this toolset's agent, in the seed's order,
// calling progress before each step. A failure removes what was done (the
// plugin folder and the record), so a retry starts clean. The VM must be
// running; the caller starts it.
func (t *Toolset) InstallPlugin(ctx context.Context, p *plugins.Plugin, libraryVersion int, progress func(InstallStep)) (err error) {
	if progress == nil {
		progress = func(InstallStep) {}
	}
	if t.env.plugins == nil {
		return errors.New("no installed-plugins store configured")
	}
	step := StepValidate
	fail := func(e error) error { return &InstallError{Step: step, Err: e} }
	progress(step)
	if err := p.Validate(); err != nil {
		return fail(err)
	}
	id, home := p.ID(), t.agent.Home()
	dir := t.PluginDir(id)
	c := &call{tool: &tool{Spec: Spec{Name: "plugin install"}, service: serviceInstall}, agent: t.agent, env: t.env}

	step = StepVM
	progress(step)
	if err := c.admit(ctx); err != nil {
		return fail(err)
	}
	folderMade := false
	defer func() {
		if err == nil {
			t.env.notifyPlugins()
			return
		}
		// Roll back with a fresh context: the install's may be what ended.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if folderMade {
			c.g.Remove(rctx, agentproto.PathRequest{Identity: c.as(home), Path: dir, Recursive: true})
		}
		t.env.plugins.Forget(rctx, t.agent.ID, id)
		t.env.notifyPlugins()
	}()

	step = StepDependencies
	progress(step)
	if len(p.Dependencies) > 0 {
		deps := guestDependencies(c, p)
		if len(notInstalled(ctx, c, deps)) > 0 {
			if _, err := installSystem(ctx, c, packagesArgs{Packages: deps}); err != nil {
				return fail(err)
			}
		}
		if err := recordPluginPackages(ctx, c, deps); err != nil {
			return fail(err)
		}
	}

	step = StepFiles
	progress(step)
	// Everything is written as the agent, beneath its home (the guest
	// resolves paths there without following symlinks out), never by
	// the host following paths the agent controls.
	as := c.as(home)
	if err := c.g.Mkdir(ctx, agentproto.PathRequest{Identity: as, Path: home + "/plugins", Mode: 0o755, Parents: true}); err != nil {
		return fail(err)
	}
	if err := c.g.Remove(ctx, agentproto.PathRequest{Identity: as, Path: dir, Recursive: true}); err != nil && !errors.Is(err, agentproto.ErrNotFound) {
		return fail(fmt.Errorf("removing the previous %s: %w", dir, err))
	}
	folderMade = true
	if err := c.g.Mkdir(ctx, agentproto.PathRequest{Identity: as, Path: dir, Mode: 0o755}); err != nil {
		return fail(err)
	}
	names := make([]string, 0, len(p.Files))
	for name := range p.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := c.g.WriteFile(ctx, agentproto.WriteFileRequest{Identity: as, Path: dir + "/" + name, Data: []byte(p.Files[name]), Mode: 0o644, MakeParents: true}); err != nil {
			return fail(fmt.Errorf("writing %s: %w", name, err))
		}
	}

	step = StepSecrets
	progress(step)
	env, err := t.pluginEnv(ctx, p, nil)
	var miss *MissingSecretsError
	if errors.As(err, &miss) && t.env.prompter != nil {
		// As sandbox_secret_set without a value: ask the user through
		// whatever reaches them (the MCP client's link, the window).
		// Nothing reaching them leaves the error naming the command.
		for _, k := range miss.Names {
			req := SecretRequest{Agent: t.agent, Key: k, Description: "needed by the plugin " + p.Name + " (" + id + ")"}
			if perr := t.env.prompter.PromptSecret(ctx, req); perr != nil {
				var np *NoPromptError
				if !errors.As(perr, &np) {
					err = fmt.Errorf("%w; asking the user for %s: %v", err, k, perr)
				}
				return fail(err)
			}
		}
		env, err = t.pluginEnv(ctx, p, nil)
	}
	if err != nil {
		return fail(err)
	}

	step = StepSetup
	progress(step)
	if strings.TrimSpace(p.Setup) != "" {
		// Setup runs under the plugin's network permission, like its tools.
		pol := p.NetworkPolicy()
		c.narrow = &pol
		out := newCapture(StdoutCap)
		st, err := c.exec(ctx, agentproto.ExecRequest{Identity: as, Shell: p.Setup, Cwd: dir, Env: env, NetScope: p.ID()}, PluginSetupTimeout, out, out)
		text, _ := out.Text()
		if r := t.env.redactor; r != nil {
			text = r.Redact(t.agent.Slug, text)
		}
		switch {
		case err != nil:
			return fail(err)
		case st.TimedOut:
			return fail(fmt.Errorf("setup did not finish within %s: %s", PluginSetupTimeout, truncTail(text, 2000)))
		case st.Code != 0 || st.Signal != 0:
			return fail(fmt.Errorf("setup exited with code %d: %s", st.Code, truncTail(text, 4000)))
		}
	}

	step = StepRecord
	progress(step)
	if err := t.env.plugins.Record(ctx, t.agent.ID, p, libraryVersion); err != nil {
		return fail(err)
	}
	return nil
}

// UninstallPlugin removes the plugin's folder and record for this agent.
// The record goes first, so the tools disappear even if the VM is not
// running; the folder is removed when it is.
func (t *Toolset) UninstallPlugin(ctx context.Context, pluginID string) error {
	if t.env.plugins == nil {
		return errors.New("no installed-plugins store configured")
	}
	if err := t.env.plugins.Forget(ctx, t.agent.ID, pluginID); err != nil {
		return err
	}
	t.env.notifyPlugins()
	c := &call{tool: &tool{Spec: Spec{Name: "plugin uninstall"}, service: serviceInstall}, agent: t.agent, env: t.env}
	if err := c.admit(ctx); err != nil {
		return fmt.Errorf("the tools are gone; the folder %s stays until the VM runs: %w", t.PluginDir(pluginID), err)
	}
	err := c.g.Remove(ctx, agentproto.PathRequest{Identity: c.as(t.agent.Home()), Path: t.PluginDir(pluginID), Recursive: true})
	if err != nil && !errors.Is(err, agentproto.ErrNotFound) {
		return err
	}
	// The network namespace its tools ran in goes too (a guest older
	// than net_release frees it when the agent is removed).
	err = c.g.NetRelease(ctx, agentproto.NetReleaseRequest{User: t.agent.User(), Scope: pluginID})
	if err != nil && !errors.Is(err, agentproto.ErrUnsupported) {
		return fmt.Errorf("freeing the plugin's network namespace: %w", err)
	}
	return nil
}
