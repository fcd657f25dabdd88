//go:build linux

package files

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
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/account"
	"github.com/osaurus/osaurus-sandbox/guestagent/oserr"
	"golang.org/x/sys/unix"
)

// FS is the part of *os.Root the file operations use; hostFS offers the
// same on plain host paths for unconfined identities.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (*os.File, error)
	Lstat(name string) (os.FileInfo, error)
	Stat(name string) (os.FileInfo, error)
	Readlink(name string) (string, error)
	Mkdir(name string, perm os.FileMode) error
	MkdirAll(name string, perm os.FileMode) error
	Chmod(name string, mode os.FileMode) error
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
}

type hostFS struct{}

func (hostFS) OpenFile(n string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(n, flag, perm)
}
func (hostFS) Lstat(n string) (os.FileInfo, error)       { return os.Lstat(n) }
func (hostFS) Stat(n string) (os.FileInfo, error)        { return os.Stat(n) }
func (hostFS) Readlink(n string) (string, error)         { return os.Readlink(n) }
func (hostFS) Mkdir(n string, perm os.FileMode) error    { return os.Mkdir(n, perm) }
func (hostFS) MkdirAll(n string, perm os.FileMode) error { return os.MkdirAll(n, perm) }
func (hostFS) Chmod(n string, mode os.FileMode) error    { return os.Chmod(n, mode) }
func (hostFS) Remove(n string) error                     { return os.Remove(n) }
func (hostFS) RemoveAll(n string) error                  { return os.RemoveAll(n) }
func (hostFS) Rename(oldname, newname string) error      { return os.Rename(oldname, newname) }

// space is where one operation's paths resolve: beneath Identity.Root
// through os.Root, which refuses ".." and symlink escapes, or on the whole
// file system with relative paths taken from the user's home.
type space struct {
	fs   FS
	root string // clean absolute root; "" when unconfined
	home string
}

// name turns a request path into a name for sp.fs. Beneath a root an
// absolute path must lie inside it and becomes relative to it.
func (sp *space) name(p string) (string, error) {
	if sp.root == "" {
		switch {
		case p == "":
			return sp.home, nil
		case filepath.IsAbs(p):
			return filepath.Clean(p), nil
		default:
			return filepath.Join(sp.home, p), nil
		}
	}
	if p == "" {
		return ".", nil
	}
	if !filepath.IsAbs(p) {
		return p, nil
	}
	c := filepath.Clean(p)
	if c == sp.root {
		return ".", nil
	}
	prefix := sp.root
	if prefix != "/" {
		prefix += "/"
	}
	rel, ok := strings.CutPrefix(c, prefix)
	if !ok {
		return "", fmt.Errorf("%w: %s is outside %s", agentproto.ErrEscape, p, sp.root)
	}
	return rel, nil
}

// lazyRoot is an os.Root opened on first use. On a shared folder opening
// and closing a directory costs two round trips to the host (under TCG,
// most of a read_file's time); a read (space.openFile) needs no open root.
type lazyRoot struct {
	path string
	r    *os.Root
	err  error
	done bool
}

func (l *lazyRoot) get() (*os.Root, error) {
	if !l.done {
		l.r, l.err = os.OpenRoot(l.path)
		l.done = true
	}
	return l.r, l.err
}

func (l *lazyRoot) close() {
	if l.r != nil {
		l.r.Close()
	}
}

func (l *lazyRoot) OpenFile(n string, flag int, perm os.FileMode) (*os.File, error) {
	r, err := l.get()
	if err != nil {
		return nil, err
	}
	return r.OpenFile(n, flag, perm)
}

func (l *lazyRoot) Lstat(n string) (os.FileInfo, error) {
	r, err := l.get()
	if err != nil {
		return nil, err
	}
	return r.Lstat(n)
}

func (l *lazyRoot) Stat(n string) (os.FileInfo, error) {
	r, err := l.get()
	if err != nil {
		return nil, err
	}
	return r.Stat(n)
}

func (l *lazyRoot) Readlink(n string) (string, error) {
	r, err := l.get()
	if err != nil {
		return "", err
	}
	return r.Readlink(n)
}

