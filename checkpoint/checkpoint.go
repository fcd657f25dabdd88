// Package checkpoint saves and puts back the sandbox's state: the VM's
// root disk, the agents' homes and project views, and the owner's files
// that describe the agents. A checkpoint is a folder under the data
// folder's checkpoints/, written beside its final name and renamed into
// place, so a crash never leaves half of one under a name.
//
// Files are cloned where the file system can (FICLONE: btrfs, XFS;
// clonefile: APFS) and otherwise copied sparsely (SEEK_DATA/SEEK_HOLE),
// so an 8 GiB root disk costs what it holds. The homes and views are agent-written trees: they
// are walked without following a single symlink (openat O_NOFOLLOW,
// fstat of what was opened); symlinks are kept as links, special files
// skipped.
//
// The caller keeps the state still while it is read or replaced (the VM
// paused or stopped): see sandbox.Manager.Hold and Stopped.
package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/config"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// Sentinel errors.
var (
	ErrNotFound = agentproto.Class(agentproto.ErrNotFound, "no such checkpoint")
	ErrExists   = agentproto.Class(agentproto.ErrExists, "a checkpoint of that name exists")
	ErrName     = agentproto.Class(agentproto.ErrInvalid, "invalid checkpoint name")
)

// Meta describes a checkpoint (its meta.json).
type Meta struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Reason says why it exists: "user", or what it was taken before.
	Reason string `json:"reason"`
	// VM is the VM's state when it was taken: "running" (paused for the
	// copy) or "stopped".
	VM string `json:"vm"`
	// Method is "clone" when the root disk was cloned, "sparse copy"
	// otherwise.
	Method string `json:"method"`
	// Bytes is the size of what it holds; DiskBytes what taking it added
	// on disk: the blocks it allocated, where a clone allocates none (it
	// shares its source's until either is written) and a hard link counts
	// its file's (the live name is replaced by a copy right after).
	Bytes     int64   `json:"bytes"`
	DiskBytes int64   `json:"diskBytes"`
	Seconds   float64 `json:"seconds"` // how long taking it took
	// Auto marks a checkpoint taken by the app (before a reset or a
	// restore), which Prune may delete.
	Auto bool `json:"auto,omitempty"`
	// Items are the parts it holds (relative names, see items).
	Items []string `json:"items"`
}

// ReasonUser is the reason of a checkpoint the user asked for; any other
// is automatic.
const ReasonUser = "user"

// Prune deletes the oldest automatic checkpoints beyond keep; the user's
// are never deleted.
func (s Store) Prune(keep int) error {
	l, err := s.List()
	if err != nil {
		return err
	}
	var auto []Meta
	for _, m := range l {
		if m.Auto {
			auto = append(auto, m)
		}
	}
	var errs []error
	for len(auto) > keep {
		errs = append(errs, s.Remove(auto[0].Name))
		auto = auto[1:]
	}
	return errors.Join(errs...)
}

// Store is the checkpoints of one data folder.
type Store struct {
	Paths config.Paths
	// RootDisk is the VM's root disk (the provisioner's layout names it).
	RootDisk string
}

// Dir is where checkpoints live.
func (s Store) Dir() string { return filepath.Join(s.Paths.Root, "checkpoints") }

// stats adds up what was written.
type stats struct {
	bytes, disk int64
	copied      bool // some file could not be cloned
	// remap, when set, gives copied entries owned by uid from another
	// owner (a fork's files go to the new agent's uid).
	remap *remap
	// chownDenied: this process may not give files away (not root); the
	// caller has the guest do it.
	chownDenied bool
	// link: files are taken by hard link (create's link).
	link bool
}

// remap gives what From owns to To.
type remap struct{ From, To int }

// owner is who a copy of an entry owned by uid, gid belongs to.
func (st *stats) owner(uid, gid uint32) (int, int) {
	if st.remap != nil && int(uid) == st.remap.From {
		u, g := st.remap.To, int(gid)
		if int(gid) == st.remap.From {
			g = st.remap.To
		}
		return u, g
	}
	return int(uid), int(gid)
}

type kind int

const (
	file kind = iota // one regular file (cloned or sparse-copied)
	tree             // an agent-written folder
)

type item struct {
	name string // in the checkpoint, under data/
	path string // live
	kind kind
}

