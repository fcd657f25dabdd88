//go:build linux || darwin

package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxDepth bounds the folders walked into: a home is no deeper than this
// in practice, and a bound ends any loop.
const maxDepth = 256

// cloneFile makes dst a copy of src: a clone where the file system
// shares blocks, else a sparse copy. src is a file of the owner (the root
// disk) or of a checkpoint; it is opened without following a symlink all
// the same.
func cloneFile(src, dst string, st *stats) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	var s unix.Stat_t
	if err := unix.Fstat(int(in.Fd()), &s); err != nil {
		return err
	}
	if s.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file", src)
	}
	return copyFile(in, dst, os.FileMode(s.Mode&0o777), &s, st)
}

// copyFile makes dst (which must not exist) a copy of the open regular
// file in, whose stat is s, with s's owner, mode and times. perm is what
// a created (not cloned) dst starts with.
func copyFile(in *os.File, dst string, perm os.FileMode, s *unix.Stat_t, st *stats) error {
	out, cloned, err := cloneOrCopy(in, dst, perm, s.Size, st)
	if err != nil {
		return err
	}
	err = finish(out, s, st, !cloned)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// linkFile makes dst a hard link to the regular file src (not through a
// symlink: link(2) doesn't follow one, and src is checked first).
func linkFile(src, dst string, st *stats) error {
	var s unix.Stat_t
	if err := unix.Lstat(src, &s); err != nil {
		return err
	}
	if s.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if err := unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, 0); err != nil {
		return err
	}
	st.bytes += s.Size
	st.disk += s.Blocks * 512
	return nil
}

// sparseCopy copies only in's data extents, leaving its holes as holes.
func sparseCopy(in, out *os.File, size int64) error {
	if err := out.Truncate(size); err != nil {
		return err
	}
	ifd := int(in.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(ifd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			return copyRange(in, out, off, size-off) // no SEEK_DATA: copy the rest
		}
		hole, err := unix.Seek(ifd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = size
		}
		if err := copyRange(in, out, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// bufCopy copies n bytes at off through a buffer.
func bufCopy(in, out *os.File, off, n int64) error {
	_, err := io.Copy(io.NewOffsetWriter(out, off), io.NewSectionReader(in, off, n))
	return err
}

// finish gives a copied file its source's owner, mode and times and,
// when count, counts its blocks: a clone's are its source's, shared until
// either is written, so taking it added none (st_blocks would count them
// all again).
func finish(out *os.File, s *unix.Stat_t, st *stats, count bool) error {
	fd := int(out.Fd())
	uid, gid := st.owner(s.Uid, s.Gid)
	if err := unix.Fchown(fd, uid, gid); errors.Is(err, unix.EPERM) {
		st.chownDenied = st.chownDenied || uid != os.Geteuid()
	} else if err != nil {
		return err
	}
	// uint32: darwin's Mode is a uint16.
	if err := unix.Fchmod(fd, uint32(s.Mode&0o7777)); err != nil {
		return err
	}
	if err := unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(unix.TimespecToNsec(s.Atim)), unix.NsecToTimeval(unix.TimespecToNsec(s.Mtim))}); err != nil {
		return err
	}
	var o unix.Stat_t
	if count && unix.Fstat(fd, &o) == nil {
		st.disk += o.Blocks * 512
	}
	return nil
}

// copyTree copies the folder src to dst (which must not exist), not
// following any symlink in src: every entry is opened relative to its
// folder's descriptor with O_NOFOLLOW and checked with fstat.
func copyTree(ctx context.Context, src, dst string, st *stats) error {
	fd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	return copyDir(ctx, fd, dst, 0, st)
}

// copyDir copies the open folder fd (and closes it) to dst.
func copyDir(ctx context.Context, fd int, dst string, depth int, st *stats) error {
	dir := os.NewFile(uintptr(fd), dst)
	defer dir.Close()
	if depth > maxDepth {
		return fmt.Errorf("%s: folders nested deeper than %d", dst, maxDepth)
	}
	var s unix.Stat_t
	if err := unix.Fstat(fd, &s); err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := copyEntry(ctx, fd, n, filepath.Join(dst, n), depth, st); err != nil {
			return err
		}
	}
	// The folder's own attributes last: its mode may forbid the writes
	// above, and they would change its times.
	d, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer d.Close()
	return finish(d, &s, st, true)
}

func copyEntry(ctx context.Context, dirfd int, name, dst string, depth int, st *stats) error {
	var s unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &s, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	switch s.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
		return copyDir(ctx, fd, dst, depth+1, st)
	case unix.S_IFREG:
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
		in := os.NewFile(uintptr(fd), name)
		defer in.Close()
		var fs unix.Stat_t
		if err := unix.Fstat(fd, &fs); err != nil {
			return err
		}
		if fs.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil // swapped for something else meanwhile: not a file to keep
		}
		return copyFile(in, dst, 0o600, &fs, st)
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return err
		}
		if err := os.Symlink(string(buf[:n]), dst); err != nil {
			return err
		}
		uid, gid := st.owner(s.Uid, s.Gid)
		if err := os.Lchown(dst, uid, gid); errors.Is(err, os.ErrPermission) {
			st.chownDenied = st.chownDenied || uid != os.Geteuid()
		} else if err != nil {
			return err
		}
		return nil
	}
	return nil // sockets, pipes and devices are not state to keep
}

// syncDir makes a folder's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