func (l *lazyRoot) Mkdir(n string, perm os.FileMode) error {
	r, err := l.get()
	if err != nil {
		return err
	}
	return r.Mkdir(n, perm)
}

func (l *lazyRoot) MkdirAll(n string, perm os.FileMode) error {
	r, err := l.get()
	if err != nil {
		return err
	}
	return r.MkdirAll(n, perm)
}

func (l *lazyRoot) Chmod(n string, mode os.FileMode) error {
	r, err := l.get()
	if err != nil {
		return err
	}
	return r.Chmod(n, mode)
}

func (l *lazyRoot) Remove(n string) error {
	r, err := l.get()
	if err != nil {
		return err
	}
	return r.Remove(n)
}

func (l *lazyRoot) RemoveAll(n string) error {
	r, err := l.get()
	if err != nil {
		return err
	}
	return r.RemoveAll(n)
}

func (l *lazyRoot) Rename(oldname, newname string) error {
	r, err := l.get()
	if err != nil {
		return err
	}
	return r.Rename(oldname, newname)
}

// openFile opens name for reading (flag: O_RDONLY and open flags) as
// sp.fs.OpenFile does, but beneath a root without opening the root
// itself: an O_PATH handle (no open on a shared folder) and openat2
// with RESOLVE_BENEATH, under which neither "..", an absolute symlink
// nor a symlink leading out leaves the root, as under os.Root.
func (sp *space) openFile(name string, flag int) (*os.File, error) {
	if sp.root == "" {
		return sp.fs.OpenFile(name, flag, 0)
	}
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, fmt.Errorf("%w: openFile opens for reading only", agentproto.ErrInternal)
	}
	rfd, err := unix.Open(sp.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: sp.root, Err: err}
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, name, &unix.OpenHow{
		Flags:   uint64(flag | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOSYS):
		return sp.fs.OpenFile(name, flag, 0) // a kernel before openat2 (5.6)
	case errors.Is(err, unix.EXDEV):
		return nil, fmt.Errorf("%w: %s is outside %s", agentproto.ErrEscape, name, sp.root)
	case err != nil:
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(sp.root, name)), nil
}

// inSpace runs fn with a's credentials and the path space of root.
func inSpace[T any](a *account.Account, root string, fn func(sp *space) (T, error)) (T, error) {
	v, err := account.RunAs(a, func() (T, error) {
		var zero T
		sp := &space{fs: hostFS{}, home: a.Home}
		if root != "" {
			if !filepath.IsAbs(root) {
				return zero, fmt.Errorf("%w: root %q is not absolute", agentproto.ErrInvalid, root)
			}
			r := &lazyRoot{path: root}
			defer r.close()
			sp.fs, sp.root = r, filepath.Clean(root)
		}
		return fn(sp)
	})
	return v, oserr.Map(err)
}

// fileOp is what a file operation states about itself; runFileOp does the
// rest, the same for every operation.
type fileOp struct {
	agentproto.Identity
	path   string       // resolved in the operation's space; fn gets its name
	writes bool         // refused while the host blocks the user (Config.Limit)
	scan   bool         // the context is bounded by scanTimeLimit
	check  func() error // argument checks: after the block, before the user lookup
}

// runFileOp runs fn as op's user in op's space with op.path resolved,
// after the block, argument and user checks, in that order.
func runFileOp[T any](ctx context.Context, s *Ops, op fileOp, fn func(ctx context.Context, sp *space, name string) (T, error)) (T, error) {
	var zero T
	if op.writes {
		if err := s.checkLimit(op.User); err != nil {
			return zero, err
		}
	}
	if op.check != nil {
		if err := op.check(); err != nil {
			return zero, err
		}
	}
	a, err := s.account(op.User)
	if err != nil {
		return zero, err
	}
	if op.scan {
		var cancel context.CancelFunc
		ctx, cancel = scanContext(ctx)
		defer cancel()
	}
	return inSpace(a, op.Root, func(sp *space) (T, error) {
		name, err := sp.name(op.path)
		if err != nil {
			return zero, err
		}
		return fn(ctx, sp, name)
	})
}

