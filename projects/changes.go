package projects

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/agents"
)

// Change kinds.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
)

// MaxDiffBytes bounds the files Changes shows a diff of; bigger text files
// are listed by size and hash like binary ones.
const MaxDiffBytes = 1 << 20

// Change is one path the agent changed.
type Change struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Type is what the path is in the agent's view (for a deletion: was).
	Type    string `json:"type"`
	Binary  bool   `json:"binary,omitempty"`
	Size    int64  `json:"size"`
	Hash    string `json:"hash,omitempty"`
	OldSize int64  `json:"oldSize,omitempty"`
	OldHash string `json:"oldHash,omitempty"`
	// Diff is a unified diff for text files.
	Diff string `json:"diff,omitempty"`
	// Refused says why the change is never applied (a symlink, device,
	// set-uid or set-gid file).
	Refused string `json:"refused,omitempty"`
	// HostChanged: the user's folder no longer holds what the view was
	// taken from at this path; Apply refuses it unless forced.
	HostChanged bool `json:"hostChanged,omitempty"`
}

// ChangeSet is what an agent changed in its view of a project.
type ChangeSet struct {
	Agent   string   `json:"agent"`
	Project string   `json:"project"`
	Source  string   `json:"source"`
	View    string   `json:"view"` // where the agent sees it
	Changes []Change `json:"changes"`
}

// Changes computes what a changed in its view of p.
func (v Views) Changes(ctx context.Context, a agents.Agent, p Project) (*ChangeSet, error) {
	l, err := v.lock(ctx, a, p.Name)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	return v.changes(a, p, true)
}

func (v Views) changes(a agents.Agent, p Project, diffs bool) (*ChangeSet, error) {
	bl, err := v.loadBaseline(a, p.Name)
	if err != nil {
		return nil, err
	}
	view, err := os.OpenRoot(v.Dir(a, p.Name))
	if err != nil {
		return nil, fmt.Errorf("%s's view of %q: %w", a.Name, p.Name, err)
	}
	defer view.Close()
	now, err := scan(view)
	if err != nil {
		return nil, fmt.Errorf("reading %s's view of %q: %w", a.Name, p.Name, err)
	}
	host, _ := os.OpenRoot(p.Path) // nil: the folder is gone; every change then conflicts
	if host != nil {
		defer host.Close()
	}
	cs := &ChangeSet{Agent: a.Name, Project: p.Name, Source: p.Path, View: GuestDir(p.Name), Changes: []Change{}}
	for _, rel := range sortedKeys(now) {
		s := now[rel]
		old, had := bl.Files[rel]
		if had && old.Type == s.typ && old.Hash == s.hash && s.mode&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
			continue
		}
		c := Change{Path: rel, Kind: Added, Type: s.typ, Size: s.size, Hash: s.hash}
		if had {
			c.Kind, c.OldSize, c.OldHash = Modified, old.Size, old.Hash
		}
		c.Refused = refusal(s)
		c.HostChanged = hostChanged(host, rel, old, had)
		if c.Type == TypeFile && c.Refused == "" {
			v.describe(view, host, &c, diffs)
		}
		cs.Changes = append(cs.Changes, c)
	}
	for _, rel := range sortedKeys(bl.Files) {
		if _, ok := now[rel]; ok {
			continue
		}
		old := bl.Files[rel]
		cs.Changes = append(cs.Changes, Change{Path: rel, Kind: Deleted, Type: old.Type, OldSize: old.Size, OldHash: old.Hash,
			HostChanged: hostChanged(host, rel, old, true)})
	}
	slices.SortFunc(cs.Changes, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	return cs, nil
}

// refusal says why the view's entry is never written to the user's folder.
func refusal(s scanned) string {
	switch {
	case s.typ == TypeSymlink:
		return "a symbolic link: links are never applied (they could point anywhere on your computer)"
	case s.typ == TypeOther:
		return "not a regular file (device, fifo or socket)"
	case s.mode&fs.ModeSetuid != 0:
		return "has the set-uid bit"
	case s.mode&fs.ModeSetgid != 0:
		return "has the set-gid bit"
	}
	return ""
}

// hostChanged reports whether the user's folder holds, at rel, something
// other than the baseline recorded (nothing, when the baseline had nothing).
func hostChanged(host *os.Root, rel string, old Entry, had bool) bool {
	if host == nil {
		return true
	}
	st, err := host.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return had
	}
	if err != nil || !had {
		return true
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		t, err := host.Readlink(rel)
		return err != nil || old.Type != TypeSymlink || hashBytes([]byte(t)) != old.Hash
	case st.Mode().IsRegular():
		if old.Type != TypeFile || st.Size() != old.Size {
			return true
		}
		h, _, err := hashIn(host, rel)
		return err != nil || h != old.Hash
	}
	return true
}