// items are what a checkpoint holds. Memory and event databases are not
// in it: they are open in the owner, and hold no agent's files.
func (s Store) items() []item {
	p := s.Paths
	return []item{
		{"rootfs.ext4", s.RootDisk, file},
		{"homes", p.AgentHomes(), tree},
		{"views", p.ProjectViews(), tree},
		{"agents.json", p.AgentsJSON(), file},
		{"projects.json", p.ProjectsJSON(), file},
		{"agent-state", p.AgentStateDir(), tree},
		{"baselines", p.ProjectBaselines(), tree},
		{"bridge-config", p.BridgeConfigDir(), tree},
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName accepts 1–64 letters, digits, '.', '_' and '-', not starting
// with a punctuation mark.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %q; use 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrName, name)
	}
	return nil
}

// AutoName is a name for a checkpoint taken at t.
func AutoName(prefix string, t time.Time) string {
	return prefix + t.UTC().Format("20060102-150405.000")
}

// Create takes a checkpoint of the live state under name. vm says what the
// VM was doing ("running", "stopped"); reason why it is taken.
func (s Store) Create(ctx context.Context, name, reason, vm string) (Meta, error) {
	return s.create(ctx, name, reason, vm, false)
}

// create is Create; link takes the live files (not folders) by hard link
// instead of by copy, for a checkpoint whose live files are about to be
// replaced by rename (RestoreSaving).
func (s Store) create(ctx context.Context, name, reason, vm string, link bool) (Meta, error) {
	if err := CheckName(name); err != nil {
		return Meta{}, err
	}
	final := filepath.Join(s.Dir(), name)
	if _, err := os.Lstat(final); err == nil {
		return Meta{}, fmt.Errorf("%w: %s", ErrExists, name)
	}
	if err := os.MkdirAll(s.Dir(), 0o700); err != nil {
		return Meta{}, err
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(s.Dir(), ".new-"+name+"-")
	if err != nil {
		return Meta{}, err
	}
	defer os.RemoveAll(tmp) // after the rename, nothing is left here
	m := Meta{Name: name, Created: start.UTC(), Reason: reason, VM: vm, Method: "clone", Auto: reason != ReasonUser}
	data := filepath.Join(tmp, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return Meta{}, err
	}
	st := stats{link: link}
	for _, it := range s.items() {
		if err := ctx.Err(); err != nil {
			return Meta{}, err
		}
		ok, err := save(ctx, it, filepath.Join(data, it.name), &st)
		if err != nil {
			return Meta{}, fmt.Errorf("checkpoint %s: %s: %w", name, it.name, err)
		}
		if ok {
			m.Items = append(m.Items, it.name)
		}
	}
	switch {
	case link && st.copied:
		m.Method = "files linked, folders sparse-copied"
	case link:
		m.Method = "files linked, folders cloned"
	case st.copied:
		m.Method = "sparse copy"
	}
	m.Bytes, m.DiskBytes = st.bytes, st.disk
	m.Seconds = time.Since(start).Seconds()
	if err := writeMeta(tmp, m); err != nil {
		return Meta{}, err
	}
	if err := syncDir(tmp); err != nil {
		return Meta{}, err
	}
	// rename(2) refuses to replace a non-empty folder: a checkpoint made
	// meanwhile under the same name is not overwritten.
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Lstat(final); serr == nil {
			return Meta{}, fmt.Errorf("%w: %s", ErrExists, name)
		}
		return Meta{}, err
	}
	syncDir(s.Dir())
	return m, nil
}

func save(ctx context.Context, it item, dst string, st *stats) (bool, error) {
	fi, err := os.Lstat(it.path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch it.kind {
	case file:
		if !fi.Mode().IsRegular() {
			return false, fmt.Errorf("%s is not a regular file", it.path)
		}
		if st.link {
			return true, linkFile(it.path, dst, st)
		}
		return true, cloneFile(it.path, dst, st)
	default:
		if !fi.IsDir() {
			return false, fmt.Errorf("%s is not a folder", it.path)
		}
		return true, copyTree(ctx, it.path, dst, st)
	}
}

func writeMeta(dir string, m Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "meta.json"), b, 0o600)
}

