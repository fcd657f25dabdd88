package checkpoint

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// cloneOrCopy makes dst (which must not exist) a clone of in on APFS
// (fclonefileat: blocks shared until written), else a sparse copy, and
// returns it open. clonefile creates dst itself and, like O_EXCL, fails
// with EEXIST on any existing name, a symlink included, so nothing is
// written through a link.
func cloneOrCopy(in *os.File, dst string, perm os.FileMode, size int64, st *stats) (out *os.File, cloned bool, err error) {
	err = unix.Fclonefileat(int(in.Fd()), unix.AT_FDCWD, dst, unix.CLONE_NOFOLLOW)
	if err == nil {
		// Read-only: the clone has the source's mode, which may deny
		// writes; finish only needs a descriptor.
		out, err := os.OpenFile(dst, os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, false, err
		}
		st.bytes += size
		return out, true, nil
	}
	if errors.Is(err, unix.EEXIST) {
		return nil, false, &os.PathError{Op: "clonefile", Path: dst, Err: err}
	}
	// Any other failure falls back to a copy: ENOTSUP (not APFS: HFS+,
	// exFAT, SMB), EXDEV (another volume), or whatever an older macOS says;
	// a cause the copy shares (a full disk) fails it in turn.
	out, err = os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, false, err
	}
	st.bytes += size
	st.copied = true
	if err := sparseCopy(in, out, size); err != nil {
		out.Close()
		return nil, false, err
	}
	return out, false, nil
}

// copyRange copies n bytes at off. macOS has no copy_file_range (and x/sys
// no fcopyfile), so through a buffer.
func copyRange(in, out *os.File, off, n int64) error {
	return bufCopy(in, out, off, n)
}
