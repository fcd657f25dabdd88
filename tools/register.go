package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/plugins"
	"github.com/osaurus/osaurus-sandbox/tools/envelope"
)

// PluginRegistry is what sandbox_plugin_register needs from the host: the
// library to save into and the setup allowlist in effect.
type PluginRegistry struct {
	Library   *plugins.Library
	Allowlist func() plugins.Allowlist
}

// serviceHTTP is the rate-limiter service registrations count against,
// as in Osaurus.
const serviceHTTP = "http"

type registerArgs struct {
	PluginID string `json:"plugin_id"`
}

// RegisteredTool is one tool of a registered plugin, by its MCP name.
type RegisteredTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// registerPlugin is sandbox_plugin_register: it reads the agent's
// ~/plugins/<id>/plugin.json, packs the folder's text files, applies the
// restricted defaults, checks everything (nothing is saved when a check
// fails), saves to the library and installs for this agent.
func registerPlugin(ctx context.Context, c *call, a registerArgs) (any, error) {
	id := a.PluginID
	if plugins.DeriveID(id) != id || !plugins.FolderFile(id) || id == "" {
		return nil, envelope.ArgErrorf("plugin_id", "a plugin id: lowercase letters, digits and hyphens, the folder name under ~/plugins", "%q is not a plugin id", id)
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	home := c.agent.Home()
	dir := home + "/plugins/" + id
	as := c.as(home)
	manifest, err := c.g.ReadFile(ctx, agentproto.ReadFileRequest{Identity: as, Path: dir + "/plugin.json", MaxBytes: plugins.MaxRecipeBytes + 1})
	if errors.Is(err, agentproto.ErrNotFound) {
		return nil, &envelope.Error{Kind: envelope.NotFound, Field: "plugin_id", Expected: "a folder ~/plugins/<id> holding plugin.json",
			Err: fmt.Errorf("%s/plugin.json does not exist; write the manifest there first", dir)}
	}
	if err != nil {
		return nil, err
	}
	if manifest.Truncated {
		return nil, envelope.ArgErrorf("plugin_id", "a plugin.json under 4 MiB", "%s/plugin.json is too large", dir)
	}
	p, err := plugins.DecodeBytes(manifest.Data)
	if err != nil {
		return nil, invalidPlugin(dir, err)
	}
	if p.ID() != id {
		return nil, envelope.ArgErrorf("plugin_id", "the id the manifest's name gives", "%s/plugin.json names the plugin %q, whose id is %q, not %q; rename the folder or the plugin", dir, p.Name, p.ID(), id)
	}
	list, err := c.g.List(ctx, agentproto.ListRequest{Identity: as, Path: dir, MaxDepth: 16, MaxEntries: plugins.MaxFiles + 100})
	if err != nil {
		return nil, err
	}
	if list.Truncated {
		return nil, envelope.ArgErrorf("plugin_id", fmt.Sprintf("at most %d files", plugins.MaxFiles), "%s holds too many files", dir)
	}
	found := map[string][]byte{}
	for _, e := range list.Entries {
		switch e.Type {
		case "dir":
			continue
		case "file":
		default:
			return nil, envelope.ArgErrorf("plugin_id", "a folder of regular files", "%s/%s is a %s; a plugin folder may hold only files and folders", dir, e.Path, e.Type)
		}
		if e.Path == "plugin.json" || !plugins.FolderFile(e.Path) {
			continue
		}
		if e.Size > plugins.MaxFileBytes {
			return nil, envelope.ArgErrorf("plugin_id", "files of at most 1 MiB", "%s/%s is %d bytes; generate large files in setup", dir, e.Path, e.Size)
		}
		f, err := c.g.ReadFile(ctx, agentproto.ReadFileRequest{Identity: as, Path: dir + "/" + e.Path, MaxBytes: plugins.MaxFileBytes})
		if err != nil {
			return nil, err
		}
		found[e.Path] = f.Data
	}
	if err := plugins.PackFiles(p, found); err != nil {
		return nil, invalidPlugin(dir, err)
	}
	r, err := c.register(ctx, p, plugins.ViaAgentTool, "~/plugins/"+id)
	var ie *plugins.InvalidError
	if errors.As(err, &ie) {
		return nil, invalidPlugin(dir, err)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Registered is what a registration answers: the tool's result and the
// bridge's 200 body.
type Registered struct {
	Status     string           `json:"status"` // "installed"
	PluginID   string           `json:"plugin_id"`
	PluginName string           `json:"plugin_name"`
	Tools      []RegisteredTool `json:"tools"`
	// Network is permissions.network after the restricted defaults.
	Network string `json:"network"`
}

// Errors of the registration pipeline that callers map to their own
// answers (the bridge to HTTP status codes).
var (
	// ErrPluginCreateOff: the agent lacks autonomous exec or pluginCreate.
	ErrPluginCreateOff = agentproto.Class(agentproto.ErrPermission, "plugin creation is not allowed for this agent")
	// ErrNoPluginLibrary: this server was built without a plugin library.
	ErrNoPluginLibrary = agentproto.Class(agentproto.ErrUnsupported, "this server has no plugin library")
	// ErrPluginTaken: the library holds a plugin of that id that this
	// agent did not create.
	ErrPluginTaken = agentproto.Class(agentproto.ErrExists, "the plugin id is taken")
	// ErrPluginQuota: the agent created MaxAgentPlugins plugins already.
	ErrPluginQuota = agentproto.Class(agentproto.ErrQuota, "too many plugins created by this agent")
)

// MaxAgentPlugins bounds the plugin ids one agent may create in the
// library; each keeps at most plugins.MaxVersions versions of at most
// plugins.MaxRecipeBytes.
const MaxAgentPlugins = 32

// RegisterPlugin is POST /api/plugin/create: recipe is the plugin JSON an
// agent sent, registered through the same pipeline as
// sandbox_plugin_register. Errors: ErrNoPluginLibrary, ErrPluginCreateOff,
// a *plugins.InvalidError (every problem, each naming its field),
// *limit.Rejected, an unavailable *envelope.Error when the VM is not
// running, ErrPluginTaken, or the install's failure.
func (t *Toolset) RegisterPlugin(ctx context.Context, recipe []byte, via string) (*Registered, error) {
	c := &call{tool: lookup("sandbox_plugin_register"), agent: t.agent, env: t.env}
	if err := c.registrationGates(); err != nil {
		return nil, err
	}
	p, err := plugins.DecodeBytes(recipe)
	if err != nil {
		return nil, err
	}
	return c.register(ctx, p, via, "POST /api/plugin/create")
}

// CreatePlugin registers recipe for the agent named agent (its slug, as
// the bridge knows the caller), with its settings as stored now: the
// bridge's POST /api/plugin/create. It needs Options.Agents.
func (e *Env) CreatePlugin(ctx context.Context, agent string, recipe []byte) (*Registered, error) {
	if e.agents == nil {
		return nil, &envelope.Error{Kind: envelope.Unavailable, Err: fmt.Errorf("%w (no agents registry)", ErrNoPluginLibrary)}
	}
	a, err := e.agents.GetSlug(agent)
	if err != nil {
		return nil, &envelope.Error{Kind: envelope.Rejected, Err: fmt.Errorf("%w: %s is not an agent of this app", ErrPluginCreateOff, agent)}
	}
	return e.Toolset(a).RegisterPlugin(ctx, recipe, plugins.ViaHostBridge)
}

// registrationGates: the registry exists and the agent may create plugins.
func (c *call) registrationGates() error {
	if c.env.registry == nil || c.env.plugins == nil {
		return &envelope.Error{Kind: envelope.Unavailable, Err: ErrNoPluginLibrary}
	}
	if why := c.env.Toolset(c.agent).allowed(c.tool); why != "" {
		return &envelope.Error{Kind: envelope.Rejected, Err: fmt.Errorf("%w: %s", ErrPluginCreateOff, why)}
	}
	return nil
}

// register is the registration pipeline both sandbox_plugin_register and
// POST /api/plugin/create go through, in this order: the gates
// (autonomous exec and pluginCreate), the restricted defaults, validation,
// the setup allowlist and the declared secrets (all reported at once, as
// a *plugins.InvalidError, before anything is saved; the route charges
// nothing before them), the rate limit "http" and a running VM (admit;
// the tool form passed it already to read the folder), the library (an agent may replace only a plugin it
// created), then the install for the agent, which registers the tools and
// announces them (tools/list_changed).
func (c *call) register(ctx context.Context, p *plugins.Plugin, via, location string) (*Registered, error) {
	if err := c.registrationGates(); err != nil {
		return nil, err
	}
	reg := c.env.registry
	id := p.ID()
	plugins.Restrict(p, via)
	check := plugins.Registration{Allow: reg.Allowlist(), Agent: c.agent.Slug, HasSecret: func(name string) bool {
		if c.env.secrets == nil {
			return false
		}
		_, err := c.env.secrets.PluginSecrets(ctx, c.agent.Slug, id, []string{name})
		return err == nil
	}}
	if err := check.Check(p); err != nil {
		return nil, err
	}
	// The library keeps recipes (their files included) in clear: one that
	// holds the agent's secret value is refused, as the bridge's stores
	// keep such values out.
	if b, err := json.Marshal(p); err == nil && c.scrub(string(b)) != string(b) {
		return nil, &plugins.InvalidError{Problems: []plugins.Problem{{Field: "secrets",
			Message: "the plugin holds the value of one of your secrets, and plugins are stored in clear",
			Fix:     "list the secret's name under secrets and read it when the tool runs (osaurus-host secrets get NAME)"}}}
	}
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	// An agent may replace its own plugin, never one the user imported
	// or another agent made.
	if e, err := reg.Library.Get(id); err == nil {
		if o := e.Current().Origin; o.Kind != plugins.OriginAgent || o.Agent != c.agent.ID {
			return nil, &envelope.Error{Kind: envelope.Rejected,
				Err: fmt.Errorf("%w: the library already has a plugin %q that this agent did not create; pick another name", ErrPluginTaken, id)}
		}
	} else if !errors.Is(err, plugins.ErrNotFound) {
		return nil, err
	} else if n := CreatedPlugins(reg.Library, c.agent.ID); n >= MaxAgentPlugins {
		return nil, &envelope.Error{Kind: envelope.Rejected,
			Err: fmt.Errorf("%w: it has %d in the library, the limit (MaxAgentPlugins); register a new version of one of them, or ask the user to remove some", ErrPluginQuota, n)}
	}
	e, _, err := reg.Library.Save(ctx, p, plugins.Origin{Kind: plugins.OriginAgent, Agent: c.agent.ID, Location: location})
	if err != nil {
		return nil, err
	}
	if err := c.env.Toolset(c.agent).InstallPlugin(ctx, e.Current().Recipe, e.Current().Number, nil); err != nil {
		return nil, envelope.Errorf(envelope.ExecutionError, "saved to the library, but %v", err)
	}
	out := &Registered{Status: "installed", PluginID: id, PluginName: p.Name, Tools: []RegisteredTool{}, Network: p.Permissions.Network}
	for _, t := range p.Tools {
		out.Tools = append(out.Tools, RegisteredTool{Name: p.ToolName(t.ID), Description: t.Description})
	}
	return out, nil
}

func invalidPlugin(dir string, err error) error {
	var ie *plugins.InvalidError
	if errors.As(err, &ie) && len(ie.Problems) > 0 {
		return &envelope.Error{Kind: envelope.InvalidArgs, Field: "plugin_id", Expected: "a valid plugin in " + dir,
			Err: fmt.Errorf("%s/plugin.json: %w", dir, err)}
	}
	return err
}

// CreatedPlugins counts the library's plugins whose current version the
// agent (its id) created.
func CreatedPlugins(l *plugins.Library, agentID string) int {
	es, _ := l.List()
	n := 0
	for _, e := range es {
		if o := e.Current().Origin; o.Kind == plugins.OriginAgent && o.Agent == agentID {
			n++
		}
	}
	return n
}
