// Package tools is the set of sandbox_* tools an agent uses inside the VM:
// reading and searching files always, and, when the agent's autonomous
// exec is on, writing files, running commands and installing packages.
//
// Every tool runs in the guest as the agent's own Linux user
// (agent-<slug>); only sandbox_install runs as root. Path arguments are
// checked on the host by sandboxpath before anything reaches the guest, and
// file operations then run beneath the path's root in the guest, so a
// symlink can't lead out of the agent's home or /workspace/shared.
//
// Every call returns a ToolEnvelope (package envelope): a success with a
// result, or a failure whose kind and message let a model correct itself.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/subscribers"
	"github.com/osaurus/osaurus-sandbox/netpolicy"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
	"github.com/osaurus/osaurus-sandbox/tools/limit"
)

// Spec describes one tool to an MCP client.
type Spec struct {
	Name        string
	Title       string // for people, e.g. "Read file"
	Description string
	// InputSchema is a JSON schema of type object with
	// additionalProperties false.
	InputSchema map[string]any
	// OutputSchema is the JSON schema of the tool's envelope (see
	// envelope.Schema), which MCP clients get as structuredContent.
	OutputSchema map[string]any
	ReadOnly     bool // changes nothing
	Destructive  bool // may delete or overwrite (meaningful when !ReadOnly)
	Idempotent   bool // repeating the call changes nothing more
	OpenWorld    bool // reaches outside the sandbox (package mirrors)
}

// GuestFunc returns the running VM's guest agent client, or an error
// saying why there is none.
type GuestFunc func(ctx context.Context) (*agentproto.Client, error)

// Redactor scrubs secret values from tool output before a model sees it.
// The secrets store plugs in here; agent is the agent's slug, the name its
// secrets are stored under.
type Redactor interface {
	Redact(agent, text string) string
}

// Options configure an Env.
type Options struct {
	// Guest returns the guest client. Required.
	Guest GuestFunc
	// RateLimits overrides Osaurus's quotas per service (limit.DefaultLimits,
	// sandbox.json's rateLimits); TurnIdle the exec limiter's idle gap
	// (0: limit.DefaultIdleGap; sandbox.json's turnIdleSeconds).
	RateLimits map[string]int
	TurnIdle   time.Duration
	// Redactor, when set, scrubs every string of every result.
	Redactor Redactor
	// Agents, when set, is re-read before every process start for the
	// agent's network policy, so a change made by another process (the
	// CLI, the window) holds from the agent's next command. Without it
	// the toolset's snapshot is used.
	Agents *agents.Registry
	// Plugins, when set, adds the tools of the plugins each agent
	// installed; Secrets gives those plugins their secrets.
	Plugins InstalledPlugins
	Secrets PluginSecrets
	// Registry, when set (with Plugins), offers sandbox_plugin_register
	// to agents with autonomous exec and pluginCreate.
	Registry *PluginRegistry
	// SecretStore, when set, offers sandbox_secret_check and
	// sandbox_secret_set to agents with autonomous exec; SecretPrompter
	// asks the user when sandbox_secret_set has no value.
	SecretStore    SecretStore
	SecretPrompter SecretPrompter
	// Reviewer, when set, offers sandbox_request_review to agents with
	// autonomous exec that were granted a project.
	Reviewer Reviewer
	// Exposer, when set, offers sandbox_expose_port to agents with
	// autonomous exec.
	Exposer Exposer
	// Checkpointer, when set, offers sandbox_checkpoint to agents with
	// autonomous exec.
	Checkpointer Checkpointer
	// OutputDir is the host folder the VM shares as /output; KeepDir a
	// host folder the VM can't reach. With both, sandbox_share_artifact
	// checks the shared file on the host and keeps a copy in KeepDir,
	// whose path it reports (host_path) and links (file://): the agent
	// owns /output/<slug> and can replace an artifact there afterwards.
	OutputDir, KeepDir string
}