// List returns the checkpoints, oldest first.
func (s Store) List() ([]Meta, error) {
	ents, err := os.ReadDir(s.Dir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Meta
	for _, e := range ents {
		if !e.IsDir() || CheckName(e.Name()) != nil {
			continue // a checkpoint being written (.new-…), or a stray
		}
		m, err := s.Get(e.Name())
		if err != nil {
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Meta) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Get reads one checkpoint's description.
func (s Store) Get(name string) (Meta, error) {
	if err := CheckName(name); err != nil {
		return Meta{}, err
	}
	b, err := os.ReadFile(filepath.Join(s.Dir(), name, "meta.json"))
	if errors.Is(err, os.ErrNotExist) {
		return Meta{}, fmt.Errorf("%w: %s; see `osaurus-sandbox checkpoint list`", ErrNotFound, name)
	}
	if err != nil {
		return Meta{}, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("checkpoint %s: meta.json: %w", name, err)
	}
	return m, nil
}

// Remove deletes a checkpoint: renamed away first, so it is gone from
// the list at once even if the deletion is cut short.
func (s Store) Remove(name string) error {
	if _, err := s.Get(name); err != nil {
		return err
	}
	trash, err := os.MkdirTemp(s.Dir(), ".removed-")
	if err != nil {
		return err
	}
	dst := filepath.Join(trash, "c")
	if err := os.Rename(filepath.Join(s.Dir(), name), dst); err != nil {
		os.Remove(trash)
		return err
	}
	return os.RemoveAll(trash)
}

// Restore puts checkpoint name's state in place of the live one. Each
// part is copied beside its live place and renamed over it; a part the
// checkpoint does not hold (it did not exist then) is removed. The VM
// must be stopped.
func (s Store) Restore(ctx context.Context, name string) error {
	m, err := s.Get(name)
	if err != nil {
		return err
	}
	data := filepath.Join(s.Dir(), name, "data")
	for _, it := range s.items() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !slices.Contains(m.Items, it.name) {
			if err := os.RemoveAll(it.path); err != nil {
				return fmt.Errorf("restore %s: %s: %w", name, it.name, err)
			}
			continue
		}
		if err := restoreItem(ctx, it, filepath.Join(data, it.name)); err != nil {
			return fmt.Errorf("restore %s: %s: %w", name, it.name, err)
		}
	}
	return nil
}

// RestoreSaving saves the live state as checkpoint saveAs, then restores
// checkpoint name as Restore does. The saved checkpoint takes the live
// files (the root disk: most of the bytes) by hard link, not by copy:
// Restore renames a copy over each live file's name, which leaves the old
// inode to the checkpoint alone. When the restore fails, Unshare gives the
// live files not yet replaced their own inodes again, so the VM's writes
// never reach the saved checkpoint. The saved Meta is returned whenever it
// was taken.
func (s Store) RestoreSaving(ctx context.Context, name, saveAs, reason, vm string) (Meta, error) {
	if _, err := s.Get(name); err != nil {
		return Meta{}, err
	}
	saved, err := s.create(ctx, saveAs, reason, vm, true)
	if err != nil {
		return Meta{}, err
	}
	if err := s.Restore(ctx, name); err != nil {
		// Not ctx: the inodes must be parted even when the call was cancelled.
		if uerr := s.Unshare(); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return saved, err
	}
	return saved, nil
}

// Unshare gives each live file that shares its inode with a checkpoint's
// copy (a RestoreSaving cut short between the link and the rename, even by
// a crash) an inode of its own: the live file is copied beside itself and
// renamed over its name, so the checkpoint keeps the old one unchanged.
// The owner runs it when it opens the data folder.
func (s Store) Unshare() error {
	ents, err := os.ReadDir(s.Dir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, it := range s.items() {
		if it.kind != file {
			continue
		}
		live, err := os.Lstat(it.path)
		if err != nil || !live.Mode().IsRegular() {
			continue
		}
		for _, e := range ents {
			// Every folder, finished or not: a cut-short create (".new-…")
			// may hold a link too.
			held, err := os.Lstat(filepath.Join(s.Dir(), e.Name(), "data", it.name))
			if err != nil || !os.SameFile(live, held) {
				continue
			}
			if err := copyOver(it.path); err != nil {
				errs = append(errs, fmt.Errorf("giving %s its own copy again: %w", it.path, err))
			}
			break
		}
	}
	return errors.Join(errs...)
}

// copyOver replaces the file at path with a copy of itself (a new inode,
// same content, owner, mode and times).
func copyOver(path string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".unshare")
	os.Remove(tmp) // a leftover of an earlier cut-short attempt
	if err := cloneFile(path, tmp, &stats{}); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

func restoreItem(ctx context.Context, it item, src string) error {
	dir := filepath.Dir(it.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, "."+filepath.Base(it.path)+".restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	staged := filepath.Join(tmp, "new")
	var st stats
	if it.kind == file {
		err = cloneFile(src, staged, &st)
	} else {
		err = copyTree(ctx, src, staged, &st)
	}
	if err != nil {
		return err
	}
	if it.kind == file {
		return os.Rename(staged, it.path) // atomic replacement
	}
	// A folder can't be renamed over a non-empty one: the live one goes
	// aside first, then the staged one takes its name.
	old := filepath.Join(tmp, "old")
	if err := os.Rename(it.path, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.Rename(staged, it.path)
}