// describe fills in whether c is binary and its diff against what the
// user's folder holds now.
func (v Views) describe(view, host *os.Root, c *Change, diffs bool) {
	now, err := readSmall(view, c.Path)
	if err != nil || !isText(now) {
		c.Binary = true
		return
	}
	var before []byte
	if c.Kind == Modified && host != nil {
		if before, err = readSmall(host, c.Path); err != nil || !isText(before) {
			c.Binary = true
			return
		}
	}
	if diffs {
		c.Diff = unifiedDiff("a/"+c.Path, "b/"+c.Path, string(before), string(now))
	}
}

// readSmall reads a regular file of at most MaxDiffBytes.
func readSmall(root *os.Root, rel string) ([]byte, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > MaxDiffBytes {
		return nil, fmt.Errorf("%s: not a small regular file", rel)
	}
	return io.ReadAll(io.LimitReader(f, MaxDiffBytes+1))
}

func isText(b []byte) bool { return !bytes.ContainsRune(b, 0) && utf8.Valid(b) }

// ApplyOptions choose what Apply writes.
type ApplyOptions struct {
	// Paths limits Apply to these changes; empty is every change.
	Paths []string
	// Force writes files the user changed since the view was taken.
	Force bool
}

// Skipped is a change Apply or Discard did not make, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Result says what Apply or Discard did.
type Result struct {
	Done     []string  `json:"done"`
	Refused  []Skipped `json:"refused"`  // never applied (links, devices, set-uid)
	Conflict []Skipped `json:"conflict"` // changed on the host; --force applies them
}

// select picks the changes named by paths (all when empty); a path that
// is not a change is an error naming it.
func pick(cs *ChangeSet, paths []string) ([]Change, error) {
	if len(paths) == 0 {
		return cs.Changes, nil
	}
	var out []Change
	for _, p := range paths {
		clean := path.Clean(strings.TrimPrefix(p, "./"))
		i := slices.IndexFunc(cs.Changes, func(c Change) bool { return c.Path == clean })
		if i < 0 {
			return nil, fmt.Errorf("%w: paths: %q is not one of the changes; see `osaurus-sandbox changes %s %s`", ErrInvalid, p, cs.Agent, cs.Project)
		}
		out = append(out, cs.Changes[i])
	}
	return out, nil
}

// review is what Apply and Discard work on, under the view's lock: the
// chosen changes, the baseline, and the view and the user's folder opened
// as roots.
type review struct {
	chosen     []Change
	baseline   *Baseline
	view, host *os.Root
	unlock     func() error
}

func (r *review) close() {
	if r.host != nil {
		r.host.Close()
	}
	if r.view != nil {
		r.view.Close()
	}
	r.unlock()
}

// openReview locks a's view of p and opens what Apply and Discard need for
// the chosen paths (all the changes when paths is empty).
func (v Views) openReview(ctx context.Context, a agents.Agent, p Project, paths []string) (_ *review, err error) {
	l, err := v.lock(ctx, a, p.Name)
	if err != nil {
		return nil, err
	}
	r := &review{unlock: l.Unlock}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	cs, err := v.changes(a, p, false)
	if err != nil {
		return nil, err
	}
	if r.chosen, err = pick(cs, paths); err != nil {
		return nil, err
	}
	if r.baseline, err = v.loadBaseline(a, p.Name); err != nil {
		return nil, err
	}
	if r.view, err = os.OpenRoot(v.Dir(a, p.Name)); err != nil {
		return nil, err
	}
	if r.host, err = os.OpenRoot(p.Path); err != nil {
		return nil, fmt.Errorf("project %q: %w", p.Name, err)
	}
	return r, nil
}

