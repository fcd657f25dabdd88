package projects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// The host reads an agent's view only through the helpers here: one path
// component at a time from a directory descriptor, each open O_NOFOLLOW
// and O_NONBLOCK (a FIFO swapped in opens at once instead of blocking the
// host under the view's lock), each file's type checked with fstat on the
// descriptor that is then read. No path string under an agent-writable
// tree is ever handed to the kernel whole.

const openFlags = unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY

// openTop opens the directory dir (host-made, in a host-owned parent)
// without following a link.
func openTop(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|openFlags, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// rawFD runs f with d's descriptor (without making it blocking, as Fd
// would).
func rawFD(d *os.File, f func(fd int) error) error {
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// openAt opens name, one component, in dir: never through a link.
func openAt(dir *os.File, name string, flag int) (*os.File, error) {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%q: not a name", name)
	}
	var nfd int
	err := rawFD(dir, func(fd int) error {
		var err error
		for {
			nfd, err = unix.Openat(fd, name, flag|openFlags, 0)
			if err != unix.EINTR {
				return err
			}
		}
	})
	if err != nil {
		return nil, &fs.PathError{Op: "openat", Path: path.Join(dir.Name(), name), Err: err}
	}
	return os.NewFile(uintptr(nfd), path.Join(dir.Name(), name)), nil
}

// parentIn opens the directory holding rel beneath root, component by
// component, and returns it with rel's last component.
func parentIn(root *os.File, rel string) (*os.File, string, error) {
	parts := strings.Split(rel, "/")
	cur := root
	for _, c := range parts[:len(parts)-1] {
		next, err := openAt(cur, c, unix.O_RDONLY|unix.O_DIRECTORY)
		if cur != root {
			cur.Close()
		}
		if err != nil {
			return nil, "", err
		}
		cur = next
	}
	if cur == root {
		// The caller closes what it gets; give it its own descriptor.
		dup, err := dupFile(root)
		if err != nil {
			return nil, "", err
		}
		cur = dup
	}
	return cur, parts[len(parts)-1], nil
}

func dupFile(f *os.File) (*os.File, error) {
	var nfd int
	err := rawFD(f, func(fd int) error {
		var err error
		nfd, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

// errNotPlain: what the host opened is not a plain file (a link, FIFO,
// device, socket or directory swapped in).
var errNotPlain = errors.New("not a plain file")

// openFileIn opens the regular file rel beneath root for reading and
// returns it with its fstat.
func openFileIn(root *os.File, rel string) (*os.File, fs.FileInfo, error) {
	dir, name, err := parentIn(root, rel)
	if err != nil {
		return nil, nil, err
	}
	defer dir.Close()
	f, err := openAt(dir, name, unix.O_RDONLY)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, nil, fmt.Errorf("%s: %w (a link)", rel, errNotPlain)
		}
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w (%s)", rel, errNotPlain, st.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// lstatIn is lstat of rel beneath root.
func lstatIn(root *os.File, rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	dir, name, err := parentIn(root, rel)
	if err != nil {
		return st, err
	}
	defer dir.Close()
	err = rawFD(dir, func(fd int) error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	if err != nil {
		return st, &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return st, nil
}

// fileMode is st's mode as fs.FileMode.
func fileMode(st *unix.Stat_t) fs.FileMode {
	m := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFREG:
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	default:
		m |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	return m
}

// readlinkAt reads the link name in dir.
func readlinkAt(dir *os.File, name string) (string, error) {
	buf := make([]byte, 4096)
	var n int
	err := rawFD(dir, func(fd int) error {
		var err error
		n, err = unix.Readlinkat(fd, name, buf)
		return err
	})
	if err != nil {
		return "", &fs.PathError{Op: "readlinkat", Path: name, Err: err}
	}
	return string(buf[:n]), nil
}

// ctxReader stops reading when ctx is done, so hashing a big file gives
// way to a cancelled request.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) > 1<<20 {
		p = p[:1<<20]
	}
	return c.r.Read(p)
}

// hashFile hashes f from where it is, reading at most limit bytes (more
// is an error: the file grew past what the host reads).
func hashFile(ctx context.Context, f io.Reader, limit int64) (string, int64, error) {
	h := newHasher()
	n, err := io.Copy(h, io.LimitReader(ctxReader{ctx, f}, limit+1))
	if err != nil {
		return "", n, err
	}
	if n > limit {
		return "", n, fmt.Errorf("bigger than %d bytes", limit)
	}
	return h.sum(), n, nil
}
