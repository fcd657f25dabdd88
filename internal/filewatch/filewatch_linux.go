//go:build linux

package filewatch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mask is what changes a directory's entries, or may bring a missing
// directory below it into being. Every watch uses the one mask: watches
// of one directory share a descriptor and its mask. Not IN_CLOSE_WRITE
// or IN_ATTRIB: a write is an IN_MODIFY already, and closing a database
// connection is no change (a follower re-reading on it could wake itself).
const mask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
	unix.IN_MODIFY | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// gone is the watched directory itself going away.
const gone = unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_IGNORED

// target is a Target and the watch serving it.
type target struct {
	Target
	watched string // dir, or its nearest existing ancestor while dir is missing
	wd      int
}

type inotify struct {
	w  *Watcher
	f  *os.File
	rc syscall.RawConn

	mu      sync.Mutex
	targets []*target
}

// start watches targets. Without inotify (the per-user limit of instances
// is 128 by default), or when a target can't be watched (no permission),
// it polls, so the caller works either way.
func start(ctx context.Context, poll time.Duration, targets []Target) *Watcher {
	w := newWatcher()
	ctx, cancel := context.WithCancel(ctx)
	exited := make(chan struct{})
	w.stop = func() { cancel(); <-exited }
	in, err := open(w)
	if err == nil {
		err = in.set(targets)
	}
	if err != nil {
		if in != nil {
			in.f.Close()
		}
		go func() { defer close(exited); w.pollLoop(ctx.Done(), poll) }()
		return w
	}
	w.reset = func(ts []Target) {
		if in.set(ts) != nil {
			// A folder that can't be watched (no permission) can't be
			// read either: one re-read shows the caller the error.
			w.notify()
		}
	}
	go func() {
		<-ctx.Done()
		in.f.Close() // ends the read in loop
	}()
	go func() { defer close(exited); in.loop() }()
	return w
}

func open(w *Watcher) (*inotify, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	// A non-blocking fd in an *os.File waits in the runtime's poller, and
	// Close wakes the read.
	f := os.NewFile(uintptr(fd), "inotify")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &inotify{w: w, f: f, rc: rc}, nil
}

// set replaces the targets, keeping the watches of those that stay.
func (in *inotify) set(ts []Target) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	old := map[Target]*target{}
	for _, t := range in.targets {
		old[t.Target] = t
	}
	var next []*target
	var errs error
	for _, t := range ts {
		if o, ok := old[t]; ok {
			next = append(next, o)
			delete(old, t)
			continue
		}
		nt := &target{Target: t, wd: -1}
		errs = errors.Join(errs, in.arm(nt))
		next = append(next, nt)
	}
	in.targets = next
	for _, o := range old {
		in.drop(o.wd)
	}
	return errs
}

// arm watches t's dir, or its nearest existing ancestor while it is
// missing, and drops its previous watch if that was another. Under mu.
func (in *inotify) arm(t *target) error {
	for p := t.dir; ; {
		var wd int
		var err error
		// Control keeps the fd open while in use, whatever Close does.
		if cerr := in.rc.Control(func(fd uintptr) {
			wd, err = unix.InotifyAddWatch(int(fd), p, mask)
		}); cerr != nil {
			return cerr
		}
		if err == nil {
			prev := t.wd
			t.wd, t.watched = wd, p
			if prev != wd {
				in.drop(prev)
			}
			return nil
		}
		up := filepath.Dir(p)
		if !(errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)) || up == p {
			return err
		}
		p = up
	}
}

// drop removes watch wd unless a target still uses it. Under mu.
func (in *inotify) drop(wd int) {
	if wd < 0 {
		return
	}
	for _, t := range in.targets {
		if t.wd == wd {
			return
		}
	}
	// It may be gone already (its directory removed): no matter.
	in.rc.Control(func(fd uintptr) { unix.InotifyRmWatch(int(fd), uint32(wd)) })
}

func (in *inotify) loop() {
	buf := make([]byte, 64<<10)
	for {
		n, err := in.f.Read(buf)
		if err != nil {
			return // closed
		}
		if in.handle(buf[:n]) {
			in.w.notify()
		}
	}
}

// handle reports whether events in buf change a target, re-arming the
// targets whose watched directory went or whose missing one may have
// appeared.
func (in *inotify) handle(buf []byte) (changed bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	rearm := map[*target]bool{}
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		end := off + unix.SizeofInotifyEvent + int(ev.Len)
		name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:min(end, len(buf))], "\x00"))
		off = end
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			changed = true // events were lost: say so
			continue
		}
		for _, t := range in.targets {
			switch {
			case int(ev.Wd) != t.wd:
			case ev.Mask&gone != 0 || t.watched != t.dir:
				rearm[t] = true
			case t.name != "":
				changed = changed || name == t.name
			default:
				changed = changed || !ignored(name)
			}
		}
	}
	for t := range rearm {
		prev := t.watched
		if err := in.arm(t); err != nil {
			changed = true // can't follow it any more; the root is gone?
			continue
		}
		// The directory appeared or went: its entries changed.
		changed = changed || t.watched != prev
	}
	return changed
}

// ignored reports whether an entry's change doesn't count in a directory
// watch: internal/atomicfile's temporary files, whose rename into place is
// the change that matters.
func ignored(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}
