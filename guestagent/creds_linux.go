//go:build linux

package guestagent

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"golang.org/x/sys/unix"
)

// The main goroutine keeps the process's main thread to itself, so runAs
// never runs on it. Were it to, the runtime could not destroy that thread
// (it parks it instead) and the process's leader thread would keep an
// agent's uid: /proc/PID shows the leader's credentials, and the kernel
// checks them when the agent signals the process (PID 1 in the guest).
func init() { runtime.LockOSThread() }

// runAs runs fn with a's uid, gid and groups so the kernel checks every
// permission as it would for that user. Root runs fn directly.
//
// Linux credentials are per thread, and the raw set*id syscalls change only
// the calling thread (unlike syscall.Setuid, which changes them all). fn
// therefore runs on a fresh goroutine locked to its OS thread; the goroutine
// exits without unlocking, so the runtime destroys the thread instead of
// reusing it with foreign credentials. fn must not hand work to other
// goroutines: they would run with the agent's rights.
func runAs[T any](a *Account, fn func() (T, error)) (T, error) {
	if a.UID == 0 {
		return fn()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("%w: panic as user %s: %v", agentproto.ErrInternal, a.Name, p)}
			}
		}()
		if unix.Gettid() == unix.Getpid() {
			ch <- result{err: fmt.Errorf("%w: refusing to run as %s on the process's main thread", agentproto.ErrInternal, a.Name)}
			return
		}
		// The agent's mount namespace and umask, while still root.
		if err := enterAgent(a); err != nil {
			ch <- result{err: err}
			return
		}
		if err := setThreadCreds(a); err != nil {
			ch <- result{err: err}
			return
		}
		v, err := fn()
		ch <- result{v, err}
	}()
	r := <-ch
	return r.v, r.err
}

// do is runAs for functions without a result.
func do(a *Account, fn func() error) error {
	_, err := runAs(a, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

func setThreadCreds(a *Account) error {
	groups := make([]uint32, 0, len(a.Groups))
	for _, g := range a.Groups {
		groups = append(groups, uint32(g))
	}
	var gp unsafe.Pointer
	if len(groups) > 0 {
		gp = unsafe.Pointer(&groups[0])
	}
	// Order matters: groups and gid must change while the thread still has
	// CAP_SETGID, i.e. before the uid drops root.
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(gp), 0); e != 0 {
		return fmt.Errorf("%w: setgroups for %s: %v", agentproto.ErrInternal, a.Name, e)
	}
	gid, uid := uintptr(a.GID), uintptr(a.UID)
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, gid, gid, gid); e != 0 {
		return fmt.Errorf("%w: setresgid %d: %v", agentproto.ErrInternal, a.GID, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uid, uid, uid); e != 0 {
		return fmt.Errorf("%w: setresuid %d: %v", agentproto.ErrInternal, a.UID, e)
	}
	return nil
}

// credential is a's identity for a child process.
func (a *Account) credential() *syscall.Credential {
	groups := make([]uint32, 0, len(a.Groups))
	for _, g := range a.Groups {
		groups = append(groups, uint32(g))
	}
	return &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: groups}
}
