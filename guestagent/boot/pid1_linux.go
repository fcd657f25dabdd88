//go:build linux

package boot

import (
	"errors"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// fatalSignals are the signals whose default in a Go program ends it:
// SIGQUIT and SIGABRT dump goroutines and exit, SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGTRAP and SIGSYS sent with kill(2) throw, the terminal and
// user signals and the real-time ones exit. PID 1 must survive every one,
// or the kernel panics and every agent's work is lost. Left out: SIGKILL
// and SIGSTOP (the kernel never delivers them to PID 1 from user space),
// SIGCHLD (the reaper's), SIGURG (the runtime's preemption), SIGPROF,
// SIGWINCH and SIGCONT (harmless by default).
func fatalSignals() []os.Signal {
	sigs := []os.Signal{
		unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP, unix.SIGABRT,
		unix.SIGBUS, unix.SIGFPE, unix.SIGUSR1, unix.SIGSEGV, unix.SIGUSR2, unix.SIGPIPE,
		unix.SIGALRM, unix.SIGTERM, unix.SIGSTKFLT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU,
		unix.SIGXCPU, unix.SIGXFSZ, unix.SIGVTALRM, unix.SIGIO, unix.SIGPWR, unix.SIGSYS,
	}
	// Real-time signals; 32 and 33 are the C library's own.
	for s := 34; s <= 64; s++ {
		sigs = append(sigs, syscall.Signal(s))
	}
	return sigs
}

// catchFatalSignals installs handlers for fatalSignals that log and drop
// them. They are caught, not ignored: an ignored disposition would be
// inherited by every process PID 1 starts. The log says who, for the
// first few of each kind, so a flood can't fill the console.
//
// Not covered, as no program can: a signal forged with rt_sigqueueinfo to
// look like a fault (only root can, and only root may signal PID 1: its
// threads keep uid 0, see runAs).
func catchFatalSignals(lg *log.Logger) {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, fatalSignals()...)
	go func() {
		seen := map[os.Signal]int{}
		for sig := range ch {
			if seen[sig]++; seen[sig] <= 5 {
				lg.Printf("ignoring %v sent to PID 1", sig)
			}
		}
	}()
}

// closeFUSE removes /dev/fuse, so no agent can make a FUSE mount: not
// with the device itself, not through a setuid fusermount (which opens it
// as root), and not in a user namespace of its own (hardenKernel turns
// those off). A FUSE file system in an agent's home whose daemon never
// answers would hang any PID-1 thread that looks inside it, for good:
// PID 1 can't be killed out of the wait. The node can't come back on its
// own: fuse is loaded before this runs and module loading is turned off
// after boot, and only root may mknod. virtiofs shares don't need the
// node.
func (b *boot) closeFUSE() {
	if err := os.Remove("/dev/fuse"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.warn("remove /dev/fuse: %v: agents could make FUSE mounts", err)
	}
}