// maxRead is the default and largest ReadFile result: base64 in a JSON
// response must still fit one frame.
const maxRead = agentproto.MaxFrame / 2

// Scans bound the work one call buys in PID 1, which runs outside every
// agent's cgroup: a line selection (start_line, line_count, tail_lines)
// reads the whole file, and a listing reads every directory it enters. A
// file of holes costs no disk, so its size says nothing about what it
// costs to read. Each scan also ends with the call's context.
var (
	lineScanLimit int64 = 256 << 20 // bytes a line selection may read
	listScanLimit       = 1_000_000 // directory entries a listing may read
	scanTimeLimit       = 20 * time.Second
)

// errLineScan is the error of a line selection over lineScanLimit.
func errLineScan(path string, size int64) error {
	return fmt.Errorf("%w: %s is %d bytes; start_line, line_count and tail_lines read at most %d MiB of a file (the line-scan limit): "+
		"read it without them, or select lines with sandbox_exec (tail -n, sed -n)", agentproto.ErrTooLarge, path, size, lineScanLimit>>20)
}

// scanContext is ctx bounded by scanTimeLimit; scanErr names the limit
// when that is what ended a scan.
func scanContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, scanTimeLimit, errScanTime)
}

var errScanTime = errors.New("scan time limit")

func scanErr(ctx context.Context, what, instead string) error {
	if errors.Is(context.Cause(ctx), errScanTime) {
		return fmt.Errorf("%w: %s took over %s (the scan time limit); %s", agentproto.ErrTimeout, what, scanTimeLimit, instead)
	}
	return ctx.Err()
}

// ReadFile reads a byte range or a line selection of a file.
func (s *Ops) ReadFile(ctx context.Context, req *agentproto.ReadFileRequest) (*agentproto.ReadFileResponse, error) {
	lines := req.StartLine > 0 || req.LineCount > 0 || req.TailLines > 0
	check := func() error {
		switch {
		case req.Offset < 0 || req.Length < 0 || req.StartLine < 0 || req.LineCount < 0 || req.TailLines < 0 || req.MaxBytes < 0:
			return fmt.Errorf("%w: negative read_file argument", agentproto.ErrInvalid)
		case lines && (req.Offset > 0 || req.Length > 0):
			return fmt.Errorf("%w: select bytes or lines, not both", agentproto.ErrInvalid)
		case req.TailLines > 0 && (req.StartLine > 0 || req.LineCount > 0):
			return fmt.Errorf("%w: tail_lines excludes start_line/line_count", agentproto.ErrInvalid)
		}
		return nil
	}
	limit := req.MaxBytes
	if limit == 0 || limit > maxRead {
		limit = maxRead
	}
	op := fileOp{Identity: req.Identity, path: req.Path, scan: true, check: check}
	return runFileOp(ctx, s, op, func(ctx context.Context, sp *space, name string) (*agentproto.ReadFileResponse, error) {
		// O_NONBLOCK: opening a FIFO must not hang the call.
		f, err := sp.openFile(name, os.O_RDONLY|syscall.O_NONBLOCK)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		switch {
		case fi.IsDir():
			return nil, fmt.Errorf("%w: %s", agentproto.ErrIsDir, req.Path)
		case !fi.Mode().IsRegular():
			// A device, FIFO or socket may never end or never answer (a
			// terminal, /dev/zero): PID 1 reads files only.
			return nil, fmt.Errorf("%w: %s is not a regular file", agentproto.ErrInvalid, req.Path)
		}
		resp := &agentproto.ReadFileResponse{Size: fi.Size()}
		if lines {
			if fi.Size() > lineScanLimit {
				return nil, errLineScan(req.Path, fi.Size())
			}
			err = readLines(ctx, f, req, limit, resp)
		} else {
			err = readBytes(f, req.Offset, req.Length, limit, resp)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", req.Path, err)
		}
		if resp.Data == nil {
			resp.Data = []byte{}
		}
		return resp, nil
	})
}

