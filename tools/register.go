package tools

import (
	"context"
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

type registeredTool struct {
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
	reg := c.env.registry
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
	plugins.Restrict(p, plugins.ViaAgentTool)
	check := plugins.Registration{Allow: reg.Allowlist(), HasSecret: func(name string) bool {
		if c.env.secrets == nil {
			return false
		}
		_, err := c.env.secrets.PluginSecrets(ctx, c.agent.ID, id, []string{name})
		return err == nil
	}}
	if err := check.Check(p); err != nil {
		return nil, invalidPlugin(dir, err)
	}
	// An agent may replace its own plugin, never one the user imported
	// or another agent made.
	if e, err := reg.Library.Get(id); err == nil {
		if o := e.Current().Origin; o.Kind != plugins.OriginAgent || o.Agent != c.agent.ID {
			return nil, envelope.Errorf(envelope.Rejected, "the library already has a plugin %q that this agent did not create; pick another name", id)
		}
	} else if !errors.Is(err, plugins.ErrNotFound) {
		return nil, err
	}
	e, _, err := reg.Library.Save(ctx, p, plugins.Origin{Kind: plugins.OriginAgent, Agent: c.agent.ID, Location: "~/plugins/" + id})
	if err != nil {
		return nil, err
	}
	if err := c.env.Toolset(c.agent).InstallPlugin(ctx, e.Current().Recipe, e.Current().Number, nil); err != nil {
		return nil, envelope.Errorf(envelope.ExecutionError, "saved to the library, but %v", err)
	}
	out := map[string]any{"status": "installed", "plugin_id": id, "plugin_name": p.Name}
	tools := []registeredTool{}
	for _, t := range p.Tools {
		tools = append(tools, registeredTool{Name: p.ToolName(t.ID), Description: t.Description})
	}
	out["tools"] = tools
	if p.Permissions != nil {
		out["network"] = p.Permissions.Network
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
