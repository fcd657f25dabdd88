//go:build linux

package exec

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Reaper collects the exit status of every child of the process, which as
// PID 1 includes every orphan in the VM. Processes the agent starts are
// registered with their waiter under the same lock as the fork, so an exit
// that happens before fork returns is still delivered to its waiter; all
// other statuses (orphans) are dropped.
//
// There can be only one Reaper per process: two wait4(-1) loops would steal
// each other's children.
type Reaper struct {
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus

	sig  chan os.Signal
	stop chan struct{}
	done chan struct{}
}

// reaperActive enforces the one-reaper rule; a second one is a bug that
// would lose exit statuses at random.
var reaperActive atomic.Bool

// errReaperActive is returned by NewReaper when a Reaper already runs.
var errReaperActive = errors.New("exec: a Reaper is already running in this process")

// NewReaper starts reaping. Close stops it.
func NewReaper() (*Reaper, error) {
	if !reaperActive.CompareAndSwap(false, true) {
		return nil, errReaperActive
	}
	r := &Reaper{
		waiters: map[int]chan unix.WaitStatus{},
		sig:     make(chan os.Signal, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	signal.Notify(r.sig, unix.SIGCHLD)
	go r.loop()
	return r, nil
}

// Close stops reaping. Registered waiters are not woken.
func (r *Reaper) Close() {
	signal.Stop(r.sig)
	close(r.stop)
	<-r.done
	reaperActive.Store(false)
}

func (r *Reaper) loop() {
	defer close(r.done)
	for {
		r.reapAll()
		select {
		case <-r.sig:
		case <-r.stop:
			return
		}
	}
}

func (r *Reaper) reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		ch := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ch != nil {
			ch <- ws // buffered: never blocks
		}
	}
}

// Start runs fork (which must create exactly one child and return its pid)
// and registers the child. The returned channel yields its wait status.
func (r *Reaper) Start(fork func() (int, error)) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	r.waiters[pid] = ch
	return pid, ch, nil
}