func readBytes(f *os.File, off, length, limit int64, resp *agentproto.ReadFileResponse) error {
	if off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
	}
	n := length
	if length == 0 || length > limit {
		n = limit + 1 // one byte more tells whether the cap cut anything
	}
	data, err := io.ReadAll(io.LimitReader(f, n))
	if err != nil {
		return err
	}
	if int64(len(data)) > limit {
		data, resp.Truncated = data[:limit], true
	}
	resp.Data = data
	return nil
}

// readLines counts the file's newlines a 64 KiB block at a time (no work
// per line, which under TCG was most of a long file's scan), noting where
// the selected span starts and ends as it passes them; a tail finds its
// start afterwards by counting back from the end, at most limit bytes. A
// last line without a newline still counts.
func readLines(ctx context.Context, f *os.File, req *agentproto.ReadFileRequest, limit int64, resp *agentproto.ReadFileResponse) error {
	first := max(req.StartLine, 1)
	// start is just past newline number first-1, end just past newline
	// number first+count-1; -1 while not seen.
	startNL, endNL := int64(first-1), int64(-1)
	if req.LineCount > 0 {
		endNL = int64(first + req.LineCount - 1)
	}
	var (
		off        int64 // bytes scanned
		newlines   int64
		start, end int64 = -1, -1
		lastByte   byte
		buf        = make([]byte, 64<<10)
	)
	if startNL == 0 {
		start = 0
	}
	for {
		n, err := f.Read(buf)
		if n > 0 {
			block := buf[:n]
			c := int64(bytes.Count(block, newline))
			if req.TailLines == 0 {
				if start < 0 && startNL <= newlines+c {
					start = off + int64(nthNewline(block, startNL-newlines)) + 1
				}
				if end < 0 && endNL > 0 && endNL <= newlines+c {
					end = off + int64(nthNewline(block, endNL-newlines)) + 1
				}
			}
			newlines += c
			off += int64(n)
			lastByte = block[n-1]
			if off > lineScanLimit { // the file grew meanwhile
				return errLineScan(req.Path, off)
			}
			if ctx.Err() != nil {
				return scanErr(ctx, "the line scan", "select lines with sandbox_exec (tail -n, sed -n) instead")
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	total := newlines
	if off > 0 && lastByte != '\n' {
		total++
	}
	resp.TotalLines = int(total)
	if total == 0 {
		return nil
	}
	if req.TailLines > 0 {
		k := total - min(int64(req.TailLines), total) + 1 // the first wanted line
		var err error
		if start, err = tailStart(f, off, newlines, k-1, limit); err != nil {
			return err
		}
		end = off
		if start < 0 || end-start > limit {
			start, resp.Truncated = end-limit, true // keep the end of a tail
		}
	} else {
		if int64(first) > total {
			return nil // starts past the end
		}
		if end < 0 {
			end = off
		}
		if end-start > limit {
			end, resp.Truncated = start+limit, true
		}
	}
	resp.Data = make([]byte, end-start)
	n, err := f.ReadAt(resp.Data, start)
	if errors.Is(err, io.EOF) {
		resp.Data, err = resp.Data[:n], nil // the file shrank meanwhile; return what is there
	}
	return err
}

var newline = []byte{'\n'}

// nthNewline is the index of the nth (1-based) newline in b; b holds at
// least n.
func nthNewline(b []byte, n int64) int {
	at := -1
	for ; n > 0; n-- {
		at += 1 + bytes.IndexByte(b[at+1:], '\n')
	}
	return at
}

// tailStart is the offset just past newline number j of a file of size
// bytes holding newlines newlines, found counting back from the end; 0
// when j is 0, and -1 when it lies more than limit bytes back.
func tailStart(f *os.File, size, newlines, j, limit int64) (int64, error) {
	if j == 0 {
		return 0, nil
	}
	buf := make([]byte, 64<<10)
	after := newlines - j // newlines past the one wanted
	for pos := size; pos > 0 && size-pos <= limit; {
		m := min(pos, int64(len(buf)))
		block := buf[:m]
		if _, err := f.ReadAt(block, pos-m); errors.Is(err, io.EOF) {
			return -1, nil // the file shrank meanwhile: cut at the limit
		} else if err != nil {
			return -1, err
		}
		c := int64(bytes.Count(block, newline))
		if c > after {
			at := len(block)
			for ; after >= 0; after-- {
				at = bytes.LastIndexByte(block[:at], '\n')
			}
			return pos - m + int64(at) + 1, nil
		}
		after -= c
		pos -= m
	}
	return -1, nil
}

// checkMode refuses a mode with bits beyond the permission and special
// bits.
func checkMode(m uint32) error {
	if m&^0o7777 != 0 {
		return fmt.Errorf("%w: mode %o", agentproto.ErrInvalid, m)
	}
	return nil
}

// fileMode converts permission and special bits from their Unix form.
func fileMode(m uint32) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		mode |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

// unixMode is the inverse of fileMode.
func unixMode(m os.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		u |= syscall.S_ISUID
	}
	if m&os.ModeSetgid != 0 {
		u |= syscall.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		u |= syscall.S_ISVTX
	}
	return u
}

// WriteFile replaces a file atomically or appends to it. Replacing keeps
// the mode of an existing file unless the request sets one.
func (s *Ops) WriteFile(ctx context.Context, req *agentproto.WriteFileRequest) (*agentproto.WriteFileResponse, error) {
	op := fileOp{Identity: req.Identity, path: req.Path, writes: true, check: func() error { return checkMode(req.Mode) }}
	return runFileOp(ctx, s, op, func(_ context.Context, sp *space, name string) (*agentproto.WriteFileResponse, error) {
		if req.MakeParents {
			if err := sp.fs.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return nil, err
			}
		}
		if req.Append {
			return appendFile(sp, name, req)
		}
		return replaceFile(sp, name, req)
	})
}

func appendFile(sp *space, name string, req *agentproto.WriteFileRequest) (*agentproto.WriteFileResponse, error) {
	mode := uint32(0o644)
	if req.Mode != 0 {
		mode = req.Mode
	}
	f, err := sp.fs.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, fileMode(mode))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Write(req.Data); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return &agentproto.WriteFileResponse{Size: fi.Size()}, nil
}