// Env is what all agents' toolsets in one process share: the guest, the
// limiters, the install lock and the record of which agent users exist.
type Env struct {
	guest    GuestFunc
	exec     *limit.ExecLimiter
	rate     *limit.RateLimiter
	redactor Redactor
	agents   *agents.Registry
	plugins  InstalledPlugins
	secrets  PluginSecrets
	registry *PluginRegistry
	// secretStore and prompter serve the secret tools.
	secretStore  SecretStore
	prompter     SecretPrompter
	reviewer     Reviewer
	exposer      Exposer
	checkpointer Checkpointer
	outputDir    string
	keepDir      string
	subs         subscribers.List[struct{}] // SubscribePlugins
	install      *InstallLock
	deps         pluginDeps // plugin packages the guest session has
	sess         sessions   // agents' shell sessions (session.go)

	usersMu sync.Mutex
	usersOf *agentproto.Client // the guest session the set below is about
	users   map[string]bool    // slugs whose Linux user exists there
	shared  bool               // /workspace/shared is set up there
}

// NewEnv returns an Env.
func NewEnv(o Options) *Env {
	rates := limit.DefaultLimits()
	maps.Copy(rates, o.RateLimits)
	// One install lock per Env, and the owner has one Env: apk refuses to
	// run while another apk holds its database.
	return &Env{guest: o.Guest, exec: limit.NewExecLimiter(limit.ExecOptions{IdleGap: o.TurnIdle}), rate: limit.NewRateLimiter(limit.RateOptions{Limits: rates}),
		redactor: o.Redactor, agents: o.Agents, plugins: o.Plugins, secrets: o.Secrets, registry: o.Registry,
		secretStore: o.SecretStore, prompter: o.SecretPrompter, install: NewInstallLock(), reviewer: o.Reviewer, exposer: o.Exposer, checkpointer: o.Checkpointer, outputDir: o.OutputDir, keepDir: o.KeepDir}
}

// ExecLimiter is the shared exec limiter, e.g. for EndTurn.
func (e *Env) ExecLimiter() *limit.ExecLimiter { return e.exec }

// Forget drops the limiters' state of an agent, e.g. after removing it.
func (e *Env) Forget(agentID string) {
	e.exec.EndTurn(agentID)
	e.rate.Forget(agentID)
}

// Invoker is where an agent's tool calls go. *Env runs them in this
// process; a process that doesn't own the VM (the stdio MCP server, the
// CLI's task runner) sends them to the owner process, so that rate limits,
// the install lock and per-agent counters are shared by every transport
// and process.
type Invoker interface {
	RunTool(ctx context.Context, a agents.Agent, name string, args json.RawMessage) envelope.Envelope
	// EndTurn starts a new turn of the agent for the exec limiter.
	EndTurn(ctx context.Context, agentID string)
}

var _ Invoker = (*Env)(nil)

// RunTool runs tool name as agent a with this Env's limiters and guest.
func (e *Env) RunTool(ctx context.Context, a agents.Agent, name string, args json.RawMessage) envelope.Envelope {
	return e.Toolset(a).Run(ctx, name, args)
}

// EndTurn starts a new turn of agentID for the exec limiter (a new MCP
// session is a new conversation). Rate windows are not reset.
func (e *Env) EndTurn(_ context.Context, agentID string) { e.exec.EndTurn(agentID) }

// Toolset is one agent's tools. It holds a snapshot of the agent's
// settings; make a new one when they change.
type Toolset struct {
	env   *Env
	agent agents.Agent
}

// Toolset returns the tools of agent a.
func (e *Env) Toolset(a agents.Agent) *Toolset { return &Toolset{env: e, agent: a} }

// Agent is the agent this toolset serves.
func (t *Toolset) Agent() agents.Agent { return t.agent }

// List returns the specs of the tools this agent may use now.
func (t *Toolset) List() []Spec {
	var out []Spec
	for _, d := range catalog {
		if t.allowed(d) == "" {
			out = append(out, d.spec())
		}
	}
	return append(out, t.pluginSpecs()...)
}

// Names is every tool name this package defines, enabled or not.
func Names() []string {
	out := make([]string, len(catalog))
	for i, d := range catalog {
		out[i] = d.Name
	}
	return out
}

