package checkpoint

import (
	"os"

	"golang.org/x/sys/unix"
)

// cloneOrCopy creates dst (O_EXCL: never an existing name, nor through a
// link) and fills it with in's size bytes: a clone (FICLONE: btrfs, XFS)
// where the file system shares blocks, else a sparse copy.
func cloneOrCopy(in *os.File, dst string, perm os.FileMode, size int64, st *stats) (out *os.File, cloned bool, err error) {
	out, err = os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, false, err
	}
	st.bytes += size
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) == nil {
		return out, true, nil
	}
	st.copied = true
	if err := sparseCopy(in, out, size); err != nil {
		out.Close()
		return nil, false, err
	}
	return out, false, nil
}

// copyRange copies n bytes at off in the kernel (copy_file_range), or
// through a buffer where it can't.
func copyRange(in, out *os.File, off, n int64) error {
	for n > 0 {
		ioff, ooff := off, off
		c, err := unix.CopyFileRange(int(in.Fd()), &ioff, int(out.Fd()), &ooff, int(min(n, 1<<30)), 0)
		if err != nil || c == 0 {
			return bufCopy(in, out, off, n)
		}
		off += int64(c)
		n -= int64(c)
	}
	return nil
}