func replaceFile(sp *space, name string, req *agentproto.WriteFileRequest) (*agentproto.WriteFileResponse, error) {
	// Write through symlinks, as editors do, instead of replacing the link.
	target, err := followLinks(sp, name)
	if err != nil {
		return nil, err
	}
	mode := fileMode(0o644)
	if fi, err := sp.fs.Lstat(target); err == nil {
		if fi.IsDir() {
			return nil, fmt.Errorf("%w: %s", agentproto.ErrIsDir, req.Path)
		}
		mode = fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	}
	if req.Mode != 0 {
		mode = fileMode(req.Mode)
	}
	tmp := filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+".tmp-"+randomSuffix())
	f, err := sp.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			sp.fs.Remove(tmp)
		}
	}()
	if _, err := f.Write(req.Data); err != nil {
		return nil, err
	}
	// Chmod after create: the umask must not narrow the requested mode.
	if err := f.Chmod(mode); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := sp.fs.Rename(tmp, target); err != nil {
		return nil, err
	}
	ok = true
	return &agentproto.WriteFileResponse{Size: int64(len(req.Data))}, nil
}

// followLinks resolves symlinks in the last element of name. Beneath a
// root an absolute link target is an escape, as it is for os.Root.
func followLinks(sp *space, name string) (string, error) {
	for range 40 {
		fi, err := sp.fs.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return name, nil
		}
		t, err := sp.fs.Readlink(name)
		if err != nil {
			return "", err
		}
		switch {
		case !filepath.IsAbs(t):
			name = filepath.Join(filepath.Dir(name), t)
		case sp.root != "":
			return "", fmt.Errorf("%w: %s links to %s", agentproto.ErrEscape, name, t)
		default:
			name = t
		}
	}
	return "", fmt.Errorf("%w: too many levels of symbolic links", agentproto.ErrInvalid)
}

