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
	"syscall"
	"unicode/utf8"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/termsafe"
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
	Type    string      `json:"type"`
	Mode    fs.FileMode `json:"mode,omitempty"`
	Binary  bool        `json:"binary,omitempty"`
	Size    int64       `json:"size"`
	Hash    string      `json:"sha256,omitempty"`
	OldSize int64       `json:"oldSize,omitempty"`
	OldHash string      `json:"oldSha256,omitempty"`
	// Diff is a unified diff for text files, control characters escaped.
	Diff string `json:"diff,omitempty"`
	// Refused says why the change is never applied (a link, device,
	// set-uid file, .git internals, a name no terminal shows safely, a
	// name that folds together with another, a file too big to review).
	Refused string `json:"refused,omitempty"`
	// HostExec says why the path runs code on the user's computer;
	// applying it needs its own confirmation (AllowHostExec).
	HostExec string `json:"hostExec,omitempty"`
	// Large: bigger than LargeFile (by size: sparse files count whole);
	// applying it needs its own confirmation (AllowLarge).
	Large bool `json:"large,omitempty"`
	// HostChanged: the user's folder no longer holds what the view was
	// taken from at this path; Apply refuses it unless forced.
	HostChanged bool `json:"hostChanged,omitempty"`
}

// ChangeSet is what an agent changed in its view of a project.
type ChangeSet struct {
	// Review is the id Apply takes to write exactly these changes.
	Review  string   `json:"review"`
	Agent   string   `json:"agent"`
	Project string   `json:"project"`
	Source  string   `json:"source"`
	View    string   `json:"view"` // where the agent sees it
	Changes []Change `json:"changes"`
}

// Changes computes what a changed in its view of p and records it as a
// review (cs.Review).
func (v Views) Changes(ctx context.Context, a agents.Agent, p Project) (*ChangeSet, error) {
	l, err := v.lock(ctx, a, p.Name)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	cs, err := v.changes(ctx, a, p, true)
	if err != nil {
		return nil, err
	}
	if cs.Review, err = v.saveReview(a, cs); err != nil {
		return nil, err
	}
	return cs, nil
}

// scanBudget is how many bytes of a's views the host hashes per review:
// what its disk quota lets it store, and one file's bound more.
func scanBudget(a agents.Agent) int64 { return 2*a.DiskQuota() + MaxFileSize }

