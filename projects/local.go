package projects

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agents"
	"golang.org/x/sys/unix"
)

// Applying a remote project's changes to the user's folder on this
// machine (WriteApplied): this side writes a review's changes into the
// folder the user uploaded from, before the far owner applies them to its
// uploaded copy, trusting nothing the far side says beyond the review the
// user saw. Each path is checked again here, the
// folder is walked a component at a time from a directory descriptor
// (never through a link, never by a path string), conflicts are judged
// against this folder as it is now, content is verified against the
// review's hash before it is renamed into place, and every write is a
// temporary file renamed beneath the same directory descriptor.

// OpenUploaded opens rel of an uploaded project's copy for the machine
// that uploaded it, once the file is exactly the reviewed one (size and
// hash): it serves only uploaded projects, and no link is followed.
func OpenUploaded(ctx context.Context, p Project, rel, hash string, size int64) (*os.File, error) {
	if p.UploadedFrom == "" {
		return nil, fmt.Errorf("%w: project %q is a folder of this machine, not an upload: its files are read on this machine", ErrInvalid, p.Name)
	}
	if !uploadPath(rel) {
		return nil, fmt.Errorf("%w: %q is not a path in the project", ErrInvalid, Shown(rel))
	}
	root, err := openTop(p.Path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, st, err := openFileIn(root, rel)
	if err != nil {
		return nil, err
	}
	return reviewed(ctx, f, st.Size(), size, hash, Shown(rel))
}

// reviewed returns f (of length have), rewound, when it holds exactly the
// reviewed content (size bytes of SHA-256 hash); else it closes f and
// says that what (the file, named) no longer holds it.
func reviewed(ctx context.Context, f *os.File, have, size int64, hash, what string) (*os.File, error) {
	var h string
	var n int64
	var err error
	if have == size {
		h, n, err = hashFile(ctx, f, size)
	}
	if err == nil && (have != size || n != size || h != hash) {
		err = fmt.Errorf("%w: %s no longer holds the reviewed content", errChanged, what)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenChanged opens rel of a's view of the uploaded project p for the
// machine that uploaded it, once the file is exactly the reviewed one
// (size and hash). The uploading machine writes a change into its own
// folder before this owner applies it to its copy (so a change it can't
// write is never lost here), so the content comes from the agent's view,
// not the copy. The view is the agent's to change: it is read beneath a
// descriptor a component at a time, no link followed, regular files only
// (openFileIn), under the view's lock.
func (v Views) OpenChanged(ctx context.Context, a agents.Agent, p Project, rel, hash string, size int64) (*os.File, error) {
	if p.UploadedFrom == "" {
		return nil, fmt.Errorf("%w: project %q is a folder of this machine, not an upload: its changes are applied on this machine", ErrInvalid, p.Name)
	}
	if !uploadPath(rel) {
		return nil, fmt.Errorf("%w: %q is not a path in the project", ErrInvalid, Shown(rel))
	}
	if size < 0 || size > MaxFileSize {
		return nil, fmt.Errorf("%w: size %d is not a size a review has", ErrInvalid, size)
	}
	l, err := v.lock(ctx, a, p.Name)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	if _, err := v.loadBaseline(a, p.Name); err != nil {
		return nil, err
	}
	root, err := openTop(v.Dir(a, p.Name))
	if err != nil {
		return nil, fmt.Errorf("%s's view of %q: %w", a.Name, p.Name, err)
	}
	defer root.Close()
	f, st, err := openFileIn(root, rel)
	if errors.Is(err, errNotPlain) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("%w: %s is not a plain file in %s's view (a link, or through one): never sent", ErrInvalid, Shown(rel), a.Name)
	}
	if err != nil {
		return nil, err
	}
	if st.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		f.Close()
		return nil, fmt.Errorf("%w: %s has the set-uid or set-gid bit: never sent", ErrInvalid, Shown(rel))
	}
	return reviewed(ctx, f, st.Size(), size, hash, Shown(rel)+" in "+a.Name+"'s view")
}

// FetchFunc opens the content of change c, as the far side sends it.
type FetchFunc func(ctx context.Context, c Change) (io.ReadCloser, error)

// LocalCheck is what this machine's folder holds at a change's path,
// against the change: "" when the change may be written, else why not
// (Conflict: the user changed it; else a refusal).
type LocalCheck struct {
	Conflict string
	Refused  string
	// Same: the folder already holds the change's result.
	Same bool
}

// checkPath says why rel, a path the far side named, is never written
// here ("" when it may be).
func checkPath(rel string) string {
	switch {
	case !uploadPath(rel):
		return "not a relative path inside the folder (absolute, \"..\", or not clean): the far side's answer is not trusted"
	case !safeName(rel):
		return unsafeNameReason
	case gitInternal(rel):
		return gitReason
	}
	return ""
}

// refuseLocal says why c is not written here whatever the folder holds:
// the far side's review marks, and the local rules again.
func refuseLocal(c Change, o ApplyOptions) string {
	if r := checkPath(c.Path); r != "" {
		return r
	}
	if c.Refused != "" {
		return c.Refused
	}
	if c.Type != TypeFile {
		return "not a regular file: only files are applied"
	}
	if c.Kind != Deleted && (len(c.Hash) != 64 || strings.Trim(c.Hash, "0123456789abcdef") != "") {
		return "the review has no content hash for it"
	}
	if c.Kind != Added && c.Kind != Modified && c.Kind != Deleted {
		return "an unknown kind of change"
	}
	if he := hostExec(c.Path); he != "" && !o.AllowHostExec {
		return he + "; read it, then apply it with --allow-exec-paths"
	}
	if c.Kind != Deleted && c.Size > LargeFile && !o.AllowLarge {
		return fmt.Sprintf("%d bytes, more than %d; apply it with --allow-large", c.Size, LargeFile)
	}
	if c.Size < 0 || c.Size > MaxFileSize {
		return fmt.Sprintf("bigger than %d bytes", MaxFileSize)
	}
	return ""
}

// walkTo opens the folder holding rel beneath root, a component at a
// time, no link followed; create makes the missing folders (0755).
func walkTo(root *os.File, rel string, create bool) (*os.File, string, error) {
	parts := strings.Split(rel, "/")
	cur, err := dupFile(root)
	if err != nil {
		return nil, "", err
	}
	for _, c := range parts[:len(parts)-1] {
		next, err := openAt(cur, c, unix.O_RDONLY|unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) && create {
			if err = rawFD(cur, func(fd int) error { return unix.Mkdirat(fd, c, 0o755) }); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openAt(cur, c, unix.O_RDONLY|unix.O_DIRECTORY)
			}
		}
		cur.Close()
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return nil, "", fmt.Errorf("%w: %s in your folder is a link or a file, not a folder: nothing is written through it", errRefused, Shown(c))
			}
			return nil, "", err
		}
		cur = next
	}
	return cur, parts[len(parts)-1], nil
}

