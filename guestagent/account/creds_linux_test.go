//go:build linux

package account

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// threadCreds is what the calling thread's file accesses and privileged
// calls are checked against.
type threadCreds struct {
	fsuid, fsgid         uintptr
	effective, permitted uint64
}

func readThreadCreds(t *testing.T) threadCreds {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&caps[0])), 0); e != 0 {
		t.Errorf("capget: %v", e)
	}
	fsuid, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	fsgid, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
	return threadCreds{
		fsuid: fsuid, fsgid: fsgid,
		effective: uint64(caps[1].Effective)<<32 | uint64(caps[0].Effective),
		permitted: uint64(caps[1].Permitted)<<32 | uint64(caps[0].Permitted),
	}
}

// The spawn thread checks the working directory and the program as the
// agent, then forks as root: the check must see exactly the agent's
// file-system identity and no capability, and the fork root's whole.
func TestForkAsAgentChecksAsTheAgentAndForksAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test changes thread credentials: run it as root (sudo go test ./guestagent/account/)")
	}
	a := &Account{Name: "alice", UID: 4242, GID: 4343, Home: "/nonexistent", Groups: []int{4343}}
	var during, forking threadCreds
	pid, err := ForkAsAgent(a, netns.None(), func() error {
		during = readThreadCreds(t)
		return nil
	}, func() (int, error) {
		forking = readThreadCreds(t)
		return 7, nil
	})
	if err != nil || pid != 7 {
		t.Fatalf("ForkAsAgent = %d, %v", pid, err)
	}
	if during.fsuid != 4242 || during.fsgid != 4343 || during.effective != 0 {
		t.Errorf("during the check: fsuid %d fsgid %d effective caps %#x; want the agent's ids and no capability", during.fsuid, during.fsgid, during.effective)
	}
	if forking.fsuid != 0 || forking.fsgid != 0 || forking.effective == 0 || forking.effective != forking.permitted {
		t.Errorf("at the fork: fsuid %d fsgid %d effective caps %#x (permitted %#x); want root's", forking.fsuid, forking.fsgid, forking.effective, forking.permitted)
	}

	// A failed check stops the start.
	errCheck := errors.New("no such directory")
	forked := false
	if _, err := ForkAsAgent(a, netns.None(), func() error { return errCheck }, func() (int, error) { forked = true; return 0, nil }); !errors.Is(err, errCheck) || forked {
		t.Errorf("check failed: err %v, forked %v; want the check's error and no fork", err, forked)
	}
}
