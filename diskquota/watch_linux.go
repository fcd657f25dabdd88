//go:build linux

package diskquota

import (
	"path/filepath"
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

	mu       sync.Mutex
	dirs     map[int]string // watch descriptor → directory
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
	w := &inotifyWatcher{fd: fd, dirs: map[int]string{}, dirty: map[string]struct{}{}}
	go w.read()
	return w
}

func (w *inotifyWatcher) add(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, watchMask)
	if err != nil {
		if err == unix.ENOSPC {
			w.broken = true // out of watches: walk instead
		}
		return
	}
	w.dirs[wd] = dir // the same directory moved gets the same wd
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
				delete(w.dirs, int(ev.Wd))
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
