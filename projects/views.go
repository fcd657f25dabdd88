package projects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
	"github.com/osaurus/osaurus-sandbox/internal/filelock"
)

// Entry types.
const (
	TypeFile    = "file"
	TypeSymlink = "symlink"
	TypeDir     = "dir"
	TypeOther   = "other" // device, fifo, socket
)

// Entry is one path of a tree as the baseline records it.
type Entry struct {
	Type string      `json:"type"`
	Size int64       `json:"size"`
	Mode fs.FileMode `json:"mode"`
	Hash string      `json:"hash"` // sha256 of the content (of the target for a symlink)
}

// Baseline is what a project held when an agent's view was taken.
type Baseline struct {
	Project string           `json:"project"`
	Source  string           `json:"source"`
	TakenAt time.Time        `json:"takenAt"`
	Files   map[string]Entry `json:"files"` // slash-separated paths relative to the project
}

// Views keeps the agents' views of the projects of one data folder.
type Views struct {
	Paths config.Paths
	// Chown gives a view's files to the agent's uid; nil is os.Lchown
	// when the process may, else nothing (the guest then sees the host
	// user's files, which the agent can read but not write).
	Chown func(path string, uid, gid int) error
}

// Dir is the host folder of a's view of project name.
func (v Views) Dir(a agents.Agent, name string) string {
	return filepath.Join(v.Paths.ProjectViews(), a.Slug, name)
}

// GuestDir is where the agent sees its view.
func GuestDir(name string) string { return "/workspace/projects/" + name }

func (v Views) baselinePath(a agents.Agent, name string) string {
	return filepath.Join(v.Paths.ProjectBaselines(), a.ID, name+".json")
}

// lock serialises everything done to one view.
func (v Views) lock(ctx context.Context, a agents.Agent, name string) (*filelock.Lock, error) {
	dir := filepath.Join(v.Paths.ProjectBaselines(), a.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return filelock.Acquire(ctx, filepath.Join(dir, name+".lock"))
}

// Has reports whether a has a complete view of project name.
func (v Views) Has(a agents.Agent, name string) bool {
	_, err := v.loadBaseline(a, name)
	if err != nil {
		return false
	}
	st, err := os.Lstat(v.Dir(a, name))
	return err == nil && st.IsDir()
}

func (v Views) loadBaseline(a agents.Agent, name string) (*Baseline, error) {
	b, err := os.ReadFile(v.baselinePath(a, name))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s has no view of %q; grant it with `osaurus-sandbox agent set %s projects %s`", ErrNotGranted, a.Name, name, a.Slug, name)
		}
		return nil, err
	}
	var bl Baseline
	if err := json.Unmarshal(b, &bl); err != nil {
		return nil, fmt.Errorf("baseline of %s's view of %q: %w", a.Name, name, err)
	}
	return &bl, nil
}

func (v Views) saveBaseline(a agents.Agent, bl *Baseline) error {
	b, err := json.Marshal(bl)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(v.baselinePath(a, bl.Project), b, 0o600)
}

// Ensure takes a's view of p unless it has one: a copy of the folder as
// it is now, owned by the agent, and its baseline. A folder bigger than
// the agent's disk quota is refused.
func (v Views) Ensure(ctx context.Context, a agents.Agent, p Project) error {
	l, err := v.lock(ctx, a, p.Name)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if v.Has(a, p.Name) {
		return nil
	}
	return v.take(ctx, a, p)
}