// Apply writes the chosen changes of a's view of p into the user's folder,
// each file atomically (a temporary file renamed over the old), and moves
// the baseline on so they are no longer changes. Links, devices and
// set-uid files are refused; files the user changed meanwhile are refused
// unless o.Force. Paths are resolved beneath the folder (os.Root), so no
// link in it leads a write outside.
func (v Views) Apply(ctx context.Context, a agents.Agent, p Project, o ApplyOptions) (*Result, error) {
	rv, err := v.openReview(ctx, a, p, o.Paths)
	if err != nil {
		return nil, err
	}
	defer rv.close()
	chosen, bl, view, host := rv.chosen, rv.baseline, rv.view, rv.host
	r := &Result{Done: []string{}, Refused: []Skipped{}, Conflict: []Skipped{}}
	var errs []error
	for _, c := range chosen {
		switch {
		case c.Refused != "":
			r.Refused = append(r.Refused, Skipped{c.Path, c.Refused})
			continue
		case c.HostChanged && !o.Force:
			r.Conflict = append(r.Conflict, Skipped{c.Path, "changed in your folder since the agent's view was taken; --force overwrites it"})
			continue
		}
		var e Entry
		var err error
		if c.Kind == Deleted {
			err = host.Remove(c.Path)
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		} else {
			e, err = writeAtomic(view, host, c.Path)
		}
		if err != nil {
			if errors.Is(err, errRefused) {
				r.Refused = append(r.Refused, Skipped{c.Path, err.Error()})
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
			continue
		}
		if c.Kind == Deleted {
			delete(bl.Files, c.Path)
		} else {
			bl.Files[c.Path] = e
		}
		r.Done = append(r.Done, c.Path)
	}
	if len(r.Done) > 0 {
		if err := v.saveBaseline(a, bl); err != nil {
			errs = append(errs, err)
		}
	}
	return r, errors.Join(errs...)
}

var errRefused = errors.New("refused")

// writeAtomic copies the view's rel over the folder's: a temporary file
// beside it, synced, then renamed. It re-checks what it opened, so a file
// the agent swapped for a link or made set-uid after the scan is refused.
func writeAtomic(view, host *os.Root, rel string) (Entry, error) {
	src, err := view.Open(rel)
	if err != nil {
		return Entry{}, err
	}
	defer src.Close()
	lst, err := view.Lstat(rel)
	if err != nil {
		return Entry{}, err
	}
	st, err := src.Stat()
	if err != nil {
		return Entry{}, err
	}
	if !lst.Mode().IsRegular() || !st.Mode().IsRegular() || st.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		return Entry{}, fmt.Errorf("%w: no longer a plain file in the agent's view", errRefused)
	}
	// Added files get the user's usual modes; a file keeps its own.
	mode := fs.FileMode(0o644)
	if st.Mode()&0o111 != 0 {
		mode = 0o755
	}
	var owner *fs.FileInfo
	if old, err := host.Lstat(rel); err == nil {
		if !old.Mode().IsRegular() {
			if old.IsDir() {
				return Entry{}, fmt.Errorf("%w: a folder in your project has this name", errRefused)
			}
		} else {
			mode = old.Mode().Perm()
			owner = &old
		}
	}
	if dir := path.Dir(rel); dir != "." {
		if err := host.MkdirAll(dir, 0o755); err != nil {
			return Entry{}, err
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(rel), ".osaurus-apply-"+hex.EncodeToString(rnd[:]))
	w, err := host.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return Entry{}, err
	}
	done := false
	defer func() {
		if !done {
			host.Remove(tmp)
		}
	}()
	h := newHasher()
	n, err := io.Copy(io.MultiWriter(w, h), src)
	if err == nil {
		err = w.Chmod(mode)
	}
	if err == nil && owner != nil {
		chownLike(w, *owner)
	}
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Entry{}, err
	}
	if err := host.Rename(tmp, rel); err != nil {
		return Entry{}, err
	}
	done = true
	syncDir(host, path.Dir(rel))
	return Entry{Type: TypeFile, Size: n, Mode: mode, Hash: h.sum()}, nil
}

// Discard drops the chosen changes of a's view of p: the view gets the
// user's folder's current content back at those paths (an added file is
// removed), and the baseline moves on to it.
func (v Views) Discard(ctx context.Context, a agents.Agent, p Project, paths []string) (*Result, error) {
	rv, err := v.openReview(ctx, a, p, paths)
	if err != nil {
		return nil, err
	}
	defer rv.close()
	chosen, bl, view, host := rv.chosen, rv.baseline, rv.view, rv.host
	r := &Result{Done: []string{}, Refused: []Skipped{}, Conflict: []Skipped{}}
	var errs []error
	for _, c := range chosen {
		if err := view.RemoveAll(c.Path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
			continue
		}
		delete(bl.Files, c.Path)
		st, err := host.Lstat(c.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
			continue
		case st.Mode().IsRegular():
			e, err := v.restore(host, view, c.Path, a)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
				continue
			}
			bl.Files[c.Path] = e
		case st.Mode()&fs.ModeSymlink != 0:
			t, err := host.Readlink(c.Path)
			if err == nil {
				err = view.Symlink(t, c.Path)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", c.Path, err))
				continue
			}
			bl.Files[c.Path] = Entry{Type: TypeSymlink, Size: int64(len(t)), Hash: hashBytes([]byte(t))}
		}
		r.Done = append(r.Done, c.Path)
	}
	if len(r.Done) > 0 {
		if err := v.saveBaseline(a, bl); err != nil {
			errs = append(errs, err)
		}
	}
	return r, errors.Join(errs...)
}

// restore copies the folder's rel into the view, owned by the agent.
func (v Views) restore(host, view *os.Root, rel string, a agents.Agent) (Entry, error) {
	src, err := host.Open(rel)
	if err != nil {
		return Entry{}, err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return Entry{}, err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := view.MkdirAll(dir, 0o755); err != nil {
			return Entry{}, err
		}
	}
	w, err := view.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm())
	if err != nil {
		return Entry{}, err
	}
	h := newHasher()
	n, err := io.Copy(io.MultiWriter(w, h), src)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Entry{}, err
	}
	if a.UID != 0 {
		if v.Chown != nil || os.Geteuid() == 0 {
			view.Lchown(rel, a.UID, a.UID)
		}
	}
	return Entry{Type: TypeFile, Size: n, Mode: st.Mode().Perm(), Hash: h.sum()}, nil
}