// Call runs a tool and returns its envelope as JSON.
func (t *Toolset) Call(ctx context.Context, name string, args json.RawMessage) string {
	return t.Run(ctx, name, args).JSON()
}

// Run runs a tool and returns its envelope, scrubbed of the agent's
// secret values in every field, whether the call worked or not: a failed
// or timed-out command quotes its output in the message.
func (t *Toolset) Run(ctx context.Context, name string, args json.RawMessage) envelope.Envelope {
	e := t.run(ctx, name, args)
	if r := t.env.redactor; r != nil {
		id := t.agent.Slug
		e = e.Scrub(func(s string) string { return r.Redact(id, s) })
	}
	return e
}

func (t *Toolset) run(ctx context.Context, name string, args json.RawMessage) envelope.Envelope {
	d := lookup(name)
	var run func(context.Context, *call) (any, error)
	if d == nil {
		p, tl, err := t.pluginTool(name)
		if err != nil {
			return envelope.FromError(name, err)
		}
		if p == nil {
			return envelope.Failf(name, envelope.ToolNotFound, "there is no tool %q; the sandbox tools of this agent are: %s",
				name, strings.Join(t.names(), ", "))
		}
		d = &tool{Spec: Spec{Name: name}, gate: gateAutonomous, service: serviceExec, command: true}
		if why := t.allowed(d); why != "" {
			return envelope.Fail(name, envelope.ToolNotFound, why)
		}
		if run, err = t.pluginBinder(p, tl, args); err != nil {
			return envelope.FromError(name, err)
		}
	} else {
		if why := t.allowed(d); why != "" {
			return envelope.Fail(name, envelope.ToolNotFound, why)
		}
		var err error
		if run, err = d.bind(args, d.InputSchema); err != nil {
			return envelope.FromError(name, err)
		}
	}
	c := &call{tool: d, agent: t.agent, env: t.env}
	result, err := run(ctx, c)
	if errors.Is(err, agentproto.ErrNoSuchUser) {
		// The VM lost the user (a reset root disk behind a relayed
		// session that outlived it): create it again and retry once.
		t.env.ForgetUser(t.agent)
		c.g, c.warnings = nil, nil
		result, err = run(ctx, c)
	}
	switch {
	case errors.Is(err, agentproto.ErrUnavailable):
		return envelope.Failf(name, envelope.Unavailable, "the sandbox VM is not available: %v. Retry once it is running (`osaurus-sandbox start`).", err)
	case err != nil:
		return envelope.FromError(name, err)
	}
	return envelope.OK(name, result, c.warnings...)
}

// admit is the step between checking a call's arguments and doing it: it
// charges the limiters, gets the guest and makes sure the agent's user
// exists. Handlers call it once their arguments passed every host-side
// check, so a call with bad arguments costs no quota and needs no VM.
func (c *call) admit(ctx context.Context) error {
	if c.g != nil {
		return nil
	}
	if !c.charged {
		id := c.agent.ID
		if err := c.env.rate.Allow(id, c.tool.service); err != nil {
			return err
		}
		if c.tool.command {
			if err := c.env.exec.Allow(id, c.agent.AutonomousExec.MaxCommandsPerTurn); err != nil {
				return err
			}
		}
		c.charged = true
	}
	g, err := c.env.guest(ctx)
	if err != nil {
		return envelope.Errorf(envelope.Unavailable, "the sandbox VM is not available: %v. Retry once it is running (`osaurus-sandbox start`).", err)
	}
	if err := c.env.ensureUser(ctx, g, c.agent); err != nil {
		return err
	}
	c.g = g
	return nil
}

