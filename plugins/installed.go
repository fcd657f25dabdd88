package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/internal/filelock"
	"github.com/osaurus/osaurus-sandbox/internal/filewatch"
)

// Installation is one plugin installed for one agent: the recipe as it
// was installed (so its tools keep working as installed when the library
// moves on) and the library version it came from.
type Installation struct {
	LibraryVersion int       `json:"libraryVersion"`
	InstalledAt    time.Time `json:"installedAt"`
	Recipe         *Plugin   `json:"recipe"`
	// Review, when set, says why the user should look at the plugin
	// again: it was installed by a version that did not confine imported
	// recipes, and has been confined since (ConfineOld). Installing it
	// again clears it.
	Review string `json:"review,omitempty"`
}

type installedFile struct {
	Plugins map[string]Installation `json:"plugins"`
}

// Installed keeps each agent's installed.json on the host, under
// <data>/agents/<agentID>/sandbox-plugins/, outside the VM's disk, so
// installs survive restarts, Reset and re-provisioning (Osaurus lost
// them on container restart, its issue #660).
type Installed struct {
	dir string // <data>/agents
}

// NewInstalled uses dir (the data folder's agents/ directory).
func NewInstalled(dir string) *Installed { return &Installed{dir: dir} }

// WatchTargets is what a process follows to notice installs made by
// another: the folder of the agents (they come and go) and the install
// record of each agent with a folder there, whether it exists yet or not.
func (s *Installed) WatchTargets() []filewatch.Target {
	ts := []filewatch.Target{filewatch.Dir(s.dir)}
	ents, _ := os.ReadDir(s.dir)
	for _, e := range ents {
		if p, err := s.path(e.Name()); err == nil && e.IsDir() {
			ts = append(ts, filewatch.File(p))
		}
	}
	return ts
}

var agentIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

func (s *Installed) path(agentID string) (string, error) {
	if !agentIDRe.MatchString(agentID) {
		return "", fmt.Errorf("installed plugins: %q is not an agent id", agentID)
	}
	return filepath.Join(s.dir, agentID, "sandbox-plugins", "installed.json"), nil
}

func (s *Installed) read(agentID string) (installedFile, error) {
	f := installedFile{Plugins: map[string]Installation{}}
	p, err := s.path(agentID)
	if err != nil {
		return f, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%s: damaged: %w (uninstall and install the agent's plugins again)", p, err)
	}
	if f.Plugins == nil {
		f.Plugins = map[string]Installation{}
	}
	return f, nil
}

// List returns the agent's installations by plugin id.
func (s *Installed) List(agentID string) (map[string]Installation, error) {
	f, err := s.read(agentID)
	return f.Plugins, err
}

// Installed returns the recipes the agent installed, sorted by id.
func (s *Installed) Installed(agentID string) ([]*Plugin, error) {
	f, err := s.read(agentID)
	if err != nil {
		return nil, err
	}
	var out []*Plugin
	for _, id := range sortedKeys(f.Plugins) {
		if r := f.Plugins[id].Recipe; r != nil && r.ID() == id {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *Installed) update(ctx context.Context, agentID string, change func(*installedFile)) error {
	p, err := s.path(agentID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	lock, err := filelock.Acquire(lctx, p+".lock")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	f, err := s.read(agentID)
	if err != nil {
		return err
	}
	change(&f)
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(p, append(b, '\n'), 0o600)
}

// Record marks p installed for the agent.
func (s *Installed) Record(ctx context.Context, agentID string, p *Plugin, libraryVersion int) error {
	p = p.Clone()
	return s.update(ctx, agentID, func(f *installedFile) {
		f.Plugins[p.ID()] = Installation{LibraryVersion: libraryVersion, InstalledAt: time.Now().UTC(), Recipe: p}
	})
}

// Forget removes the agent's record of the plugin.
func (s *Installed) Forget(ctx context.Context, agentID, pluginID string) error {
	return s.update(ctx, agentID, func(f *installedFile) { delete(f.Plugins, pluginID) })
}

// Agents lists the agents that installed pluginID, sorted.
func (s *Installed) Agents(pluginID string) ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() || !agentIDRe.MatchString(e.Name()) {
			continue
		}
		f, err := s.read(e.Name())
		if err != nil {
			return nil, err
		}
		if _, ok := f.Plugins[pluginID]; ok {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// OriginOf finds where a library version of a plugin came from; false
// when the library does not have it.
type OriginOf func(pluginID string, version int) (Origin, bool)

// ConfineOld brings the agent's installations made before imported
// recipes were confined to the state an install makes now: an imported
// recipe without permissions.network gets the setup allowlist (Confine)
// and is flagged with Review. A recipe whose origin the library no
// longer knows counts as imported (fail closed). It returns the plugin
// ids it changed and writes nothing when there are none.
func (s *Installed) ConfineOld(ctx context.Context, agentID string, origin OriginOf, allowlist []string) ([]string, error) {
	f, err := s.read(agentID)
	if err != nil {
		return nil, err
	}
	want := map[string]*Plugin{}
	for id, in := range f.Plugins {
		if in.Recipe == nil {
			continue
		}
		o, ok := origin(id, in.LibraryVersion)
		if !ok {
			o = Origin{Kind: OriginFile}
		}
		if c := Confine(in.Recipe, o, allowlist); c != in.Recipe {
			want[id] = c
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	var changed []string
	err = s.update(ctx, agentID, func(f *installedFile) {
		for id, c := range want {
			in, ok := f.Plugins[id]
			if !ok || in.Recipe == nil || in.Recipe.Permissions != nil && in.Recipe.Permissions.Network != "" {
				continue // changed meanwhile by an install or an uninstall
			}
			in.Recipe = c
			in.Review = "installed before imported recipes were confined: it asks for no network permission, " +
				"so its setup and tools now get the setup allowlist (" + c.Permissions.Network + ") instead of the agent's network. " +
				"Review what it gets with `osaurus-sandbox plugin show " + id + "` and install it again to accept it"
			f.Plugins[id] = in
			changed = append(changed, id)
		}
	})
	sort.Strings(changed)
	return changed, err
}
