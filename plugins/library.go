package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/internal/filelock"
)

// MaxVersions is how many versions of a plugin the library keeps; older
// ones are dropped, numbers keep counting.
const MaxVersions = 20

// Origin kinds.
const (
	OriginFile      = "file"
	OriginURL       = "url"
	OriginGitHub    = "github"
	OriginEditor    = "editor"
	OriginDuplicate = "duplicate"
	OriginAgent     = "agent"
)

// Origin records where a version came from, so it can be imported again.
type Origin struct {
	Kind string `json:"kind"`
	// Location is what the user gave: a file path, a URL, a GitHub URL, or
	// for a duplicate the id it was copied from.
	Location string `json:"location,omitempty"`
	// Resolved is the URL the bytes were actually read from.
	Resolved string `json:"resolved,omitempty"`
	// Commit is the GitHub commit the ref resolved to.
	Commit string `json:"commit,omitempty"`
	// Agent is the agent that registered an agent-created plugin.
	Agent string `json:"agent,omitempty"`
}

// Version is one saved state of a plugin.
type Version struct {
	Number  int       `json:"number"`
	SavedAt time.Time `json:"savedAt"`
	Origin  Origin    `json:"origin"`
	Recipe  *Plugin   `json:"recipe"`
}

// Entry is one plugin in the library: its file, with every kept version,
// oldest first; the last is the current one.
type Entry struct {
	ID       string    `json:"id"`
	Versions []Version `json:"versions"`
}

// Current is the version in use.
func (e *Entry) Current() Version { return e.Versions[len(e.Versions)-1] }

// Uninstaller removes a plugin from every agent that installed it. The
// library calls it before deleting a plugin, so no agent keeps tools whose
// recipe is gone. The installer (per-agent install) satisfies it.
type Uninstaller interface {
	UninstallEverywhere(ctx context.Context, pluginID string) error
}

// Errors.
var (
	ErrNotFound = agentproto.Class(agentproto.ErrNotFound, "no such plugin")
	ErrExists   = agentproto.Class(agentproto.ErrExists, "plugin already exists")
)

// Library is the folder of plugin files on the host, under the data
// folder: outside the container folder, so Reset and Remove of the VM
// can't touch it.
type Library struct {
	dir string
	// Uninstaller, when set, is called by Remove first.
	Uninstaller Uninstaller
	now         func() time.Time
}

// lockWait bounds how long a change waits for another process's.
const lockWait = 10 * time.Second

// OpenLibrary uses dir, creating it.
func OpenLibrary(dir string) (*Library, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("plugin library: %w", err)
	}
	return &Library{dir: dir, now: time.Now}, nil
}

// Dir is the library's folder.
func (l *Library) Dir() string { return l.dir }

func (l *Library) file(id string) string { return filepath.Join(l.dir, id+".json") }

func (l *Library) lock(ctx context.Context) (func(), error) {
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	lock, err := filelock.Acquire(ctx, filepath.Join(l.dir, ".lock"))
	if err != nil {
		return nil, err
	}
	return func() { lock.Unlock() }, nil
}

// checkID refuses anything that isn't a plugin id before it becomes part
// of a file name.
func checkID(id string) error {
	if !pluginIDRe.MatchString(id) || len(id) > MaxIDLen {
		return fmt.Errorf("%w %q: an id is lowercase letters, digits and hyphens (see `plugin list`)", ErrNotFound, id)
	}
	return nil
}

