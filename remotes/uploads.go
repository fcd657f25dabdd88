package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/osaurus/osaurus-sandbox/agentproto/control"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/projects"
)

// Projects uploaded through a context (docs/projects.md, "A project on
// another machine"): the far owner keeps a copy of this machine's folder,
// and which folder it came from is recorded here (remote-projects.json),
// never taken from the far side: a far side that lies can't choose where
// this machine writes. The command line (`project add` through a
// context) and the window of a remote context upload the same way.

// Link is one project uploaded through a context: the far project and
// the folder of this machine it came from.
type Link struct {
	Context string `json:"context"`
	URL     string `json:"url"`
	Project string `json:"project"`
	Dir     string `json:"dir"`
}

// Links is the record of uploads, remote-projects.json (LinksPath). It
// is written by this machine's front ends only, as contexts.json is: no
// owner holds it.
type Links struct{ Path string }

type linksFile struct {
	Links []Link `json:"links"`
}

// LinksPath is the record's file in this machine's config folder.
func LinksPath(configDir string) string { return filepath.Join(configDir, "remote-projects.json") }

// Load reads every link; none when there is no file.
func (l Links) Load() ([]Link, error) {
	var f linksFile
	b, err := os.ReadFile(l.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", l.Path, err)
	}
	return f.Links, nil
}

// Set records (or, with dir "", forgets) the folder rc's project came
// from.
func (l Links) Set(rc Context, project, dir string) error {
	links, err := l.Load()
	if err != nil {
		return err
	}
	links = slices.DeleteFunc(links, func(k Link) bool { return k.Context == rc.Name && k.Project == project })
	if dir != "" {
		links = append(links, Link{Context: rc.Name, URL: rc.URL, Project: project, Dir: dir})
	}
	if err := os.MkdirAll(filepath.Dir(l.Path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(linksFile{Links: links}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(l.Path, append(b, '\n'), 0o600)
}

// Get is the record of rc's project (by the context's name: its URL may
// have changed since, which the caller checks), ok false when it was not
// uploaded from this machine.
func (l Links) Get(rc Context, project string) (Link, bool, error) {
	links, err := l.Load()
	if err != nil {
		return Link{}, false, err
	}
	for _, k := range links {
		if k.Context == rc.Name && k.Project == project {
			return k, true, nil
		}
	}
	return Link{}, false, nil
}

// ProjectUploader is the owner's operation an upload goes through
// (api.AgentOps.UploadProject).
type ProjectUploader interface {
	UploadProject(ctx context.Context, req control.ProjectUploadRequest, body io.Reader) (projects.Project, error)
}

// UploadProject sends dir, a folder of this machine, to rc's owner up as
// project name (the folder's name when ""), and records in links that
// the project came from dir. A failed upload returns a zero Project; an
// upload whose record failed returns the project with the error.
func UploadProject(ctx context.Context, up ProjectUploader, rc Context, links Links, dir, name string) (projects.Project, projects.UploadStats, error) {
	var stats projects.UploadStats
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return projects.Project{}, stats, fmt.Errorf("%w: path: %s is not a folder", projects.ErrInvalid, dir)
	}
	if name == "" {
		name = projects.DefaultName(dir)
	}
	host, _ := os.Hostname()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		stats, err = projects.SendUpload(ctx, dir, pw)
		pw.CloseWithError(err)
	}()
	p, err := up.UploadProject(ctx, control.ProjectUploadRequest{Name: name, From: host + ":" + dir}, pr)
	pr.CloseWithError(errors.New("upload ended"))
	<-done
	if err != nil {
		return projects.Project{}, stats, err
	}
	if err := links.Set(rc, p.Name, dir); err != nil {
		return p, stats, fmt.Errorf("uploaded project %s, but could not record its folder here: %w", p.Name, err)
	}
	return p, stats, nil
}