func randomSuffix() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func fileInfo(path string, fi os.FileInfo) agentproto.FileInfo {
	info := agentproto.FileInfo{
		Path:    path,
		Name:    fi.Name(),
		Size:    fi.Size(),
		Mode:    unixMode(fi.Mode()),
		ModTime: fi.ModTime(),
	}
	switch {
	case fi.Mode().IsRegular():
		info.Type = "file"
	case fi.IsDir():
		info.Type = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		info.Type = "symlink"
	default:
		info.Type = "other"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.UID, info.GID = int(st.Uid), int(st.Gid)
	}
	return info
}

// Stat describes a path without following a final symlink.
func (s *Ops) Stat(ctx context.Context, req *agentproto.PathRequest) (*agentproto.FileInfo, error) {
	op := fileOp{Identity: req.Identity, path: req.Path}
	return runFileOp(ctx, s, op, func(_ context.Context, sp *space, name string) (*agentproto.FileInfo, error) {
		fi, err := sp.fs.Lstat(name)
		if err != nil {
			return nil, err
		}
		info := fileInfo(req.Path, fi)
		if name == "." && sp.root != "" {
			info.Name = filepath.Base(sp.root)
		}
		if info.Type == "symlink" {
			info.SymlinkTarget, _ = sp.fs.Readlink(name)
		}
		return &info, nil
	})
}

const (
	defaultMaxEntries = 1000
	maxMaxEntries     = 100000
)

// List walks a directory depth first in name order. Symlinks are listed,
// never followed.
func (s *Ops) List(ctx context.Context, req *agentproto.ListRequest) (*agentproto.ListResponse, error) {
	check := func() error {
		if req.MaxDepth < 0 || req.MaxEntries < 0 {
			return fmt.Errorf("%w: negative list argument", agentproto.ErrInvalid)
		}
		return nil
	}
	depth, limit := req.MaxDepth, req.MaxEntries
	if depth == 0 {
		depth = 1
	}
	if limit == 0 {
		limit = defaultMaxEntries
	}
	limit = min(limit, maxMaxEntries)
	op := fileOp{Identity: req.Identity, path: req.Path, scan: true, check: check}
	return runFileOp(ctx, s, op, func(ctx context.Context, sp *space, dir string) (*agentproto.ListResponse, error) {
		fi, err := sp.fs.Stat(dir)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%w: %s", agentproto.ErrNotDir, req.Path)
		}
		resp := &agentproto.ListResponse{Entries: []agentproto.FileInfo{}}
		l := lister{ctx: ctx, sp: sp, dir: dir, maxDepth: depth, limit: limit, resp: resp}
		if err := l.walk("", 1); err != nil {
			return nil, err
		}
		return resp, nil
	})
}

type lister struct {
	ctx      context.Context
	read     int // directory entries read, for listScanLimit
	sp       *space
	dir      string
	maxDepth int
	limit    int
	resp     *agentproto.ListResponse
}