// checkAt judges c against what dir (the folder holding it) has at name.
func checkAt(ctx context.Context, dir *os.File, name string, c Change, force bool) (LocalCheck, error) {
	var st unix.Stat_t
	err := rawFD(dir, func(fd int) error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	if errors.Is(err, unix.ENOENT) {
		switch c.Kind {
		case Deleted:
			return LocalCheck{Same: true}, nil
		case Modified:
			if !force {
				return LocalCheck{Conflict: "gone from your folder since the upload; --force writes it"}, nil
			}
		}
		return LocalCheck{}, nil
	}
	if err != nil {
		return LocalCheck{}, err
	}
	if fileMode(&st).Type() != 0 {
		return LocalCheck{Refused: fmt.Sprintf("your folder has a %s here, not a regular file: never replaced", typeName(fileMode(&st)))}, nil
	}
	f, err := openAt(dir, name, unix.O_RDONLY)
	if err != nil {
		return LocalCheck{}, err
	}
	defer f.Close()
	fst, err := f.Stat()
	if err != nil {
		return LocalCheck{}, err
	}
	if !fst.Mode().IsRegular() {
		return LocalCheck{Refused: "changed type while read"}, nil
	}
	h, _, err := hashFile(ctx, f, MaxFileSize)
	if err != nil {
		return LocalCheck{Conflict: "your file is too big to compare; --force overwrites it"}, nil
	}
	switch {
	case c.Kind != Deleted && h == c.Hash:
		return LocalCheck{Same: true}, nil
	case c.Kind != Added && h == c.OldHash:
		return LocalCheck{}, nil
	case force:
		return LocalCheck{}, nil
	}
	return LocalCheck{Conflict: "changed in your folder since the upload; --force overwrites it"}, nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "folder"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file"
}

// WriteApplied writes changes (reviewed changes of an agent's view of a
// far project) into dir, this machine's folder, before the far owner
// applies them to its copy: each checked here at the moment of writing
// (the path, no link on the way, a conflict against the folder as it is
// now: refuseLocal and checkAt), its content fetched
// with fetch and written only when its size and SHA-256 are the
// review's. A file keeps its mode; a new one gets 0644, or 0755 when
// executable.
func WriteApplied(ctx context.Context, dir string, changes []Change, o ApplyOptions, fetch FetchFunc) (*Result, error) {
	r := &Result{Done: []string{}, Refused: []Skipped{}, Conflict: []Skipped{}, Changed: []Skipped{}}
	root, err := openTop(dir)
	if err != nil {
		return r, err
	}
	defer root.Close()
	var errs []error
	for _, c := range changes {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		reason, conflict, err := writeOne(ctx, root, c, o, fetch)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", Shown(c.Path), err))
		case conflict != "":
			r.Conflict = append(r.Conflict, Skipped{c.Path, conflict})
		case reason != "":
			r.Refused = append(r.Refused, Skipped{c.Path, reason})
		default:
			r.Done = append(r.Done, c.Path)
		}
	}
	return r, errors.Join(errs...)
}