func (v Views) changes(ctx context.Context, a agents.Agent, p Project, diffs bool) (*ChangeSet, error) {
	bl, err := v.loadBaseline(a, p.Name)
	if err != nil {
		return nil, err
	}
	view, err := openTop(v.Dir(a, p.Name))
	if err != nil {
		return nil, fmt.Errorf("%s's view of %q: %w", a.Name, p.Name, err)
	}
	defer view.Close()
	now, err := scan(ctx, view, scanBudget(a))
	if err != nil {
		return nil, fmt.Errorf("reading %s's view of %q: %w", a.Name, p.Name, err)
	}
	host, _ := openTop(p.Path) // nil: the folder is gone; every change then conflicts
	if host != nil {
		defer host.Close()
	}
	// Names that fold together (README.md, readme.md) are one file on a
	// case-insensitive folder.
	folds := map[string][]string{}
	for _, rel := range sortedKeys(now) {
		folds[foldKey(rel)] = append(folds[foldKey(rel)], rel)
	}
	for _, rel := range sortedKeys(bl.Files) {
		if _, ok := now[rel]; !ok {
			folds[foldKey(rel)] = append(folds[foldKey(rel)], rel)
		}
	}
	foldRefusal := func(rel string) string {
		others := slices.DeleteFunc(slices.Clone(folds[foldKey(rel)]), func(o string) bool { return o == rel })
		if len(others) == 0 {
			return ""
		}
		return fmt.Sprintf("differs only in case from %s: on a case-insensitive folder they are one file, so neither is applied; rename one in the agent's view", termsafe.Line(strings.Join(others, ", ")))
	}
	cs := &ChangeSet{Agent: a.Name, Project: p.Name, Source: p.Path, View: GuestDir(p.Name), Changes: []Change{}}
	for _, rel := range sortedKeys(now) {
		s := now[rel]
		old, had := bl.Files[rel]
		if had && old.Type == s.typ && old.Hash == s.hash && s.hash != "" && s.mode&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
			continue
		}
		// A file too big to hash that the view was taken with, at the
		// same size, is taken as the user's own: it is never applied
		// either way, and it must not hold up revoking the project.
		if had && s.typ == TypeFile && s.hash == "" && old.Type == TypeFile && old.Size == s.size && s.mode&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
			continue
		}
		c := Change{Path: rel, Kind: Added, Type: s.typ, Mode: s.mode.Perm(), Size: s.size, Hash: s.hash}
		if had {
			c.Kind, c.OldSize, c.OldHash = Modified, old.Size, old.Hash
		}
		c.Refused = refusal(rel, s)
		if c.Refused == "" {
			c.Refused = foldRefusal(rel)
		}
		c.HostExec = hostExec(rel)
		c.Large = s.typ == TypeFile && s.size > LargeFile
		c.HostChanged = hostChanged(ctx, host, rel, old, had)
		if c.Type == TypeFile && c.Refused == "" {
			describe(ctx, view, host, &c, diffs)
		}
		cs.Changes = append(cs.Changes, c)
	}
	for _, rel := range sortedKeys(bl.Files) {
		if _, ok := now[rel]; ok {
			continue
		}
		old := bl.Files[rel]
		c := Change{Path: rel, Kind: Deleted, Type: old.Type, OldSize: old.Size, OldHash: old.Hash,
			HostChanged: hostChanged(ctx, host, rel, old, true), HostExec: hostExec(rel)}
		switch {
		case gitInternal(rel):
			c.Refused = gitReason
		default:
			c.Refused = foldRefusal(rel)
		}
		cs.Changes = append(cs.Changes, c)
	}
	slices.SortFunc(cs.Changes, func(x, y Change) int { return strings.Compare(x.Path, y.Path) })
	return cs, nil
}

// refusal says why the view's entry is never written to the user's folder.
func refusal(rel string, s scanned) string {
	switch {
	case !safeName(rel):
		return unsafeNameReason
	case gitInternal(rel):
		return gitReason
	case s.typ == TypeSymlink:
		return "a symbolic link: links are never applied (they could point anywhere on your computer)"
	case s.typ == TypeOther:
		return "not a regular file (device, fifo or socket)"
	case s.mode&fs.ModeSetuid != 0:
		return "has the set-uid bit"
	case s.mode&fs.ModeSetgid != 0:
		return "has the set-gid bit"
	case s.typ == TypeFile && s.hash == "":
		return fmt.Sprintf("bigger than %d bytes (by its size: a sparse file counts whole), too big to review", MaxFileSize)
	}
	return ""
}

// hostChanged reports whether the user's folder holds, at rel, something
// other than the baseline recorded (nothing, when the baseline had nothing).
func hostChanged(ctx context.Context, host *os.File, rel string, old Entry, had bool) bool {
	if host == nil {
		return true
	}
	st, err := lstatIn(host, rel)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return had
	}
	if err != nil || !had {
		return true
	}
	m := fileMode(&st)
	switch {
	case m&fs.ModeSymlink != 0:
		dir, name, err := parentIn(host, rel)
		if err != nil {
			return true
		}
		defer dir.Close()
		t, err := readlinkAt(dir, name)
		return err != nil || old.Type != TypeSymlink || hashBytes([]byte(t)) != old.Hash
	case m.IsRegular():
		if old.Type != TypeFile || st.Size != old.Size {
			return true
		}
		f, _, err := openFileIn(host, rel)
		if err != nil {
			return true
		}
		defer f.Close()
		h, _, err := hashFile(ctx, f, old.Size)
		return err != nil || h != old.Hash
	}
	return true
}

