//go:build linux

package network

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Agents' processes start under a seccomp filter that refuses AF_VSOCK
// sockets: where the VM has a vsock device (vz), the host listens on it
// for the guest agent, and no agent may talk to the host but through the
// bridge. An agent can't lift a filter (seccomp filters only stack), and
// every process it starts inherits it. The filter also refuses
// io_uring_setup (an io_uring can open sockets without the socket system
// call) and every system call of another ABI (i386, x32), whose numbers
// the filter does not check.
//
// The filter is installed on the thread that forks the agent's process:
// a throwaway one (ForkInNetns), or the agent's prepared thread
// (account.ForkAsAgent), which does nothing but fork that agent's
// processes. No other thread of PID 1 has it.

// BPF opcodes (linux/bpf_common.h).
const (
	bpfLD  = 0x00
	bpfW   = 0x00
	bpfABS = 0x20
	bpfJMP = 0x05
	bpfJEQ = 0x10
	bpfJGE = 0x30
	bpfK   = 0x00
	bpfRET = 0x06

	seccompRetAllow = 0x7fff0000
	seccompRetErrno = 0x00050000

	// offsets in struct seccomp_data
	seccompNr   = 0
	seccompArch = 4
	seccompArg0 = 16 // low half on little-endian machines

	x32SyscallBit = 0x40000000
)

func auditArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// agentFilter is the program; see the comment above.
func agentFilter() ([]unix.SockFilter, error) {
	arch, ok := auditArch()
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	st := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: bpfJMP | bpfJEQ | bpfK, Jt: jt, Jf: jf, K: k}
	}
	deny := seccompRetErrno | uint32(unix.EPERM)
	return []unix.SockFilter{
		/* 0 */ st(bpfLD|bpfW|bpfABS, seccompArch),
		/* 1 */ jeq(arch, 1, 0),
		/* 2 */ st(bpfRET|bpfK, deny), // another ABI
		/* 3 */ st(bpfLD|bpfW|bpfABS, seccompNr),
		/* 4 */ {Code: bpfJMP | bpfJGE | bpfK, Jt: 0, Jf: 1, K: x32SyscallBit},
		/* 5 */ st(bpfRET|bpfK, deny), // x32
		/* 6 */ jeq(unix.SYS_IO_URING_SETUP, 0, 1),
		/* 7 */ st(bpfRET|bpfK, deny),
		/* 8 */ jeq(unix.SYS_SOCKET, 1, 0),
		/* 9 */ jeq(unix.SYS_SOCKETPAIR, 0, 3),
		/* 10 */ st(bpfLD|bpfW|bpfABS, seccompArg0),
		/* 11 */ jeq(unix.AF_VSOCK, 0, 1),
		/* 12 */ st(bpfRET|bpfK, deny),
		/* 13 */ st(bpfRET|bpfK, seccompRetAllow),
	}, nil
}

// applyAgentFilter installs the filter on the calling thread only (no
// TSYNC). The caller is root with CAP_SYS_ADMIN, so no_new_privs is not
// needed: setuid programs an agent runs keep working, under the filter.
func ApplyAgentFilter() error {
	f, err := agentFilter()
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp filter for agent processes: %w", err)
	}
	runtime.KeepAlive(f)
	return nil
}
