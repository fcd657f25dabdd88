//go:build linux || darwin

package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// replaceContents makes the folder live hold what the checkpoint's src
// holds (nothing when !held), keeping live itself: the guest may have it
// mounted (a bind of the home), and a folder swapped under a mount would
// not be seen. The copy is staged beside live, in a folder only this
// process enters; then live's entries are moved out and the staged ones
// in, by renameat on descriptors opened without following a link (an
// agent-made symlink named like live's entries is moved as a link, never
// followed).
func replaceContents(ctx context.Context, live, src string, held bool) error {
	parent := filepath.Dir(live)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(live)+".restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	staged := filepath.Join(tmp, "new")
	if held {
		if err := copyTree(ctx, src, staged, &stats{}); err != nil {
			return err
		}
	} else if err := os.Mkdir(staged, 0o700); err != nil {
		return err
	}
	fd, err := unix.Open(live, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		if !held {
			return nil
		}
		return os.Rename(staged, live)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	old := filepath.Join(tmp, "old")
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := moveAll(fd, old); err != nil {
		return err
	}
	newfd, err := unix.Open(staged, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(newfd)
	if err := moveEntries(newfd, fd); err != nil {
		return err
	}
	if !held {
		return nil
	}
	// The folder's own owner and mode as they were.
	var s unix.Stat_t
	if err := unix.Fstat(newfd, &s); err != nil {
		return err
	}
	if err := unix.Fchown(fd, int(s.Uid), int(s.Gid)); err != nil && !errors.Is(err, unix.EPERM) {
		return err
	}
	return unix.Fchmod(fd, uint32(s.Mode&0o7777)) // uint32: darwin's Mode is a uint16
}

// moveAll moves every entry of the folder fd into the folder dst.
func moveAll(fd int, dst string) error {
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return moveEntries(fd, dfd)
}

// moveEntries renames every entry of the folder from into the folder to.
func moveEntries(from, to int) error {
	dup, err := unix.Dup(from)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), "dir")
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := unix.Renameat(from, n, to, n); err != nil {
			return err
		}
	}
	return nil
}