// describe fills in whether c is binary and its diff against what the
// user's folder holds now.
func describe(ctx context.Context, view, host *os.File, c *Change, diffs bool) {
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
	if diffs && ctx.Err() == nil {
		// The diff's lines are the agent's: shown with their control
		// characters escaped, so none rewrites what a terminal shows.
		c.Diff = termsafe.String(unifiedDiff("a/"+c.Path, "b/"+c.Path, string(before), string(now)))
	}
}

// readSmall reads a regular file of at most MaxDiffBytes beneath root.
func readSmall(root *os.File, rel string) ([]byte, error) {
	f, st, err := openFileIn(root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > MaxDiffBytes {
		return nil, fmt.Errorf("%s: not a small regular file", rel)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxDiffBytes+1))
	if err == nil && len(b) > MaxDiffBytes {
		err = fmt.Errorf("%s: grew past %d bytes", rel, MaxDiffBytes)
	}
	return b, err
}

func isText(b []byte) bool { return !bytes.ContainsRune(b, 0) && utf8.Valid(b) }

// ApplyOptions choose what Apply writes.
type ApplyOptions struct {
	// Review is the id of the review to apply (ChangeSet.Review).
	Review string
	// Paths limits Apply to these changes of the review; empty is every
	// change.
	Paths []string
	// Force writes files the user changed since the view was taken.
	Force bool
	// AllowHostExec writes paths that run code on the user's computer
	// (Change.HostExec).
	AllowHostExec bool
	// AllowLarge writes files bigger than LargeFile.
	AllowLarge bool
}

// Skipped is a change Apply or Discard did not make, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Result says what Apply or Discard did.
type Result struct {
	Done     []string  `json:"done"`
	Refused  []Skipped `json:"refused"`  // never applied (links, devices, set-uid, .git, ...) or not confirmed
	Conflict []Skipped `json:"conflict"` // changed on the host; --force applies them
	// Changed are paths the agent changed, added or removed since the
	// review: never applied from an old review.
	Changed []Skipped `json:"changed"`
	// Checkpoint is the automatic checkpoint the owner took of the
	// sandbox before applying (safetyCheckpoints), if any.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// ChangedReason is Result.Changed's reason for a reviewed path.
const ChangedReason = "changed since you reviewed it; review it again with `osaurus-sandbox changes`"

// AppearedReason is Result.Changed's reason for a path not in the review.
const AppearedReason = "appeared since you reviewed it; not applied"

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
			return nil, fmt.Errorf("%w: paths: %q is not one of the changes; see `osaurus-sandbox changes %s %s`", ErrInvalid, termsafe.Line(p), cs.Agent, cs.Project)
		}
		out = append(out, cs.Changes[i])
	}
	return out, nil
}

// pickReview picks the entries of r named by paths (all when empty).
func pickReview(r *Review, a agents.Agent, project string, paths []string) ([]ReviewEntry, error) {
	if len(paths) == 0 {
		return r.Entries, nil
	}
	var out []ReviewEntry
	for _, p := range paths {
		clean := path.Clean(strings.TrimPrefix(p, "./"))
		i := slices.IndexFunc(r.Entries, func(e ReviewEntry) bool { return e.Path == clean })
		if i < 0 {
			return nil, fmt.Errorf("%w: paths: %q is not one of review %s's changes; see `osaurus-sandbox changes %s %s`", ErrInvalid, termsafe.Line(p), r.ID, a.Slug, project)
		}
		out = append(out, r.Entries[i])
	}
	return out, nil
}

