package host

import (
	"context"
	"sync"

	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// settingsMu keeps two SaveSettings of this process from both passing
// the revision check before either writes.
var settingsMu sync.Mutex

// Settings reads sandbox.json for a front end on another machine.
func (d *DataOwner) Settings(ctx context.Context) (api.SettingsFile, error) {
	st, err := config.ReadState(d.Paths.SandboxJSON())
	if err != nil {
		return api.SettingsFile{}, err
	}
	return settingsFile(d.Paths.SandboxJSON(), st), nil
}

// SaveSettings changes sandbox.json as req asks, if it is still at
// req.IfRevision.
func (d *DataOwner) SaveSettings(ctx context.Context, req api.SettingsSave) (api.SettingsFile, error) {
	settingsMu.Lock()
	defer settingsMu.Unlock()
	path := d.Paths.SandboxJSON()
	st, aside, err := config.SaveChanges(path, config.Changes{Settings: req.Settings, Reset: req.Reset, Aside: req.Aside, IfRevision: req.IfRevision})
	if err != nil {
		return api.SettingsFile{Aside: aside}, err
	}
	f := settingsFile(path, st)
	f.Aside = aside
	return f, nil
}

func settingsFile(path string, st config.FileState) api.SettingsFile {
	f := api.SettingsFile{Path: path, Settings: st.Settings, Revision: st.Revision}
	if st.Damaged != nil {
		f.Damaged = st.Damaged.Error()
	}
	for _, p := range st.Problems {
		f.Problems = append(f.Problems, api.SettingsProblem{Key: p.Key, Line: p.Line, Error: p.Err.Error(), Text: p.String()})
	}
	return f
}

// ListProjects is projects.json as the owner has it.
func (h *Host) ListProjects(ctx context.Context) ([]projects.Project, error) {
	list, err := projects.Load(h.paths.ProjectsJSON())
	if list == nil {
		list = []projects.Project{}
	}
	return list, err
}

// Previews are the ports agents exposed, from the relay itself (the
// state file is for a reader with no owner to ask).
func (h *ToolHost) Previews(ctx context.Context) ([]api.Preview, error) {
	if h.Ports == nil {
		return []api.Preview{}, nil
	}
	return h.Ports.List(), nil
}