// walk lists rel (relative to l.dir). Only the top directory's errors
// fail the call; unreadable subdirectories are listed but not entered.
func (l *lister) walk(rel string, depth int) error {
	f, err := l.sp.fs.OpenFile(filepath.Join(l.dir, rel), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		if rel == "" {
			return err
		}
		return nil
	}
	names, err := l.readNames(f)
	f.Close()
	if errors.Is(err, agentproto.ErrTooLarge) || errors.Is(err, agentproto.ErrTimeout) || (err != nil && l.ctx.Err() != nil) {
		return err
	}
	if err != nil && rel == "" {
		return err
	}
	slices.Sort(names)
	for _, n := range names {
		if l.resp.Truncated {
			return nil
		}
		p := filepath.Join(rel, n)
		fi, err := l.sp.fs.Lstat(filepath.Join(l.dir, p))
		if err != nil {
			continue // vanished meanwhile
		}
		if len(l.resp.Entries) == l.limit {
			l.resp.Truncated = true
			return nil
		}
		info := fileInfo(p, fi)
		if info.Type == "symlink" {
			info.SymlinkTarget, _ = l.sp.fs.Readlink(filepath.Join(l.dir, p))
		}
		l.resp.Entries = append(l.resp.Entries, info)
		if fi.IsDir() && depth < l.maxDepth {
			if err := l.walk(p, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

const listHint = "list a narrower path or fewer levels, or use sandbox_exec (ls, find) for a directory this large"

// readNames reads a directory's names in batches, counting them against
// listScanLimit and stopping when the call's context ends: one directory
// may hold millions.
func (l *lister) readNames(f *os.File) ([]string, error) {
	var names []string
	for {
		if l.ctx.Err() != nil {
			return nil, scanErr(l.ctx, "the listing", listHint)
		}
		batch, err := f.Readdirnames(4096)
		names = append(names, batch...)
		if l.read += len(batch); l.read > listScanLimit {
			return nil, fmt.Errorf("%w: the listing read over %d directory entries (the list-scan limit); %s",
				agentproto.ErrTooLarge, listScanLimit, listHint)
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			return names, nil
		}
		if err != nil {
			return names, err
		}
	}
}

// Mkdir creates a directory with exactly the requested mode.
func (s *Ops) Mkdir(ctx context.Context, req *agentproto.PathRequest) (*agentproto.Empty, error) {
	mode := fileMode(0o755)
	if req.Mode != 0 {
		mode = fileMode(req.Mode)
	}
	op := fileOp{Identity: req.Identity, path: req.Path, writes: true, check: func() error { return checkMode(req.Mode) }}
	return runFileOp(ctx, s, op, func(_ context.Context, sp *space, name string) (*agentproto.Empty, error) {
		if req.Parents {
			if fi, err := sp.fs.Stat(name); err == nil && fi.IsDir() {
				return &agentproto.Empty{}, nil // mkdir -p: already there
			}
			if err := sp.fs.MkdirAll(name, mode.Perm()); err != nil {
				return nil, err
			}
		} else if err := sp.fs.Mkdir(name, mode.Perm()); err != nil {
			return nil, err
		}
		if err := sp.fs.Chmod(name, mode); err != nil {
			return nil, err
		}
		return &agentproto.Empty{}, nil
	})
}

// Remove removes a file, a symlink or a directory (recursively only when
// asked).
func (s *Ops) Remove(ctx context.Context, req *agentproto.PathRequest) (*agentproto.Empty, error) {
	op := fileOp{Identity: req.Identity, path: req.Path}
	return runFileOp(ctx, s, op, func(_ context.Context, sp *space, name string) (*agentproto.Empty, error) {
		if name == "." || name == "/" {
			return nil, fmt.Errorf("%w: refusing to remove %s", agentproto.ErrInvalid, req.Path)
		}
		fi, err := sp.fs.Lstat(name)
		if err != nil {
			return nil, err
		}
		if fi.IsDir() && req.Recursive {
			err = sp.fs.RemoveAll(name)
		} else {
			err = sp.fs.Remove(name)
		}
		if err != nil {
			return nil, err
		}
		return &agentproto.Empty{}, nil
	})
}

// Move renames Src to Dst, refusing to replace Dst unless Overwrite.
func (s *Ops) Move(ctx context.Context, req *agentproto.MoveRequest) (*agentproto.Empty, error) {
	op := fileOp{Identity: req.Identity, path: req.Src, writes: true}
	return runFileOp(ctx, s, op, func(_ context.Context, sp *space, src string) (*agentproto.Empty, error) {
		dst, err := sp.name(req.Dst)
		if err != nil {
			return nil, err
		}
		if _, err := sp.fs.Lstat(src); err != nil {
			return nil, err
		}
		if !req.Overwrite {
			if _, err := sp.fs.Lstat(dst); err == nil {
				return nil, fmt.Errorf("%w: %s", agentproto.ErrExists, req.Dst)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
		if err := sp.fs.Rename(src, dst); err != nil {
			return nil, err
		}
		return &agentproto.Empty{}, nil
	})
}
