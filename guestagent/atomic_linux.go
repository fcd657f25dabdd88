//go:build linux

package guestagent

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFileAtomic replaces path (temp file, fsync, rename), keeping the
// mode and owner of the file it replaces.
func WriteFileAtomic(path string, data []byte) error {
	mode, uid, gid := os.FileMode(0o644), 0, 0
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = int(st.Uid), int(st.Gid)
		}
	}
	return replaceFile(path, data, mode, uid, gid, true)
}

// RewriteBootFile replaces path with a root-owned file of data and perm in
// one rename, without waiting for the disk. It is for the files the boot
// checks and writes again every time (a crash that loses the write loses
// nothing the next boot doesn't put back), where a journal commit would
// cost the boot tens of milliseconds under emulation.
func RewriteBootFile(path string, data []byte, perm os.FileMode) error {
	return replaceFile(path, data, perm, 0, 0, false)
}

func replaceFile(path string, data []byte, mode os.FileMode, uid, gid int, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	err = func() error {
		if _, err := f.Write(data); err != nil {
			return err
		}
		// The mode comes with the rename: a reader never sees the new
		// content with the temporary file's 0600.
		if err := f.Chmod(mode); err != nil {
			return err
		}
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
		if durable {
			if err := f.Sync(); err != nil {
				return err
			}
		}
		return f.Close()
	}()
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if durable {
		if d, err := os.Open(dir); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}