// Apply writes the changes of review o.Review (those named by o.Paths, or
// all) from a's view of p into the user's folder, and moves the baseline
// on so they are no longer changes. Each file is opened once, under the
// view's lock, no-follow and non-blocking; its bytes are hashed as they
// are copied into a temporary file beside the target, and the file is
// renamed into place only if they are the bytes reviewed. Whatever differs
// from the review, or appeared since, is listed in Result.Changed and not
// written. Links, devices, set-uid files and .git internals are refused;
// paths that run code on the host and large files need o.AllowHostExec
// and o.AllowLarge; files the user changed meanwhile need o.Force.
func (v Views) Apply(ctx context.Context, a agents.Agent, p Project, o ApplyOptions) (*Result, error) {
	if o.Review == "" {
		return nil, fmt.Errorf("%w: review: empty; run `osaurus-sandbox changes %s %s` and pass the id it prints", ErrInvalid, a.Slug, p.Name)
	}
	l, err := v.lock(ctx, a, p.Name)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	rv, err := v.loadReview(a, p.Name, o.Review)
	if err != nil {
		return nil, err
	}
	chosen, err := pickReview(rv, a, p.Name, o.Paths)
	if err != nil {
		return nil, err
	}
	cur, err := v.changes(ctx, a, p, false)
	if err != nil {
		return nil, err
	}
	bl, err := v.loadBaseline(a, p.Name)
	if err != nil {
		return nil, err
	}
	view, err := openTop(v.Dir(a, p.Name))
	if err != nil {
		return nil, err
	}
	defer view.Close()
	host, err := os.OpenRoot(p.Path)
	if err != nil {
		return nil, fmt.Errorf("project %q: %w", p.Name, err)
	}
	defer host.Close()
	owner := folderOwner(host)
	now := map[string]Change{}
	for _, c := range cur.Changes {
		now[c.Path] = c
	}
	r := &Result{Done: []string{}, Refused: []Skipped{}, Conflict: []Skipped{}, Changed: []Skipped{}}
	var errs []error
	for _, e := range chosen {
		c, still := now[e.Path]
		switch {
		case e.Refused != "":
			r.Refused = append(r.Refused, Skipped{e.Path, e.Refused})
			continue
		case !still || c.Kind != e.Kind || c.Type != e.Type || c.Hash != e.Hash || c.Size != e.Size:
			r.Changed = append(r.Changed, Skipped{e.Path, ChangedReason})
			continue
		case c.Refused != "":
			r.Refused = append(r.Refused, Skipped{e.Path, c.Refused})
			continue
		case e.HostExec != "" && !o.AllowHostExec:
			r.Refused = append(r.Refused, Skipped{e.Path, e.HostExec + "; read it, then apply it with --allow-exec-paths"})
			continue
		case e.Large && !o.AllowLarge:
			r.Refused = append(r.Refused, Skipped{e.Path, fmt.Sprintf("%d bytes, more than %d; apply it with --allow-large", e.Size, LargeFile)})
			continue
		case c.HostChanged && !o.Force:
			r.Conflict = append(r.Conflict, Skipped{e.Path, "changed in your folder since the agent's view was taken; --force overwrites it"})
			continue
		}
		var ent Entry
		var err error
		if e.Kind == Deleted {
			// Still gone from the view (the scan above said so).
			err = host.Remove(e.Path)
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		} else {
			ent, err = writeChecked(ctx, view, host, e, owner)
		}
		if err != nil {
			switch {
			case errors.Is(err, errChanged):
				r.Changed = append(r.Changed, Skipped{e.Path, ChangedReason})
			case errors.Is(err, errRefused):
				r.Refused = append(r.Refused, Skipped{e.Path, err.Error()})
			default:
				errs = append(errs, fmt.Errorf("%s: %w", termsafe.Line(e.Path), err))
			}
			continue
		}
		if e.Kind == Deleted {
			delete(bl.Files, e.Path)
		} else {
			bl.Files[e.Path] = ent
		}
		r.Done = append(r.Done, e.Path)
	}
	if len(o.Paths) == 0 {
		reviewed := map[string]bool{}
		for _, e := range rv.Entries {
			reviewed[e.Path] = true
		}
		for _, c := range cur.Changes {
			if !reviewed[c.Path] {
				r.Changed = append(r.Changed, Skipped{c.Path, AppearedReason})
			}
		}
	}
	if len(r.Done) > 0 {
		if err := v.saveBaseline(a, bl); err != nil {
			errs = append(errs, err)
		}
	}
	return r, errors.Join(errs...)
}

