// Package diskquota accounts for the disk space each agent uses in the
// host folders shared with the VM and enforces the agents' quotas and the
// host's free-space floor from the host, where an agent can't undo it.
//
// A Tracker keeps the size of every file under its roots. On Linux it
// follows changes with inotify and re-stats only the paths that changed,
// so a refresh costs in proportion to what was written, not to the size of
// the tree; elsewhere (or when inotify runs out of watches) each refresh
// walks the tree again. Watches are bounded per agent (MaxWatchesPerAgent):
// an agent's directories over the bound are re-read in turn, a bounded
// number of entries a refresh.
package diskquota

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// entry is one file or directory as last seen.
type entry struct {
	bytes int64  // allocated bytes (st_blocks × 512)
	uid   uint32 // owner on the host
	home  string // slug of the agent home it lies in, or ""
	dir   bool
}

// Tracker sums disk use per agent home and, for files outside any home
// (the shared area, /output), per owner uid.
type Tracker struct {
	homes string   // <workspace>/agents
	roots []string // trees accounted

	mu     sync.Mutex
	files  map[string]entry
	byHome map[string]int64
	byUID  map[uint32]int64
	w      watcher // nil: walk on every refresh
	// unwatched are the directories the watcher declined (their owner
	// is at its bound): re-read in turn, rescanBudget a refresh, from
	// queue.
	unwatched map[string]struct{}
	queue     []string
	n         int // refreshes since the last full walk
	stats     int // paths read since New (what a refresh costs, for tests)
}

// fullEvery makes every so many refreshes a full walk, which heals what a
// watcher can miss (a file created between listing a new directory and
// watching it).
const fullEvery = 60

// NewTracker accounts for roots; homes is the directory whose children are
// agents' homes (<workspace>/agents). Call Refresh to take the first
// measure, Close to release the watches.
func NewTracker(homes string, roots ...string) *Tracker {
	t := &Tracker{homes: filepath.Clean(homes), roots: roots}
	t.reset()
	t.w = newWatcher()
	return t
}

func (t *Tracker) reset() {
	t.files = map[string]entry{}
	t.byHome = map[string]int64{}
	t.byUID = map[uint32]int64{}
	t.unwatched = map[string]struct{}{}
	t.queue = nil
}

// Incremental reports whether refreshes follow changes (inotify) rather
// than walking everything.
func (t *Tracker) Incremental() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.w != nil && t.w.ok()
}

// Close stops watching.
func (t *Tracker) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w != nil {
		t.w.close()
		t.w = nil
	}
}

// Home is the bytes used under the agent home slug.
func (t *Tracker) Home(slug string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byHome[slug]
}

// Usage is what the agent with home slug and uid uses: its home, plus
// files it owns elsewhere under the roots.
func (t *Tracker) Usage(slug string, uid int) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.byHome[slug]
	if uid > 0 {
		n += t.byUID[uint32(uid)]
	}
	return n
}

// Refresh brings the accounting up to date: the paths the watcher saw
// change, or every path when there is no watcher (or it lost events).
func (t *Tracker) Refresh() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	if t.w != nil && t.w.ok() && len(t.files) > 0 && t.n < fullEvery {
		dirty, overflow := t.w.drain()
		if !overflow {
			for _, p := range dirty {
				t.update(p)
			}
			t.rescan()
			return
		}
	}
	t.n = 0
	if t.w != nil {
		t.w.drain() // the walk sees everything they name
	}
	t.reset()
	for _, r := range t.roots {
		t.walk(r)
	}
}

// update re-reads one path that changed.
func (t *Tracker) update(p string) {
	fi, err := os.Lstat(p)
	if err != nil {
		t.drop(p)
		return
	}
	if fi.IsDir() {
		if old, ok := t.files[p]; !ok || !old.dir {
			t.drop(p)
			t.walk(p) // a new or moved-in directory
			return
		}
	}
	t.set(p, fi)
}

// walk adds every path under root (root included).
func (t *Tracker) walk(root string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: skip it
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		e := t.set(p, fi)
		if d.IsDir() && t.w != nil {
			if t.w.add(p, e.owner()) {
				delete(t.unwatched, p)
			} else {
				t.unwatched[p] = struct{}{}
			}
		}
		return nil
	})
}

// rescan re-reads the next directories left unwatched, until it has read
// rescanBudget entries: what appeared in them is added (a new directory
// walked), what changed is updated, what vanished is dropped.
func (t *Tracker) rescan() {
	if len(t.queue) == 0 {
		for d := range t.unwatched {
			t.queue = append(t.queue, d)
		}
	}
	listed := map[string]map[string]struct{}{} // unwatched dir → its names
	for read := 0; read < rescanBudget && len(t.queue) > 0; {
		dir := t.queue[0]
		t.queue = t.queue[1:]
		read++
		if _, ok := t.unwatched[dir]; !ok {
			continue // gone, or watched since
		}
		t.stats++
		ents, err := os.ReadDir(dir)
		if err != nil {
			delete(t.unwatched, dir)
			t.update(dir) // gone or no longer a directory
			continue
		}
		read += len(ents)
		names := make(map[string]struct{}, len(ents))
		for _, de := range ents {
			names[de.Name()] = struct{}{}
			t.update(filepath.Join(dir, de.Name()))
		}
		listed[dir] = names
	}
	if len(listed) == 0 {
		return
	}
	var gone []string
	for p := range t.files {
		names, ok := listed[filepath.Dir(p)]
		if !ok {
			continue
		}
		if _, still := names[filepath.Base(p)]; !still {
			gone = append(gone, p)
		}
	}
	for _, p := range gone {
		t.drop(p)
		delete(t.unwatched, p)
	}
}

func (t *Tracker) set(p string, fi fs.FileInfo) entry {
	t.stats++
	t.remove(p)
	e := entry{dir: fi.IsDir(), home: t.homeOf(p)}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.bytes = int64(st.Blocks) * 512
		e.uid = st.Uid
	} else {
		e.bytes = fi.Size()
	}
	t.files[p] = e
	t.account(e, e.bytes)
	return e
}

// owner is whom a watch of this directory counts against: the agent
// whose home it lies in, or the uid that owns it.
func (e entry) owner() string {
	if e.home != "" {
		return "home " + e.home
	}
	return "uid " + strconv.FormatUint(uint64(e.uid), 10)
}

// drop forgets p and, when it was a directory, everything under it.
func (t *Tracker) drop(p string) {
	e, ok := t.files[p]
	t.remove(p)
	if ok && e.dir {
		prefix := p + string(filepath.Separator)
		for q := range t.files {
			if strings.HasPrefix(q, prefix) {
				t.remove(q)
			}
		}
	}
}

func (t *Tracker) remove(p string) {
	if e, ok := t.files[p]; ok {
		t.account(e, -e.bytes)
		delete(t.files, p)
	}
}

func (t *Tracker) account(e entry, n int64) {
	if e.home != "" {
		t.byHome[e.home] += n
	} else {
		t.byUID[e.uid] += n
	}
}

// homeOf is the slug of the home p lies in (the home itself included).
func (t *Tracker) homeOf(p string) string {
	rel, ok := strings.CutPrefix(p, t.homes+string(filepath.Separator))
	if !ok {
		return ""
	}
	slug, _, _ := strings.Cut(rel, string(filepath.Separator))
	return slug
}
