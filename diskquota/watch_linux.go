//go:build linux

package diskquota

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

// inotifyWatcher collects changed paths from an inotify descriptor read by
// its own goroutine.
type inotifyWatcher struct {
	fd int

	// limit is the watches one owner gets (MaxWatchesPerAgent); total
	// those all owners get together, a share of max_user_watches.
	limit, total int

	mu       sync.Mutex
	dirs     map[int]string // watch descriptor → directory
	owners   map[int]string // watch descriptor → owner it counts against
	byDir    map[string]int // directory → watch descriptor
	count    map[string]int // owner → watches
	dirty    map[string]struct{}
	overflow bool
	broken   bool
	closed   bool
}

func newWatcher() watcher {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &inotifyWatcher{fd: fd, limit: MaxWatchesPerAgent, total: watchShare(),
		dirs: map[int]string{}, owners: map[int]string{}, byDir: map[string]int{}, count: map[string]int{}, dirty: map[string]struct{}{}}
	go w.read()
	return w
}

// watchShare is what all agents together may take of the host user's
// max_user_watches: a quarter, so the user's own tools keep the rest.
func watchShare() int {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return 8192 / 4 // the kernel's smallest default
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 8192 / 4
	}
	return n / 4
}

func (w *inotifyWatcher) add(dir, owner string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if w.count[owner] >= w.limit || len(w.dirs) >= w.total {
		// A directory watched already (walked again) stays watched.
		_, ok := w.byDir[dir]
		return ok
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		if err == unix.ENOSPC {
			w.broken = true // out of watches: walk instead
		}
		return false
	}
	// The same directory (inode) watched again, or moved, gets the same
	// wd: counted once, against its latest owner.
	if old, ok := w.owners[wd]; ok {
		w.count[old]--
		delete(w.byDir, w.dirs[wd])
	}
	w.dirs[wd], w.owners[wd], w.byDir[dir] = dir, owner, wd
	w.count[owner]++
	return true
}

func (w *inotifyWatcher) ok() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.broken && !w.closed
}

func (w *inotifyWatcher) drain() ([]string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	paths := make([]string, 0, len(w.dirty))
	for p := range w.dirty {
		paths = append(paths, p)
	}
	clear(w.dirty)
	o := w.overflow
	w.overflow = false
	return paths, o
}

func (w *inotifyWatcher) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		unix.Close(w.fd) // ends read
	}
}

func (w *inotifyWatcher) read() {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			w.mu.Lock()
			w.broken = true
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameLen := int(ev.Len)
			name := ""
			if nameLen > 0 && off+unix.SizeofInotifyEvent+nameLen <= n {
				b := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
				for i, c := range b {
					if c == 0 {
						b = b[:i]
						break
					}
				}
				name = string(b)
			}
			off += unix.SizeofInotifyEvent + nameLen
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				w.overflow = true
				continue
			}
			dir, ok := w.dirs[int(ev.Wd)]
			if ev.Mask&unix.IN_IGNORED != 0 {
				// The directory is gone: its watch no longer counts.
				if o, ok := w.owners[int(ev.Wd)]; ok {
					if w.count[o]--; w.count[o] <= 0 {
						delete(w.count, o)
					}
				}
				if w.byDir[dir] == int(ev.Wd) {
					delete(w.byDir, dir)
				}
				delete(w.dirs, int(ev.Wd))
				delete(w.owners, int(ev.Wd))
				continue
			}
			if !ok {
				continue
			}
			if name == "" {
				w.dirty[dir] = struct{}{}
			} else {
				w.dirty[filepath.Join(dir, name)] = struct{}{}
			}
		}
		w.mu.Unlock()
	}
}
