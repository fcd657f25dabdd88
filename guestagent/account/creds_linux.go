//go:build linux

package account

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/osthread"
	"golang.org/x/sys/unix"
)

// The main goroutine keeps the process's main thread to itself, so runAs
// never runs on it: the runtime could not destroy that thread afterwards.
func init() { runtime.LockOSThread() }

// runAs runs fn with a's file-system identity, so the kernel checks every
// file access as it would for that user. Root runs fn directly.
//
// Why not setresuid: the kernel decides whether one process may signal
// (kill, tgkill) or change the limits of (prlimit) a thread by that
// thread's real and saved uids. A thread of PID 1 that takes an agent's
// uids, even for the length of one file operation, is one the agent can
// send SIGQUIT (the Go runtime dies, the kernel panics) or whose process
// it can give RLIMIT_NOFILE 0. So the thread keeps uid and gid 0 (real,
// effective and saved) and changes only what file access is checked
// against, all per thread through raw syscalls:
//   - fsuid and fsgid become a's: permission checks, ownership of new
//     files, sticky-directory and protected_* rules, quotas all use them;
//   - the supplementary groups become a's;
//   - every effective capability is dropped (the permitted set stays, the
//     thread is never used again anyway). Dropping only the file ones,
//     as setfsuid does by itself, would leave e.g. CAP_SYS_RESOURCE (a
//     write past the disk quota and the root-reserved blocks) and
//     CAP_SYS_PTRACE (other processes' /proc files) in force.
//
// A per-agent helper process in the agent's cgroup would also do; it
// costs a process per agent (or per call) and a second protocol, for the
// same kernel checks.
//
// fn runs on a fresh goroutine locked to its OS thread, which exits
// without unlocking: the runtime then destroys the thread instead of
// reusing it, so no credential change outlives the call whatever fn did.
// Threads the runtime starts while a locked thread runs are cloned from
// its template thread, not from this one. fn must not hand work to other
// goroutines: they would run as root.
func RunAs[T any](a *Account, fn func() (T, error)) (T, error) {
	if a.UID == 0 {
		return fn()
	}
	return osthread.Throwaway(func() (v T, err error) {
		if unix.Gettid() == unix.Getpid() {
			return v, fmt.Errorf("%w: refusing to run as %s on the process's main thread", agentproto.ErrInternal, a.Name)
		}
		// The agent's mount namespace and umask, while still root.
		if err := enterAgent(a); err != nil {
			return v, err
		}
		if err := setThreadFSCreds(a); err != nil {
			return v, err
		}
		return fn()
	})
}

// setThreadFSCreds gives the calling thread a's file-system identity and
// no effective capability, then checks the result: a thread that is not
// exactly as intended must not run fn.
func setThreadFSCreds(a *Account) error {
	groups := make([]uint32, 0, len(a.Groups))
	for _, g := range a.Groups {
		groups = append(groups, uint32(g))
	}
	var gp unsafe.Pointer
	if len(groups) > 0 {
		gp = unsafe.Pointer(&groups[0])
	}
	// Groups and ids change while the thread still has CAP_SETGID and
	// CAP_SETUID; the capabilities go last.
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(gp), 0); e != 0 {
		return fmt.Errorf("%w: setgroups for %s: %v", agentproto.ErrInternal, a.Name, e)
	}
	gid, uid := uintptr(a.GID), uintptr(a.UID)
	// setfs*id report no error; each returns the previous id, so a second
	// call tells whether the first took.
	unix.RawSyscall(unix.SYS_SETFSGID, gid, 0, 0)
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, gid, 0, 0); r != gid {
		return fmt.Errorf("%w: setfsgid %d did not take (fsgid %d)", agentproto.ErrInternal, a.GID, r)
	}
	unix.RawSyscall(unix.SYS_SETFSUID, uid, 0, 0)
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, uid, 0, 0); r != uid {
		return fmt.Errorf("%w: setfsuid %d did not take (fsuid %d)", agentproto.ErrInternal, a.UID, r)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3} // pid 0: this thread
	var caps [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&caps[0])), 0); e != 0 {
		return fmt.Errorf("%w: capget: %v", agentproto.ErrInternal, e)
	}
	caps[0].Effective, caps[1].Effective = 0, 0
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&caps[0])), 0); e != 0 {
		return fmt.Errorf("%w: capset (dropping effective capabilities): %v", agentproto.ErrInternal, e)
	}
	return checkThreadCreds(a)
}