func (v Views) take(ctx context.Context, a agents.Agent, p Project) error {
	agentDir := filepath.Join(v.Paths.ProjectViews(), a.Slug)
	// The agent's folder is not the agent's: it can't rename or replace
	// its views, so the host always finds them where it put them.
	for _, d := range []string{v.Paths.ProjectViews(), agentDir, v.Paths.ProjectsMount()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	staging, err := v.staging()
	if err != nil {
		return err
	}
	dst := v.Dir(a, p.Name)
	os.RemoveAll(dst) // a view without its baseline is incomplete
	// The copy is made where no agent can look or reach (a folder only
	// this process enters), through an os.Root, and given to the agent
	// only when complete, by one rename.
	tmp, err := os.MkdirTemp(staging, p.Name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	out, err := os.OpenRoot(tmp)
	if err != nil {
		return err
	}
	defer out.Close()
	bl := &Baseline{Project: p.Name, Source: p.Path, TakenAt: time.Now().UTC(), Files: map[string]Entry{}}
	var total int64
	src, err := os.OpenRoot(p.Path)
	if err != nil {
		return fmt.Errorf("project %q: %w", p.Name, err)
	}
	defer src.Close()
	err = fs.WalkDir(src.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel != "." {
				if err := out.Mkdir(rel, 0o700); err != nil {
					return err
				}
			}
			if err := out.Chmod(rel, info.Mode().Perm()|0o700); err != nil {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := src.Readlink(rel)
			if err != nil {
				return err
			}
			if err := out.Symlink(target, rel); err != nil {
				return err
			}
			bl.Files[rel] = Entry{Type: TypeSymlink, Size: int64(len(target)), Hash: hashBytes([]byte(target))}
		case d.Type().IsRegular():
			e, err := copyOut(ctx, src, out, rel)
			if err != nil {
				return err
			}
			total += e.Size
			if q := a.DiskQuota(); total > q {
				return fmt.Errorf("project %q is bigger than %s's disk quota (%d bytes): raise it with `osaurus-sandbox agent set %s diskGB N`", p.Name, a.Name, q, a.Slug)
			}
			bl.Files[rel] = e
		default:
			return nil // devices, fifos and sockets are not project files
		}
		return v.chownIn(out, tmp, rel, a)
	})
	if err != nil {
		return fmt.Errorf("taking %s's view of %q: %w", a.Name, p.Name, err)
	}
	// Only the agent enters its view.
	if err := out.Chmod(".", 0o700); err != nil {
		return err
	}
	if err := v.saveBaseline(a, bl); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// staging is the folder views are taken in: in the workspace (so the
// finished view is renamed into place), owned by this process and closed
// to everyone else.
func (v Views) staging() (string, error) {
	dir := filepath.Join(v.Paths.ProjectViews(), ".staging")
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok || int(sys.Uid) != os.Geteuid() {
		return "", fmt.Errorf("%s is not a folder of this user's; remove it", dir)
	}
	return dir, os.Chmod(dir, 0o700)
}

// chownIn gives rel of the view being taken to the agent.
func (v Views) chownIn(out *os.Root, tmp, rel string, a agents.Agent) error {
	if a.UID == 0 {
		return nil
	}
	if v.Chown != nil {
		// tmp lies in the staging folder no agent enters.
		return v.Chown(filepath.Join(tmp, filepath.FromSlash(rel)), a.UID, a.UID)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return out.Lchown(rel, a.UID, a.UID)
}

// copyOut copies rel of src to the new file rel of out and returns its
// entry.
func copyOut(ctx context.Context, src, out *os.Root, rel string) (Entry, error) {
	f, err := src.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Entry{}, err
	}
	if !st.Mode().IsRegular() {
		return Entry{}, fmt.Errorf("%s: changed type while copied", rel)
	}
	w, err := out.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm())
	if err != nil {
		return Entry{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), ctxReader{ctx, f})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Entry{}, err
	}
	return Entry{Type: TypeFile, Size: n, Mode: st.Mode().Perm(), Hash: hex.EncodeToString(h.Sum(nil))}, nil
}

func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Drop deletes a's view of project name and its baseline. It refuses
// while the view holds changes unless force.
func (v Views) Drop(ctx context.Context, a agents.Agent, p Project, force bool) error {
	l, err := v.lock(ctx, a, p.Name)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if !force && v.Has(a, p.Name) {
		cs, err := v.changes(ctx, a, p, false)
		if err != nil {
			return err
		}
		if len(cs.Changes) > 0 {
			return fmt.Errorf("%w: %s changed %d files of %q; apply or discard them first (`osaurus-sandbox changes %s %s`)", ErrPending, a.Name, len(cs.Changes), p.Name, a.Slug, p.Name)
		}
	}
	if err := os.RemoveAll(v.Dir(a, p.Name)); err != nil {
		return err
	}
	err = os.Remove(v.baselinePath(a, p.Name))
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return err
}

// DropAgent deletes every view of an agent that is being removed.
func (v Views) DropAgent(a agents.Agent) error {
	if a.Slug != "" {
		if err := os.RemoveAll(filepath.Join(v.Paths.ProjectViews(), a.Slug)); err != nil {
			return err
		}
	}
	if a.ID == "" {
		return nil
	}
	return os.RemoveAll(filepath.Join(v.Paths.ProjectBaselines(), a.ID))
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
