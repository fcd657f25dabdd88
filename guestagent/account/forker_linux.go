//go:build linux

package account

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent/network"
)

// Prepared threads for starting agents' processes.
//
// An agent's process must be forked by a thread in the agent's state: a
// file-system context of its own with umask 077, the agent's mount
// namespace, its network namespace and the agents' seccomp filter, all of
// which the child inherits. Making that state for every call (a new
// thread, unshare, two setns, a filter to load) cost about a millisecond
// of every call under emulation, 4 ms on a busy machine. A forker is a
// thread that takes that state once, for one agent and one network
// namespace, and forks the agent's processes from then on: the same state
// the throwaway thread had at its fork, made once.
//
// The thread is locked to its goroutine for its whole life and never runs
// anything else (LockOSThread: the runtime neither schedules other
// goroutines on it nor clones new threads from it). It ends, and the
// runtime destroys it because its goroutine exits locked, when the
// agent's mount namespace is not the one it joined (the agent's area was
// dropped or made again, the user's uid changed), when its user's area is
// dropped (Drop, on the user's removal), when a newer network namespace
// of the user pushes it out, or after any step of a start failed in a way
// that leaves the thread's state in doubt.

// ForkAsAgent runs fork on a thread in a's state (enterAgent) and in
// ns, when set, under the agents' seccomp filter, so the child starts
// there: a's prepared thread (forker_linux.go), made on first use. check,
// when set, runs first on the same thread with a's file-system identity,
// as under RunAs; the thread takes root's back for the fork, which needs
// it to give the child its credentials. One thread does both: under
// emulation a thread and a namespace switch cost more than the checks.
func ForkAsAgent(a *Account, ns netns.NsHandle, check func() error, fork func() (int, error)) (int, error) {
	if a.UID == 0 {
		if check != nil {
			if err := check(); err != nil {
				return 0, err
			}
		}
		return network.SpawnIn(ns, fork)()
	}
	return forkOnPrepared(a, ns, check, fork)
}

// forkerKey names a forker: the user and the network namespace it joined.
type forkerKey struct {
	user string
	net  netID // zero: the guest's own network namespace
}

// netID identifies a network namespace by its nsfs inode. The forker
// holds its namespace alive, so no other namespace can take the inode
// while the forker exists.
type netID struct{ dev, ino uint64 }

// maxForkersPerUser bounds the prepared threads per user: its own
// network namespace and the plugin namespaces it used last.
const maxForkersPerUser = 2

type forker struct {
	key  forkerKey
	uid  int
	mnt  *tmpNS // the agent namespace it joined; nil without private areas
	jobs chan func() bool
	quit chan struct{} // closed to retire it
	done chan struct{} // closed when its thread has ended
	used uint64        // forkers.seq at its last use
}

var forkers = struct {
	mu  sync.Mutex
	m   map[forkerKey]*forker
	seq uint64
}{m: map[forkerKey]*forker{}}

func netIdentity(ns netns.NsHandle) (netID, error) {
	if int(ns) <= 0 {
		return netID{}, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		return netID{}, fmt.Errorf("%w: the agent's network namespace: %v", agentproto.ErrInternal, err)
	}
	return netID{st.Dev, st.Ino}, nil
}

// forkOnPrepared runs check (as a, see ForkAsAgent) and fork on a's
// prepared thread for ns, making the thread first when there is none
// that is current.
func forkOnPrepared(a *Account, ns netns.NsHandle, check func() error, fork func() (int, error)) (int, error) {
	net, err := netIdentity(ns)
	if err != nil {
		return 0, err
	}
	var mnt *tmpNS
	t := ActiveTmps()
	if t != nil {
		if err := t.Ensure(a, nil); err != nil {
			return 0, err
		}
		t.mu.Lock()
		mnt = t.ns[a.Name]
		t.mu.Unlock()
		if mnt == nil {
			return 0, fmt.Errorf("%w: %s has no private temporary directories", agentproto.ErrInternal, a.Name)
		}
	}
	key := forkerKey{a.Name, net}
	// A thread that ended between the lookup and the hand-over (retired
	// by Drop or a newer namespace) is made again, once.
	for range 2 {
		f, err := forkerFor(a, key, t, mnt, ns)
		if err != nil {
			return 0, err
		}
		if pid, err, ran := f.run(a, check, fork); ran {
			return pid, err
		}
	}
	return 0, fmt.Errorf("%w: the thread that starts %s's processes ended", agentproto.ErrInternal, a.Name)
}

