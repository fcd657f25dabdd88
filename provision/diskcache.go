package provision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// diskFormat names how buildDisk lays out a root disk. Change it whenever
// the disk's content changes for the same inputs (ext4 builder, extra
// files), so cached disks of the old layout are not reused.
const diskFormat = "root-disk-v1"

// diskCacheKey identifies a built root disk by everything it is made
// from: the root filesystem, the agent copied into it, its size and label.
func diskCacheKey(rootfsID string, agent []byte, size int64) string {
	return sha256Hex([]byte(strings.Join([]string{
		diskFormat, rootfsID, sha256Hex(agent), strconv.FormatInt(size, 10), diskLabel,
	}, "\n")))[:32]
}

// cachedDiskPath is where the pristine disk for key is kept. Only one is
// kept at a time: it is as large as the root filesystem.
func (l Layout) cachedDiskPath(key string) string {
	return filepath.Join(l.Cache(), "disk-"+key+".ext4")
}

// pruneCachedDisks removes cached disks other than keep.
func (l Layout) pruneCachedDisks(keep string) {
	old, _ := filepath.Glob(filepath.Join(l.Cache(), "disk-*.ext4"))
	for _, p := range old {
		if p != keep {
			// Best effort: a stale pristine disk only costs space.
			os.Remove(p)
		}
	}
}

// copySparse atomically replaces dst with a copy of src that keeps src's
// holes. Where the file system can share blocks (a reflink: btrfs, XFS,
// APFS) the copy is instant and takes no space; elsewhere only src's data
// extents are copied, in the kernel where it can (copy_file_range).
func copySparse(ctx context.Context, dst, src string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	dir := filepath.Dir(dst)
	out, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(out.Name())
		}
	}()
	if cloneErr := cloneInto(out, in); cloneErr != nil {
		if err := copyExtents(ctx, out, in, st.Size()); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
	}
	if err := out.Chmod(0o644); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(out.Name(), dst); err != nil {
		return err
	}
	return atomicfile.SyncDir(dir)
}

// copyExtents copies the data extents of in (size bytes) to out, leaving
// holes as holes.
func copyExtents(ctx context.Context, out, in *os.File, size int64) error {
	if err := out.Truncate(size); err != nil {
		return err
	}
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := in.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			return err
		}
		hole, err := in.Seek(data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return err
		}
		// *os.File to *os.File: the kernel copies (copy_file_range).
		if _, err := io.CopyN(out, in, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}