// allowed says why the agent may not use d now, or "" when it may.
func (t *Toolset) allowed(d *tool) string {
	ae := t.agent.AutonomousExec
	switch d.gate {
	case gateAutonomous:
		if !ae.Enabled {
			return fmt.Sprintf("%s is not available to agent %s: it needs autonomous exec, which is off. "+
				"Only the read-only sandbox tools can be used; the user can turn it on with "+
				"`osaurus-sandbox agent set %s enabled true`.", d.Name, t.agent.Name, t.agent.Slug)
		}
	case gatePluginCreate:
		switch {
		case t.env.registry == nil || t.env.plugins == nil:
			return fmt.Sprintf("%s is not available: this server has no plugin library.", d.Name)
		case !ae.Enabled || !ae.PluginCreate:
			return fmt.Sprintf("%s is not available to agent %s: it needs autonomous exec and pluginCreate; the user can run "+
				"`osaurus-sandbox agent set %s pluginCreate true` (and `enabled true`).", d.Name, t.agent.Name, t.agent.Slug)
		}
	case gateSecrets:
		switch {
		case t.env.secretStore == nil:
			return fmt.Sprintf("%s is not available: this server has no secret store.", d.Name)
		case !ae.Enabled:
			return fmt.Sprintf("%s is not available to agent %s: secrets are for commands, which need autonomous exec; the user can turn it on with "+
				"`osaurus-sandbox agent set %s enabled true`.", d.Name, t.agent.Name, t.agent.Slug)
		}
	case gatePorts:
		switch {
		case t.env.exposer == nil:
			return fmt.Sprintf("%s is not available: this server can't open previews.", d.Name)
		case !ae.Enabled:
			return fmt.Sprintf("%s is not available to agent %s: it needs autonomous exec, which is off; the user can turn it on with "+
				"`osaurus-sandbox agent set %s enabled true`.", d.Name, t.agent.Name, t.agent.Slug)
		}
	case gateCheckpoint:
		switch {
		case t.env.checkpointer == nil:
			return fmt.Sprintf("%s is not available: this server can't take checkpoints.", d.Name)
		case !ae.Enabled:
			return fmt.Sprintf("%s is not available to agent %s: it needs autonomous exec, which is off; the user can turn it on with "+
				"`osaurus-sandbox agent set %s enabled true`.", d.Name, t.agent.Name, t.agent.Slug)
		}
	case gateReview:
		switch {
		case t.env.reviewer == nil:
			return fmt.Sprintf("%s is not available: this server can't notify the user.", d.Name)
		case !ae.Enabled || len(t.agent.Projects) == 0:
			return fmt.Sprintf("%s is not available to agent %s: it needs autonomous exec and a project; the user grants one with "+
				"`osaurus-sandbox agent set %s projects NAME`.", d.Name, t.agent.Name, t.agent.Slug)
		}
	case gateBackground:
		if !ae.Enabled || !ae.BackgroundProcesses {
			return fmt.Sprintf("%s is not available to agent %s: it needs autonomous exec and background processes. "+
				"Use sandbox_exec for commands that finish, or ask the user to run "+
				"`osaurus-sandbox agent set %s backgroundProcesses true` (and `enabled true`).", d.Name, t.agent.Name, t.agent.Slug)
		}
	}
	return ""
}

func (t *Toolset) names() []string {
	var out []string
	for _, s := range t.List() {
		out = append(out, s.Name)
	}
	return out
}

func lookup(name string) *tool {
	i := slices.IndexFunc(catalog, func(d *tool) bool { return d.Name == name })
	if i < 0 {
		return nil
	}
	return catalog[i]
}

// call is one tool call in progress.
type call struct {
	tool     *tool
	g        *agentproto.Client // set by admit
	charged  bool               // the limiters counted this call
	agent    agents.Agent
	env      *Env
	warnings []string
	// narrow, when set, is a plugin's permissions.network: it narrows the
	// agent's policy for this call's processes (the plugin's tools and
	// setup).
	narrow *netpolicy.Policy
}

func (c *call) warn(format string, args ...any) {
	c.warnings = append(c.warnings, fmt.Sprintf(format, args...))
}

// as is the agent's identity confined beneath root.
func (c *call) as(root string) agentproto.Identity {
	return agentproto.Identity{User: c.agent.User(), Root: root}
}

// scrub replaces the agent's secret values in text taken from the guest,
// before it is cut: a value split by truncation is then already gone.
func (c *call) scrub(text string) string {
	if r := c.env.redactor; r != nil {
		return r.Redact(c.agent.Slug, text)
	}
	return text
}