// forkerFor returns the current forker for key, making it if needed.
// Lock order: the table's lock (t.mu) before forkers.mu; no lock is held
// while a new thread takes its state (which takes t.mu).
func forkerFor(a *Account, key forkerKey, t *tmpTable, mnt *tmpNS, ns netns.NsHandle) (*forker, error) {
	forkers.mu.Lock()
	forkers.seq++
	if f := forkers.m[key]; f != nil {
		if f.alive() && f.uid == a.UID && f.mnt == mnt {
			f.used = forkers.seq
			forkers.mu.Unlock()
			return f, nil
		}
		f.retire()
		delete(forkers.m, key)
	}
	forkers.mu.Unlock()

	f := &forker{key: key, uid: a.UID, mnt: mnt, jobs: make(chan func() bool), quit: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan error, 1)
	go f.loop(a, t, ns, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	if t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
	}
	forkers.mu.Lock()
	defer forkers.mu.Unlock()
	if t != nil && t.ns[a.Name] != mnt {
		// Dropped or made again meanwhile: this thread holds an old one.
		f.retire()
		return nil, fmt.Errorf("%w: %s's namespace changed while its process started", agentproto.ErrInternal, a.Name)
	}
	if old := forkers.m[key]; old != nil {
		old.retire() // a concurrent start made one too
		delete(forkers.m, key)
	}
	// The user's least recently used forkers beyond the bound go.
	var mine []*forker
	for _, g := range forkers.m {
		if g.key.user == key.user {
			mine = append(mine, g)
		}
	}
	for len(mine) >= maxForkersPerUser {
		old := 0
		for i, g := range mine {
			if g.used < mine[old].used {
				old = i
			}
		}
		mine[old].retire()
		delete(forkers.m, mine[old].key)
		mine = append(mine[:old], mine[old+1:]...)
	}
	forkers.seq++
	f.used = forkers.seq
	forkers.m[key] = f
	return f, nil
}

func (f *forker) alive() bool {
	select {
	case <-f.done:
		return false
	case <-f.quit:
		return false
	default:
		return true
	}
}

func (f *forker) retire() {
	select {
	case <-f.quit:
	default:
		close(f.quit)
	}
}

// retireForkers ends every forker of user (its area is being dropped);
// the caller may hold the table's lock.
func retireForkers(user string) {
	forkers.mu.Lock()
	defer forkers.mu.Unlock()
	for k, f := range forkers.m {
		if k.user == user {
			f.retire()
			delete(forkers.m, k)
		}
	}
}

// loop is the forker's thread: it takes a's state, says so on ready, and
// runs jobs until one fails or it is retired. It never unlocks its
// thread, so the thread ends with it.
func (f *forker) loop(a *Account, t *tmpTable, ns netns.NsHandle, ready chan<- error) {
	defer close(f.done)
	runtime.LockOSThread()
	err := f.prepare(a, t, ns)
	ready <- err
	if err != nil {
		return
	}
	for {
		select {
		case job := <-f.jobs:
			if !job() {
				return
			}
		case <-f.quit:
			return
		}
	}
}

// prepare puts the calling thread in a's state (enterAgent, with the
// namespace f.mnt) and ns, under the agents' filter.
func (f *forker) prepare(a *Account, t *tmpTable, ns netns.NsHandle) error {
	if unix.Gettid() == unix.Getpid() {
		return fmt.Errorf("%w: refusing to fork as %s on the process's main thread", agentproto.ErrInternal, a.Name)
	}
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("%w: unshare the file-system context: %v", agentproto.ErrInternal, err)
	}
	unix.Umask(agentUmask)
	if t != nil {
		t.mu.Lock()
		cur := t.ns[a.Name]
		var err error
		if cur != f.mnt {
			err = fmt.Errorf("%w: %s's namespace changed while its process started", agentproto.ErrInternal, a.Name)
		} else if e := unix.Setns(cur.fd, unix.CLONE_NEWNS); e != nil {
			err = fmt.Errorf("%w: join %s's mount namespace: %v", agentproto.ErrInternal, a.Name, e)
		}
		t.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return network.PrepareFork(ns)
}

// run hands check and fork to the forker's thread; ran is false when the
// thread had ended before it took them.
func (f *forker) run(a *Account, check func() error, fork func() (int, error)) (pid int, err error, ran bool) {
	type result struct {
		pid int
		err error
	}
	ch := make(chan result, 1)
	job := func() (keep bool) {
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("%w: panic while starting a process of %s: %v", agentproto.ErrInternal, a.Name, p)}
				keep = false
			}
		}()
		if check != nil {
			if err := setThreadFSCreds(a); err != nil {
				ch <- result{err: err}
				return false
			}
			cerr := check()
			// Root's identity back for the fork, which gives the child
			// its credentials; a thread that can't have it goes.
			if err := restoreThreadRootCreds(); err != nil {
				ch <- result{err: err}
				return false
			}
			if cerr != nil {
				ch <- result{err: cerr}
				return true
			}
		}
		pid, err := fork()
		ch <- result{pid, err}
		return true
	}
	select {
	case f.jobs <- job:
		r := <-ch
		return r.pid, r.err, true
	case <-f.done:
		return 0, nil, false
	}
}
