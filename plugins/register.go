package plugins

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// How an agent-authored plugin arrived, recorded in metadata.created_via.
const (
	ViaAgentTool  = "agent_tool"  // sandbox_plugin_register
	ViaHostBridge = "host_bridge" // POST /api/plugin/create, osaurus-host plugin create
)

// Restrict rewrites an agent-authored recipe to the restricted defaults
// before it is saved: network "outbound", "*", empty or any invalid list
// becomes "none", a list of valid host names is kept (normalised);
// inference is off; metadata says the agent made it and how. p is changed
// in place and returned.
func Restrict(p *Plugin, via string) *Plugin {
	perm := Permissions{Network: "none"}
	if p.Permissions != nil {
		perm.Network = restrictNetwork(p.Permissions.Network)
	}
	p.Permissions = &perm // Inference stays false
	if p.Metadata == nil {
		p.Metadata = map[string]string{}
	}
	p.Metadata["created_by"] = "agent"
	p.Metadata["created_via"] = via
	return p
}

func restrictNetwork(v string) string {
	switch v = strings.TrimSpace(v); v {
	case "", "none", "outbound", "*":
		return "none"
	}
	var hosts []string
	for _, h := range strings.Split(v, ",") {
		h = normHost(h)
		if !IsDomain(h) {
			return "none"
		}
		hosts = append(hosts, h)
	}
	return strings.Join(hosts, ",")
}

// PackFiles merges the files found in the agent's plugin folder (paths
// relative to it) into p.Files. Entries written in plugin.json win;
// plugin.json itself is not packed. Files are text: one that isn't UTF-8,
// or holds a NUL byte, rejects the whole plugin, since dropping it would
// leave a plugin that can't be reinstalled from the library.
func PackFiles(p *Plugin, found map[string][]byte) error {
	var binary []string
	names := make([]string, 0, len(found))
	for name := range found {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "plugin.json" {
			continue
		}
		if _, explicit := p.Files[name]; explicit {
			continue
		}
		b := found[name]
		if !utf8.Valid(b) || strings.ContainsRune(string(b), 0) {
			binary = append(binary, name)
			continue
		}
		if p.Files == nil {
			p.Files = map[string]string{}
		}
		p.Files[name] = string(b)
	}
	if len(binary) > 0 {
		return &InvalidError{Problems: []Problem{{
			Field:   fmt.Sprintf("files[%q]", binary[0]),
			Message: fmt.Sprintf("%d binary file(s) in the plugin folder: %s", len(binary), strings.Join(binary, ", ")),
			Fix:     "plugins carry text files only: remove them, generate them in setup, or download them in setup from an allowlisted host",
		}}}
	}
	return nil
}

// Registration is the host-side checks of the registration pipeline that
// need nothing running: validation, the setup allowlist, and the declared
// secrets being present for the agent.
type Registration struct {
	Allow Allowlist
	// Agent is the registering agent's slug, for the fix of a missing
	// secret.
	Agent string
	// HasSecret reports whether the agent has a value for the secret.
	HasSecret func(name string) bool
}

// Check returns an *InvalidError listing every problem, or nil.
func (r Registration) Check(p *Plugin) error {
	var ps []Problem
	if err := p.Validate(); err != nil {
		ps = append(ps, err.(*InvalidError).Problems...)
	}
	// The hosts a command names literally; where it decides at run time
	// is left to the restricted permission Restrict gave it.
	ps = append(ps, checkHosts(p, r.Allow, false)...)
	for i, s := range p.Secrets {
		if r.HasSecret == nil || !r.HasSecret(s) {
			fix := "store it first with sandbox_secret_set, then register again"
			if r.Agent != "" {
				fix = fmt.Sprintf("store it first with sandbox_secret_set (or ask the user to run `osaurus-sandbox secret set %s %s`), then register again", r.Agent, s)
			}
			ps = append(ps, Problem{fmt.Sprintf("secrets[%d]", i), fmt.Sprintf("%s has no value for this agent", s), fix})
		}
	}
	if len(ps) > 0 {
		return &InvalidError{Problems: ps}
	}
	return nil
}

// FolderFile is a path relative to an agent's plugin folder that packing
// may read: beneath it and clean. Paths the agent controls are checked
// here before anything reads them.
func FolderFile(rel string) bool {
	return CleanFilePath(rel) == "" && path.Clean(rel) == rel
}