// restoreThreadRootCreds undoes setThreadFSCreds on a thread that still
// has its permitted capabilities: the effective set back from them, then
// root's file-system ids and no supplementary group; then it checks.
func restoreThreadRootCreds() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&caps[0])), 0); e != 0 {
		return fmt.Errorf("%w: capget: %v", agentproto.ErrInternal, e)
	}
	caps[0].Effective, caps[1].Effective = caps[0].Permitted, caps[1].Permitted
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&caps[0])), 0); e != 0 {
		return fmt.Errorf("%w: capset (restoring effective capabilities): %v", agentproto.ErrInternal, e)
	}
	unix.RawSyscall(unix.SYS_SETFSUID, 0, 0, 0)
	unix.RawSyscall(unix.SYS_SETFSGID, 0, 0, 0)
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("%w: setgroups: %v", agentproto.ErrInternal, e)
	}
	if fs, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); fs != 0 {
		return fmt.Errorf("%w: thread fsuid %d after restoring root's", agentproto.ErrInternal, fs)
	}
	if fs, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); fs != 0 {
		return fmt.Errorf("%w: thread fsgid %d after restoring root's", agentproto.ErrInternal, fs)
	}
	var got [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&got[0])), 0); e != 0 || got[0].Effective != caps[0].Permitted || got[1].Effective != caps[1].Permitted {
		return fmt.Errorf("%w: thread effective capabilities not restored (errno %v)", agentproto.ErrInternal, e)
	}
	return nil
}

// checkThreadCreds verifies the calling thread: uids and gids 0 but for
// the file-system ones, which are a's, and no effective capability.
func checkThreadCreds(a *Account) error {
	var r, e, s uint32
	if _, _, errno := unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&e)), uintptr(unsafe.Pointer(&s))); errno != 0 || r|e|s != 0 {
		return fmt.Errorf("%w: thread uids %d/%d/%d, want 0 (errno %v)", agentproto.ErrInternal, r, e, s, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_GETRESGID, uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&e)), uintptr(unsafe.Pointer(&s))); errno != 0 || r|e|s != 0 {
		return fmt.Errorf("%w: thread gids %d/%d/%d, want 0 (errno %v)", agentproto.ErrInternal, r, e, s, errno)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if _, _, errno := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&caps[0])), 0); errno != 0 || caps[0].Effective|caps[1].Effective != 0 {
		return fmt.Errorf("%w: thread keeps effective capabilities %#x%08x (errno %v)", agentproto.ErrInternal, caps[1].Effective, caps[0].Effective, errno)
	}
	if fs, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); fs != uintptr(a.UID) {
		return fmt.Errorf("%w: thread fsuid %d, want %d", agentproto.ErrInternal, fs, a.UID)
	}
	return nil
}

// killAs sends sig to pid if a may: as kill(2) decides for a sender whose
// real and effective uid are a's, the target's real or saved uid must be
// a's. PID 1 signals with its own rights (a thread with a's uids is what
// runAs avoids), so it makes the check itself. The pidfd pins the
// process: if pid ends and is reused between the check and the signal,
// the signal fails (ESRCH) instead of reaching the newcomer.
func KillAs(a *Account, pid int, sig unix.Signal) error {
	if pid <= 0 {
		return unix.EINVAL
	}
	if a.UID == 0 {
		return unix.Kill(pid, sig)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ruid, suid, err := procUIDs(pid)
	if err != nil {
		return unix.ESRCH // gone meanwhile
	}
	if ruid != a.UID && suid != a.UID {
		return unix.EPERM
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// killGroupAs signals every process of process group pgid that a may
// signal, as kill(-pgid) does: success if it reached one, EPERM if none
// was a's, ESRCH if the group is empty.
func KillGroupAs(a *Account, pgid int, sig unix.Signal) error {
	if pgid <= 1 {
		return unix.EINVAL
	}
	if a.UID == 0 {
		return unix.Kill(-pgid, sig)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	found, sent := false, false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || procPgrp(pid) != pgid {
			continue
		}
		found = true
		if KillAs(a, pid, sig) == nil {
			sent = true
		}
	}
	switch {
	case sent:
		return nil
	case found:
		return unix.EPERM
	}
	return unix.ESRCH
}

// procUIDs reads a process's real and saved uid from /proc.
func procUIDs(pid int) (ruid, suid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 3 {
				r, err1 := strconv.Atoi(f[0])
				s, err2 := strconv.Atoi(f[2])
				if err1 == nil && err2 == nil {
					return r, s, nil
				}
			}
		}
	}
	return 0, 0, errors.New("no Uid line")
}

// procPgrp is a process's process group from /proc/PID/stat, or -1.
func procPgrp(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The command name may hold spaces and parentheses: fields start
	// after the last ')'. Then: state, ppid, pgrp.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return -1
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return n
}

// credential is a's identity for a child process.
func (a *Account) Credential() *syscall.Credential {
	groups := make([]uint32, 0, len(a.Groups))
	for _, g := range a.Groups {
		groups = append(groups, uint32(g))
	}
	return &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: groups}
}