// Get reads one plugin.
func (l *Library) Get(id string) (*Entry, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(l.file(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w %q; `plugin list` shows the library", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	var e Entry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, &DamagedError{ID: id, Path: l.file(id), Err: err}
	}
	if e.ID != id || len(e.Versions) == 0 || e.Current().Recipe == nil {
		return nil, &DamagedError{ID: id, Path: l.file(id), Err: errors.New("wrong id or no versions")}
	}
	return &e, nil
}

// ErrDamaged is wrapped by DamagedError.
var ErrDamaged = agentproto.Class(agentproto.ErrInvalid, "damaged library file")

// DamagedError: a library file that can't be read as a plugin. It can
// still be removed, and importing the plugin again replaces it.
type DamagedError struct {
	ID, Path string
	Err      error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("%s: damaged library file: %v (`osaurus-sandbox plugin remove %s` removes it from the library, importing the plugin again replaces it; either way the file is kept aside as %s.damaged-TIME)", e.Path, e.Err, e.ID, filepath.Base(e.Path))
}

// damagedAside is where a damaged file is kept once replaced or removed,
// named as agents.json's and sandbox.json's are.
func damagedAside(file string) string {
	return file + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
}

func (e *DamagedError) Unwrap() []error { return []error{ErrDamaged, e.Err} }

// List reads every plugin, sorted by id. A damaged file is reported, not
// skipped, so it can't silently vanish from the list.
func (l *Library) List() ([]*Entry, error) {
	names, err := filepath.Glob(filepath.Join(l.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*Entry
	var errs []error
	for _, n := range names {
		e, err := l.Get(strings.TrimSuffix(filepath.Base(n), ".json"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

func (l *Library) write(e *Entry) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(l.file(e.ID), append(b, '\n'), 0o600)
}

// Save validates p and stores it as the plugin's next version (creating
// the plugin when new). Saving a recipe identical to the current version
// from the same place adds nothing; changed reports whether it did.
func (l *Library) Save(ctx context.Context, p *Plugin, o Origin) (e *Entry, changed bool, err error) {
	return l.save(ctx, p, o, false)
}

// Create is Save that refuses an id already in the library.
func (l *Library) Create(ctx context.Context, p *Plugin, o Origin) (*Entry, error) {
	e, _, err := l.save(ctx, p, o, true)
	return e, err
}

func (l *Library) save(ctx context.Context, p *Plugin, o Origin, mustBeNew bool) (*Entry, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	p = p.Clone() // the caller may keep editing theirs
	unlock, err := l.lock(ctx)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	id := p.ID()
	e, err := l.Get(id)
	if errors.Is(err, ErrDamaged) && !mustBeNew {
		// Replace it, keeping the damaged file beside it for the user.
		if err := os.Rename(l.file(id), damagedAside(l.file(id))); err != nil {
			return nil, false, err
		}
		err = ErrNotFound
	}
	switch {
	case errors.Is(err, ErrNotFound):
		e = &Entry{ID: id}
	case err != nil:
		return nil, false, err
	case mustBeNew:
		return nil, false, fmt.Errorf("%w: %q (rename the plugin, or remove the existing one first)", ErrExists, id)
	default:
		cur := e.Current()
		a, _ := cur.Recipe.Encode()
		b, _ := p.Encode()
		if bytes.Equal(a, b) && cur.Origin == o {
			return e, false, nil
		}
	}
	n := 1
	if len(e.Versions) > 0 {
		n = e.Current().Number + 1
	}
	e.Versions = append(e.Versions, Version{Number: n, SavedAt: l.now().UTC(), Origin: o, Recipe: p})
	if len(e.Versions) > MaxVersions {
		e.Versions = append([]Version(nil), e.Versions[len(e.Versions)-MaxVersions:]...)
	}
	if err := l.write(e); err != nil {
		return nil, false, err
	}
	return e, true, nil
}

// Export returns the current recipe as JSON, ready to share or import.
func (l *Library) Export(id string) ([]byte, error) {
	e, err := l.Get(id)
	if err != nil {
		return nil, err
	}
	return e.Current().Recipe.Encode()
}

// Duplicate copies a plugin under a new name ("NAME copy", then
// "NAME copy 2", ...) and so a new id, as a fresh plugin with one version.
func (l *Library) Duplicate(ctx context.Context, id string) (*Entry, error) {
	e, err := l.Get(id)
	if err != nil {
		return nil, err
	}
	p := e.Current().Recipe.Clone()
	base := strings.TrimSpace(p.Name) + " copy"
	for i := 1; i <= 100; i++ {
		p.Name = base
		if i > 1 {
			p.Name = base + " " + strconv.Itoa(i)
		}
		if len(p.ID()) > MaxIDLen {
			return nil, fmt.Errorf("duplicate %q: the copy's id %q would be longer than %d characters; export it, rename it and import it instead", id, p.ID(), MaxIDLen)
		}
		d, err := l.Create(ctx, p, Origin{Kind: OriginDuplicate, Location: id})
		if errors.Is(err, ErrExists) {
			continue
		}
		return d, err
	}
	return nil, fmt.Errorf("duplicate %q: 100 copies already exist; remove some", id)
}

// Remove uninstalls the plugin from every agent, then deletes it. When
// the uninstall fails nothing is deleted, so the recipe stays available
// to retry.
func (l *Library) Remove(ctx context.Context, id string) error {
	// A damaged file can be removed too: that is how the user gets rid
	// of it. It is kept aside, not deleted: it may hold the only copy of
	// a recipe the user wrote.
	_, err := l.Get(id)
	damaged := errors.Is(err, ErrDamaged)
	if err != nil && !damaged {
		return err
	}
	if l.Uninstaller != nil {
		if err := l.Uninstaller.UninstallEverywhere(ctx, id); err != nil {
			return fmt.Errorf("remove %q: uninstalling from agents first: %w (nothing was removed; fix that and retry)", id, err)
		}
	}
	unlock, err := l.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if damaged {
		err = os.Rename(l.file(id), damagedAside(l.file(id)))
	} else {
		err = os.Remove(l.file(id))
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return atomicfile.SyncDir(l.dir)
}
