//go:build linux

package osthread

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/internal/testwait"
)

// The main goroutine keeps the main thread, as in the guest agent
// (package account): a locked goroutine that exits on the main thread
// wedges it instead of ending it.
func init() { runtime.LockOSThread() }

// A change fn makes to its thread stays on that thread: the caller's
// thread and the next Throwaway's are fresh; a panic is an error.
func TestThrowaway(t *testing.T) {
	first, err := Throwaway(func() (int, error) {
		// A per-thread change: the thread's name (comm).
		return unix.Gettid(), unix.Prctl(unix.PR_SET_NAME, uintptr(unsafeName("throwaway-x")), 0, 0, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The thread ends with fn (the runtime destroys a thread whose
	// goroutine exits locked).
	testwait.Eventually(t, "the throwaway thread to end", 10*time.Second, 10*time.Millisecond, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", first))
		return errors.Is(err, os.ErrNotExist)
	})
	name, err := Throwaway(func() (string, error) {
		b := make([]byte, 16)
		err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafePtr(b)), 0, 0, 0)
		return unix.ByteSliceToString(b), err
	})
	if err != nil || name == "throwaway-x" {
		t.Fatalf("a later throwaway thread carries the first one's change: %q %v", name, err)
	}
	if _, err := Throwaway(func() (int, error) { panic("boom") }); !errors.Is(err, agentproto.ErrInternal) {
		t.Fatalf("panic: %v, want ErrInternal", err)
	}
}
