// Package filewatch tells a process that files or directories' entries
// changed, so it can re-read them instead of polling on a timer: an idle
// app then sleeps until something actually changes.
//
// On Linux it uses inotify. A file is watched through its parent directory,
// filtered by name, because our writes replace files by atomic rename (a
// watch on the file itself would follow the old inode and go quiet). A
// missing directory is waited for: its nearest existing ancestor is watched
// until it appears. Elsewhere, or when inotify can't be had, it falls back
// to a signal every poll interval, which is what the callers did before
// (they check for a change themselves).
//
// Changes are coalesced: the channel holds at most one pending signal, so
// a burst of writes wakes the reader once or twice, never once per write.
package filewatch

import (
	"context"
	"path/filepath"
	"sync"
	"time"
)

// Target is a file, or a directory's entries, to watch.
type Target struct {
	dir, name string // name "" is every entry of dir
}

// File is the file at path: its creation, writes, replacement by rename
// and removal.
func File(path string) Target {
	path = filepath.Clean(path)
	return Target{dir: filepath.Dir(path), name: filepath.Base(path)}
}

// Dir is the entries of dir: files created, written, renamed or removed
// in it (not in its subdirectories). Our atomic writes' temporary files
// (".name.tmp-*") don't count; their rename into place does.
func Dir(dir string) Target { return Target{dir: filepath.Clean(dir)} }

// Watcher signals on C after one of its targets may have changed. A
// signal is a hint to re-read; callers that compare what they read may
// see no difference.
type Watcher struct {
	c     chan struct{}
	stop  func()
	reset func([]Target)
	once  sync.Once
}

// Watch watches targets until ctx ends or Close. poll is the interval of
// the fallback where change notification isn't available.
func Watch(ctx context.Context, poll time.Duration, targets ...Target) *Watcher {
	return start(ctx, poll, targets)
}

// C delivers a signal after a change.
func (w *Watcher) C() <-chan struct{} { return w.c }

// Reset replaces the watched targets, e.g. when the set of files to
// follow changed. It sends no signal: the caller has just read them.
func (w *Watcher) Reset(targets ...Target) { w.reset(targets) }

// Close stops watching; no signal is sent once it returns (one may be
// pending). C is not closed. Close may be called again.
func (w *Watcher) Close() error {
	w.once.Do(w.stop)
	return nil
}

func (w *Watcher) notify() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

func newWatcher() *Watcher {
	return &Watcher{c: make(chan struct{}, 1), reset: func([]Target) {}}
}

// pollLoop signals every interval until done; the fallback.
func (w *Watcher) pollLoop(done <-chan struct{}, every time.Duration) {
	if every <= 0 {
		every = 2 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			w.notify()
		}
	}
}
