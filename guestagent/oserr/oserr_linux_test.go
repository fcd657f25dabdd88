//go:build linux

package oserr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Map adds the sentinel the host reads for each system error, keeps the
// message, and leaves errors that already have one, or none fits, alone.
func TestMap(t *testing.T) {
	escape := fmt.Errorf("openat x: %w", errors.New(escapeMessage))
	for _, tc := range []struct {
		name string
		err  error
		want error // nil: returned unchanged
	}{
		{"not found", &fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, agentproto.ErrNotFound},
		{"no such process", fmt.Errorf("signal 4: %w", syscall.ESRCH), agentproto.ErrNotFound},
		{"permission", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, agentproto.ErrPermission},
		{"read-only", syscall.EROFS, agentproto.ErrPermission},
		{"exists", syscall.EEXIST, agentproto.ErrExists},
		{"is a directory", syscall.EISDIR, agentproto.ErrIsDir},
		{"not a directory", syscall.ENOTDIR, agentproto.ErrNotDir},
		{"not empty", syscall.ENOTEMPTY, agentproto.ErrNotEmpty},
		{"too large", syscall.EFBIG, agentproto.ErrTooLarge},
		{"symlink loop", syscall.ELOOP, agentproto.ErrInvalid},
		{"escape", escape, agentproto.ErrEscape},
		{"escape in a join", errors.Join(errors.New("other"), escape), agentproto.ErrEscape},
		{"already classed", fmt.Errorf("%w: quota", agentproto.ErrQuota), nil},
		{"unknown errno", syscall.EIO, nil},
		{"not a system error", errors.New("plain"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Map(tc.err)
			if tc.want == nil {
				if got != tc.err {
					t.Errorf("Map changed %v to %v", tc.err, got)
				}
				return
			}
			if !errors.Is(got, tc.want) || got.Error() != tc.err.Error() {
				t.Errorf("Map(%v) = %v, want %v with the same message", tc.err, got, tc.want)
			}
			if code := agentproto.ToWire(got).Code; code == "internal" {
				t.Errorf("Map(%v) still reads as internal on the wire", tc.err)
			}
			var errno syscall.Errno
			if errors.As(tc.err, &errno) && !errors.As(got, &errno) {
				t.Errorf("Map(%v) lost the errno", tc.err)
			}
		})
	}
	if Map(nil) != nil {
		t.Error("Map(nil) != nil")
	}
	if _, err := os.Open("/nonexistent/x"); !errors.Is(Map(err), agentproto.ErrNotFound) {
		t.Errorf("a real open error: %v", Map(err))
	}
}