func writeOne(ctx context.Context, root *os.File, c Change, o ApplyOptions, fetch FetchFunc) (refused, conflict string, err error) {
	if r := refuseLocal(c, o); r != "" {
		return r, "", nil
	}
	// A modified file whose folder is gone is a conflict: no folder is
	// made for it unless forced.
	dir, name, err := walkTo(root, c.Path, c.Kind == Added || c.Kind == Modified && o.Force)
	if errors.Is(err, errRefused) {
		return strings.TrimPrefix(err.Error(), errRefused.Error()+": "), "", nil
	}
	if errors.Is(err, unix.ENOENT) && c.Kind == Deleted {
		return "", "", nil // its folder is gone: so is it
	}
	if errors.Is(err, unix.ENOENT) && c.Kind == Modified {
		return "", "gone from your folder since the upload; --force writes it", nil
	}
	if err != nil {
		return "", "", err
	}
	defer dir.Close()
	lc, err := checkAt(ctx, dir, name, c, o.Force)
	switch {
	case err != nil:
		return "", "", err
	case lc.Refused != "":
		return lc.Refused, "", nil
	case lc.Conflict != "":
		return "", lc.Conflict, nil
	case lc.Same:
		return "", "", nil
	}
	if c.Kind == Deleted {
		err := rawFD(dir, func(fd int) error { return unix.Unlinkat(fd, name, 0) })
		if errors.Is(err, unix.ENOENT) {
			err = nil
		}
		return "", "", err
	}
	// Added files get the user's usual modes; a file keeps its own.
	mode := uint32(0o644)
	if c.Mode&0o111 != 0 {
		mode = 0o755
	}
	var st unix.Stat_t
	if rawFD(dir, func(fd int) error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) }) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		mode = uint32(st.Mode) & 0o777
	}
	body, err := fetch(ctx, c)
	if err != nil {
		return "", "", err
	}
	defer body.Close()
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := ".osaurus-apply-" + hex.EncodeToString(rnd[:])
	var wfd int
	err = rawFD(dir, func(fd int) error {
		var err error
		wfd, err = unix.Openat(fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|openFlags, mode)
		return err
	})
	if err != nil {
		return "", "", err
	}
	w := os.NewFile(uintptr(wfd), path.Join(dir.Name(), tmp))
	done := false
	defer func() {
		if !done {
			rawFD(dir, func(fd int) error { return unix.Unlinkat(fd, tmp, 0) })
		}
	}()
	h := newHasher()
	// At most one byte more than reviewed: more is not the review.
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(ctxReader{ctx, body}, c.Size+1))
	if err == nil && (n != c.Size || h.sum() != c.Hash) {
		w.Close()
		return fmt.Sprintf("the far side sent %d bytes that are not the reviewed content (sha256 %s): nothing written", n, c.Hash), "", nil
	}
	if err == nil {
		err = w.Chmod(fs.FileMode(mode))
	}
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", err
	}
	// The folder may have changed while the content came: judged again
	// just before the rename.
	if lc, err := checkAt(ctx, dir, name, c, o.Force); err != nil || lc.Refused != "" || lc.Conflict != "" {
		if err != nil {
			return "", "", err
		}
		return lc.Refused, lc.Conflict, nil
	}
	if err := rawFD(dir, func(fd int) error { return unix.Renameat(fd, tmp, fd, name) }); err != nil {
		return "", "", err
	}
	done = true
	dir.Sync()
	return "", "", nil
}
