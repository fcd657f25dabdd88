// Package projects lets agents work on the user's own folders without
// touching them: the user adds a folder as a project, grants it to agents,
// and each granted agent works on a view of its own, a copy taken when the
// project was granted (package doc in docs/projects.md says why a copy and
// not an overlay). What the agent changed is computed on the host against
// the baseline recorded when the view was taken; the user reviews it
// (Changes), writes chosen files into the folder (Apply, atomic per file,
// refusing files the user changed meanwhile and anything that is not a
// plain file) or drops them (Discard).
package projects

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// Errors callers branch on.
var (
	ErrNotFound = agentproto.Class(agentproto.ErrNotFound, "project not found")
	ErrExists   = agentproto.Class(agentproto.ErrExists, "project already exists")
	ErrInvalid  = agentproto.Class(agentproto.ErrInvalid, "invalid project")
	// ErrNotGranted: the agent has no view of the project.
	ErrNotGranted = agentproto.Class(agentproto.ErrPermission, "the agent has no view of this project")
	// ErrPending: the view holds changes nobody applied or discarded.
	ErrPending = agentproto.Class(agentproto.ErrBusy, "the agent's view has changes not applied or discarded")
)

// Project is a host folder agents may be granted.
type Project struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	AddedAt time.Time `json:"addedAt"`
	// UploadedFrom is set for a project another machine uploaded through
	// a remote context (ReceiveUpload): Path is then the owner's copy in
	// its data folder, and applying writes only that copy; the other
	// machine writes its own folder. It names that folder as the other
	// machine said (shown, never opened).
	UploadedFrom string `json:"uploadedFrom,omitempty"`
}

type listFile struct {
	Projects []Project `json:"projects"`
}

// Load reads the project list at path; a missing file is an empty list.
func Load(path string) ([]Project, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parse(path, b)
}

func save(path string, list []Project) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(listFile{Projects: list}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

// Get returns the project named name.
func Get(path, name string) (Project, error) {
	list, err := Load(path)
	if err != nil {
		return Project{}, err
	}
	for _, p := range list {
		if p.Name == name {
			return p, nil
		}
	}
	return Project{}, fmt.Errorf("%w: %q; see `osaurus-sandbox project list`", ErrNotFound, name)
}

// DefaultName is a project's name from its folder: the folder's base name,
// lower case, with characters a name can't hold turned into '-'.
func DefaultName(dir string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(filepath.Base(dir)) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.TrimLeft(b.String(), ".-_")
	if len(s) > agents.MaxProjectNameLen {
		s = s[:agents.MaxProjectNameLen]
	}
	if s == "" {
		s = "project"
	}
	return s
}

// Add records dir as project name (DefaultName when empty). dataRoot is
// the app's data folder: a project can't hold it or lie in it, or agents'
// views would copy each other.
func Add(path, dir, name, dataRoot string) (Project, error) {
	return add(path, dir, name, dataRoot, "")
}

func add(path, dir, name, dataRoot, from string) (Project, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Project{}, fmt.Errorf("%w: path: %v", ErrInvalid, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Project{}, fmt.Errorf("%w: path: there is no folder %s; check the path, or create the folder first (mkdir -p %s)", ErrInvalid, abs, abs)
	case errors.Is(err, os.ErrPermission):
		return Project{}, fmt.Errorf("%w: path: you may not read %s; give a folder of yours", ErrInvalid, abs)
	case err != nil:
		return Project{}, fmt.Errorf("%w: path: %v; give an existing folder", ErrInvalid, err)
	}
	if !st.IsDir() {
		return Project{}, fmt.Errorf("%w: path: %s is not a folder", ErrInvalid, abs)
	}
	if dataRoot != "" && from == "" {
		dr, _ := filepath.Abs(dataRoot)
		if real, err := filepath.EvalSymlinks(dr); err == nil {
			dr = real
		}
		if within(abs, dr) || within(dr, abs) {
			return Project{}, fmt.Errorf("%w: path: %s overlaps the app's data folder %s; choose a folder outside it", ErrInvalid, abs, dr)
		}
	}
	if name == "" {
		name = DefaultName(abs)
	}
	if !agents.ValidProjectName(name) {
		return Project{}, fmt.Errorf("%w: name: %q, want %s (set it with --name)", ErrInvalid, name, agents.ProjectNameRule)
	}
	list, err := Load(path)
	if err != nil {
		return Project{}, err
	}
	for _, p := range list {
		if p.Name == name {
			return Project{}, fmt.Errorf("%w: the name %q is taken by %s; choose another with --name", ErrExists, name, p.Path)
		}
		if p.Path == abs {
			return Project{}, fmt.Errorf("%w: %s is already project %q", ErrExists, abs, p.Name)
		}
	}
	p := Project{Name: name, Path: abs, AddedAt: time.Now().UTC(), UploadedFrom: from}
	return p, save(path, append(list, p))
}

// Remove forgets project name. Agents granted it must be ungranted first.
func Remove(path, name string, granted []agents.Agent) error {
	list, err := Load(path)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(list, func(p Project) bool { return p.Name == name })
	if i < 0 {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	var names []string
	for _, a := range granted {
		if slices.Contains(a.Projects, name) {
			names = append(names, a.Name)
		}
	}
	if len(names) > 0 {
		return fmt.Errorf("project %q is granted to %s; take it away first with `osaurus-sandbox agent set AGENT projects ...`", name, strings.Join(names, ", "))
	}
	return save(path, slices.Delete(list, i, i+1))
}

// within reports whether p is root or lies beneath it.
func within(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
