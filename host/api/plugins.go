package api

import (
	"context"
	"encoding/json"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"

	"github.com/osaurus/osaurus-sandbox/plugins"
)

// PluginSaveRequest saves a recipe (its encoding, plugins.Plugin.Encode)
// in the library as a new version of its id, from Origin.
type PluginSaveRequest struct {
	Recipe json.RawMessage `json:"recipe"`
	Origin plugins.Origin  `json:"origin"`
}

// PluginSaved names the library entry a save or duplicate wrote; Changed
// is false when the recipe was the current version already.
type PluginSaved struct {
	ID      string `json:"id"`
	Changed bool   `json:"changed"`
}

// PluginRemoved says what removing a plugin did: Damaged is the damaged
// file it kept aside ("" when the entry was readable).
type PluginRemoved struct {
	Damaged string `json:"damaged,omitempty"`
}

// PluginRepairs is what repairing the agents' install records did.
type PluginRepairs struct {
	Repairs []plugins.InstalledRepair `json:"repairs"`
}

// PluginLibrary is the library as the owner reads it: its entries
// (sorted by id), the files it can't read and the setup allowlist
// recipes are reviewed against there; or, when asked, an agent's installs.
type PluginLibrary struct {
	Plugins        []*plugins.Entry                `json:"plugins"`
	Damaged        []PluginDamaged                 `json:"damaged,omitempty"`
	SetupAllowlist []string                        `json:"setupAllowlist"`
	Installed      map[string]plugins.Installation `json:"installed,omitempty"`
}

// PluginDamaged is a library file the owner can't read
// (plugins.DamagedError).
type PluginDamaged struct {
	ID    string `json:"id"`
	Path  string `json:"path"`
	Error string `json:"error"`
}

// PluginLibraryReader reads the library through the owner, for a front
// end on another machine (a remote context), whose own files are not it.
type PluginLibraryReader interface {
	// PluginLibrary is the library, or one plugin of it, or when req
	// names an agent that agent's installs.
	PluginLibrary(ctx context.Context, req control.PluginLibraryRequest) (PluginLibrary, error)
}

// PluginLibraryOps are the owner's writes to the plugin library and the
// install records (DataOps).
type PluginLibraryOps interface {
	// SavePlugin saves a recipe the front end fetched and the user
	// accepted.
	SavePlugin(ctx context.Context, req PluginSaveRequest) (PluginSaved, error)
	// DuplicatePlugin copies a plugin under a new name and id.
	DuplicatePlugin(ctx context.Context, id string) (PluginSaved, error)
	// RemovePlugin uninstalls a plugin from every agent, reporting each,
	// then deletes it from the library.
	RemovePlugin(ctx context.Context, id string, report func(string)) (PluginRemoved, error)
	// RepairPlugins rewrites damaged install records with what is
	// readable, keeping the damaged files aside.
	RepairPlugins(ctx context.Context) (PluginRepairs, error)
}
