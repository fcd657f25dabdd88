package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/host/api"
	"github.com/osaurus/osaurus-sandbox/host/datadir"
	"github.com/osaurus/osaurus-sandbox/plugins"
)

// library is the plugin library, opened for this call: a Remove's
// uninstaller is the call's own.
func (d *DataOwner) library() (*plugins.Library, error) {
	lib, err := plugins.OpenLibrary(d.Paths.PluginsDir())
	if err != nil {
		return nil, fmt.Errorf("%w: the plugin library %s: %w", agentproto.ErrUnsupported, d.Paths.PluginsDir(), err)
	}
	return lib, nil
}

// SavePlugin saves a recipe a front end fetched and the user accepted as
// a new version of its id.
func (d *DataOwner) SavePlugin(ctx context.Context, req api.PluginSaveRequest) (api.PluginSaved, error) {
	lib, err := d.library()
	if err != nil {
		return api.PluginSaved{}, err
	}
	p, err := plugins.DecodeBytes(req.Recipe)
	if err != nil {
		return api.PluginSaved{}, err
	}
	e, changed, err := lib.Save(ctx, p, req.Origin)
	if err != nil {
		return api.PluginSaved{}, err
	}
	return api.PluginSaved{ID: e.ID, Changed: changed}, nil
}

// DuplicatePlugin copies a plugin under a new name and id.
func (d *DataOwner) DuplicatePlugin(ctx context.Context, id string) (api.PluginSaved, error) {
	lib, err := d.library()
	if err != nil {
		return api.PluginSaved{}, err
	}
	e, err := lib.Duplicate(ctx, id)
	if err != nil {
		return api.PluginSaved{}, err
	}
	return api.PluginSaved{ID: e.ID, Changed: true}, nil
}

// everywhere is the plugins.Uninstaller of one RemovePlugin call.
type everywhere struct {
	th     *ToolHost
	report func(string)
}

func (u everywhere) UninstallEverywhere(ctx context.Context, pluginID string) error {
	return u.th.UninstallPluginEverywhere(ctx, pluginID, u.report)
}

// RemovePlugin uninstalls a plugin from every agent, then deletes it; a
// damaged entry is kept aside, and Damaged says where.
func (d *DataOwner) RemovePlugin(ctx context.Context, id string, report func(string)) (api.PluginRemoved, error) {
	lib, err := d.library()
	if err != nil {
		return api.PluginRemoved{}, err
	}
	lib.Uninstaller = everywhere{d.Tools, report}
	var r api.PluginRemoved
	_, gerr := lib.Get(id)
	var damaged *plugins.DamagedError
	if errors.As(gerr, &damaged) {
		r.Damaged = damaged.Path
	}
	return r, lib.Remove(ctx, id)
}

// RepairPlugins rewrites damaged install records with what is readable.
func (d *DataOwner) RepairPlugins(ctx context.Context) (api.PluginRepairs, error) {
	rs, err := plugins.NewInstalled(d.Paths.AgentStateDir()).Repair(ctx)
	if rs == nil {
		rs = []plugins.InstalledRepair{}
	}
	return api.PluginRepairs{Repairs: rs}, err
}

// PluginLibrary reads the library (or req.Plugin of it), or with
// req.Agent only that agent's installs, for a front end whose own files are another machine's. A
// damaged file is reported, as List does, not skipped.
func (d *DataOwner) PluginLibrary(ctx context.Context, req control.PluginLibraryRequest) (api.PluginLibrary, error) {
	lib, err := d.library()
	if err != nil {
		return api.PluginLibrary{}, err
	}
	r := api.PluginLibrary{Plugins: []*plugins.Entry{}, SetupAllowlist: datadir.SetupAllowlist(d.Paths)}
	if req.Agent != "" {
		// The installs alone: a plugin removed from the library may still
		// be installed, and is uninstalled by this answer.
		a, err := d.Tools.agent(req.Agent)
		if err != nil {
			return api.PluginLibrary{}, err
		}
		if r.Installed, err = d.Tools.installed().List(a.ID); err != nil {
			return api.PluginLibrary{}, err
		}
		return r, nil
	}
	if req.Plugin != "" {
		e, err := lib.Get(req.Plugin)
		if err != nil {
			return api.PluginLibrary{}, err
		}
		r.Plugins = append(r.Plugins, e)
	} else {
		list, err := lib.List()
		r.Plugins = append(r.Plugins, list...)
		for _, e := range unjoinErr(err) {
			var dmg *plugins.DamagedError
			if !errors.As(e, &dmg) {
				return api.PluginLibrary{}, err
			}
			r.Damaged = append(r.Damaged, api.PluginDamaged{ID: dmg.ID, Path: dmg.Path, Error: dmg.Err.Error()})
		}
	}
	return r, nil
}

// unjoinErr is the errors errors.Join put together, or err alone.
func unjoinErr(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
