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
		return f, &InstalledDamagedError{Path: p, Err: err}
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

// InstalledDamagedError: an agent's installed.json can't be read. It
// names the file and the way back: `plugin repair` (Installed.Repair).
type InstalledDamagedError struct {
	Path string
	Err  error
}

func (e *InstalledDamagedError) Error() string {
	return fmt.Sprintf("%s is damaged: %v. Run `osaurus-sandbox plugin repair`: it keeps every installation it can still read, moves the file aside (installed.json.damaged-TIME) and writes the rest; install what it could not read again with `osaurus-sandbox plugin install ID --agent AGENT`", e.Path, e.Err)
}

func (e *InstalledDamagedError) Unwrap() []error { return []error{ErrDamaged, e.Err} }

// InstalledRepair is what Repair did to one agent's installed.json.
type InstalledRepair struct {
	AgentID string
	Aside   string   // where the damaged file is now
	Kept    []string // plugin ids still installed
	Dropped []string // what could not be read, and why
}

// Repair rewrites every agent's damaged installed.json with the
// installations that can still be read, keeping the damaged file beside
// it (installed.json.damaged-TIME). Intact files are left alone.
func (s *Installed) Repair(ctx context.Context) ([]InstalledRepair, error) {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []InstalledRepair
	for _, e := range ents {
		if !e.IsDir() || !agentIDRe.MatchString(e.Name()) {
			continue
		}
		r, err := s.repair(ctx, e.Name())
		if err != nil {
			return out, err
		}
		if r.Aside != "" {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *Installed) repair(ctx context.Context, agentID string) (InstalledRepair, error) {
	r := InstalledRepair{AgentID: agentID}
	p, err := s.path(agentID)
	if err != nil {
		return r, err
	}
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	lctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	lock, err := filelock.Acquire(lctx, p+".lock")
	if err != nil {
		return r, err
	}
	defer lock.Unlock()
	var dmg *InstalledDamagedError
	if _, err := s.read(agentID); !errors.As(err, &dmg) {
		return r, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return r, err
	}
	f := installedFile{Plugins: map[string]Installation{}}
	dec := json.NewDecoder(bytes.NewReader(b))
	cut := func(err error) { r.Dropped = append(r.Dropped, fmt.Sprintf("the rest of the file: %v", err)) }
	salvage := func() {
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			r.Dropped = append(r.Dropped, "the file is not a JSON object: nothing could be read")
			return
		}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				cut(err)
				return
			}
			if t != "plugins" {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					cut(err)
					return
				}
				continue
			}
			if t, err := dec.Token(); err != nil || t != json.Delim('{') {
				r.Dropped = append(r.Dropped, `"plugins" is not an object`)
				return
			}
			for dec.More() {
				t, err := dec.Token()
				if err != nil {
					cut(err)
					return
				}
				id, _ := t.(string)
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					cut(err)
					return
				}
				var in Installation
				d := json.NewDecoder(bytes.NewReader(raw))
				d.DisallowUnknownFields()
				switch err := d.Decode(&in); {
				case err != nil:
					r.Dropped = append(r.Dropped, fmt.Sprintf("%s: %v", id, err))
				case in.Recipe == nil || in.Recipe.ID() != id:
					r.Dropped = append(r.Dropped, fmt.Sprintf("%s: no recipe of that id", id))
				default:
					f.Plugins[id] = in
				}
			}
			if _, err := dec.Token(); err != nil {
				cut(err)
				return
			}
		}
	}
	salvage()
	r.Kept = sortedKeys(f.Plugins)
	r.Aside = p + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	if err := atomicfile.WriteFile(r.Aside, b, 0o600); err != nil {
		return r, fmt.Errorf("installed plugins: keeping the damaged file: %w", err)
	}
	nb, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return r, err
	}
	return r, atomicfile.WriteFile(p, append(nb, '\n'), 0o600)
}