var (
	errRefused = errors.New("refused")
	errChanged = errors.New("changed since reviewed")
)

// owner is a uid and gid files apply creates get (-1: leave them).
type owner struct{ uid, gid int }

// folderOwner is the owner of the user's folder: files and folders apply
// creates are theirs, not root's, when the app runs as root.
func folderOwner(host *os.Root) owner {
	if os.Geteuid() != 0 {
		return owner{-1, -1}
	}
	st, err := host.Stat(".")
	if err != nil {
		return owner{-1, -1}
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return owner{int(s.Uid), int(s.Gid)}
	}
	return owner{-1, -1}
}

// mkdirs makes dir's missing folders in host, each owned by o.
func mkdirs(host *os.Root, dir string, o owner) error {
	if dir == "." {
		return nil
	}
	cur := ""
	for c := range strings.SplitSeq(dir, "/") {
		cur = path.Join(cur, c)
		err := host.Mkdir(cur, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if o.uid >= 0 {
			host.Lchown(cur, o.uid, o.gid)
		}
	}
	return nil
}

// writeChecked copies the view's e.Path over the folder's: it opens the
// view's file once (no-follow, non-blocking, type checked on the open
// descriptor), copies it into a temporary file beside the target while
// hashing it, and renames that into place only if size, hash and exec bit
// are the review's. The folder's own file keeps its mode and owner; a new
// one gets the folder owner's.
func writeChecked(ctx context.Context, view *os.File, host *os.Root, e ReviewEntry, o owner) (Entry, error) {
	rel := e.Path
	src, st, err := openFileIn(view, rel)
	if err != nil {
		if errors.Is(err, errNotPlain) {
			return Entry{}, fmt.Errorf("%w: no longer a plain file in the agent's view", errChanged)
		}
		return Entry{}, err
	}
	defer src.Close()
	if st.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 || st.Size() != e.Size || (st.Mode()&0o111 != 0) != (e.Mode&0o111 != 0) {
		return Entry{}, errChanged
	}
	// Added files get the user's usual modes; a file keeps its own.
	mode := fs.FileMode(0o644)
	if st.Mode()&0o111 != 0 {
		mode = 0o755
	}
	fileOwner := o
	if old, err := host.Lstat(rel); err == nil {
		if !old.Mode().IsRegular() {
			if old.IsDir() {
				return Entry{}, fmt.Errorf("%w: a folder in your project has this name", errRefused)
			}
		} else {
			mode = old.Mode().Perm()
			if s, ok := old.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
				fileOwner = owner{int(s.Uid), int(s.Gid)}
			}
		}
	}
	if err := mkdirs(host, path.Dir(rel), o); err != nil {
		return Entry{}, err
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
	// At most one byte more than reviewed: a file that grew is changed.
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(ctxReader{ctx, src}, e.Size+1))
	if err == nil && (n != e.Size || h.sum() != e.Hash) {
		err = errChanged
	}
	if err == nil {
		err = w.Chmod(mode)
	}
	if err == nil && fileOwner.uid >= 0 {
		err = w.Chown(fileOwner.uid, fileOwner.gid)
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
	return Entry{Type: TypeFile, Size: n, Mode: mode, Hash: e.Hash}, nil
}

// review is what Discard works on, under the view's lock: the chosen
// changes, the baseline, and the view and the user's folder opened as
// roots.
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

// openReview locks a's view of p and opens what Discard needs for the
// chosen paths (all the changes when paths is empty).
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
	cs, err := v.changes(ctx, a, p, false)
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
