//go:build linux

package network

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAgentFilter applies the agents' seccomp filter on a thread of its
// own (as ForkInNetns does) and tries what an agent would.
func TestAgentFilter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("run as root: installing a seccomp filter without no_new_privs needs CAP_SYS_ADMIN (sudo go test)")
	}
	type result struct{ vsock, pair, inet, uring, filter error }
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the filter
		var r result
		if r.filter = ApplyAgentFilter(); r.filter != nil {
			ch <- r
			return
		}
		try := func(domain, typ int) error {
			fd, err := unix.Socket(domain, typ, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}
		r.vsock = try(unix.AF_VSOCK, unix.SOCK_STREAM)
		if fds, err := unix.Socketpair(unix.AF_VSOCK, unix.SOCK_STREAM, 0); err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		} else {
			r.pair = err
		}
		r.inet = try(unix.AF_INET, unix.SOCK_STREAM)
		_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)
		if e != 0 {
			r.uring = e
		}
		ch <- r
	}()
	r := <-ch
	if r.filter != nil {
		t.Fatal(r.filter)
	}
	if !errors.Is(r.vsock, unix.EPERM) || !errors.Is(r.pair, unix.EPERM) || !errors.Is(r.uring, unix.EPERM) {
		t.Errorf("vsock socket: %v, socketpair: %v, io_uring_setup: %v; want EPERM from the filter", r.vsock, r.pair, r.uring)
	}
	if r.inet != nil {
		t.Errorf("an IPv4 socket under the filter: %v", r.inet)
	}
}
